-- Agents that act: the tools each agent may call, its step limit and memory block; tasks
-- record who created them (a person, or an agent's task) and how deep in delegation they are;
-- each model call and tool call of a run is a stored step, so a run resumes after a crash.

ALTER TABLE agents ADD COLUMN tools TEXT NOT NULL DEFAULT '["post_message","create_task","memory"]';
ALTER TABLE agents ADD COLUMN max_steps INTEGER NOT NULL DEFAULT 8;
ALTER TABLE agents ADD COLUMN memory TEXT NOT NULL DEFAULT '';

ALTER TABLE tasks ADD COLUMN steps INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN created_by_agent TEXT;
ALTER TABLE tasks ADD COLUMN created_by_task TEXT;

CREATE INDEX tasks_by_creator_task ON tasks (created_by_task) WHERE created_by_task IS NOT NULL;

CREATE TABLE task_steps (
    task_id        TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('model', 'tool', 'summary')),
    tool           TEXT,
    call_id        TEXT,
    arguments      TEXT,
    -- Model steps: the answer's text; tool steps: the result.
    output         TEXT,
    -- Model steps: the calls asked for, a JSON array of {id, name, arguments}.
    tool_calls     TEXT NOT NULL DEFAULT '[]',
    error          TEXT,
    duration_ms    INTEGER NOT NULL,
    input_tokens   INTEGER,
    output_tokens  INTEGER,
    created_at     TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);
