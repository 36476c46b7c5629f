-- Prompt caching: the prompt tokens a provider read from its cache and wrote into it, apart
-- from `input_tokens` (which counts the rest of the prompt), so the three never overlap and
-- each is priced at its own rate. Per step, and summed on the task as its steps are counted.
-- 0 for rows written before: their providers' reports were not read for the cache.
ALTER TABLE task_steps ADD COLUMN cache_read_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE task_steps ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN cache_read_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
