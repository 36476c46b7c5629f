-- Long runs: a run's older steps can be compacted into a summary the model writes, stored as a
-- step of kind 'compaction' with the last step it covers (`compacted_through`).

ALTER TABLE task_steps DROP CONSTRAINT task_steps_kind_check;
ALTER TABLE task_steps ADD CONSTRAINT task_steps_kind_check
    CHECK (kind IN ('model', 'tool', 'summary', 'compaction'));
-- Compaction steps: the summary covers steps 1 to this one.
ALTER TABLE task_steps ADD COLUMN compacted_through INTEGER;
