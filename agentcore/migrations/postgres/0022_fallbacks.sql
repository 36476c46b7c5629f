-- Fallback chains: an agent's own ordered list of models to try when its model is overloaded
-- or keeps failing (JSON array of '<provider>:<model>'); NULL: the server's default chain for
-- its model (models.fallbacks); '[]': no fallback at all.
ALTER TABLE agents ADD COLUMN fallback_models TEXT;

-- What a model step tried before the model that answered (named by its cost's model): a JSON
-- array of {"model", "error"}; '[]' when the first model answered.
ALTER TABLE task_steps ADD COLUMN tried TEXT NOT NULL DEFAULT '[]';

-- Provider health shared by every node: one row per model (full name) that failed lately.
-- No row: healthy. `failures`: failed calls in a row since the last success. A model whose
-- failures reach the threshold cools down until `cooldown_until` (the database's clock);
-- `cooldowns` counts the cool-downs in a row, each twice as long as the one before (to a
-- cap). After it, one caller at a time probes the model, holding `probe_until` (a lease taken
-- with compare-and-set); a success deletes the row, a failure starts a longer cool-down.
CREATE TABLE model_health (
    model           TEXT PRIMARY KEY,
    failures        INTEGER NOT NULL DEFAULT 0,
    cooldowns       INTEGER NOT NULL DEFAULT 0,
    cooldown_until  TIMESTAMPTZ,
    probe_until     TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ NOT NULL
);
