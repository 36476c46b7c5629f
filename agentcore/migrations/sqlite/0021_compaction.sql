-- Long runs: a run's older steps can be compacted into a summary the model writes, stored as a
-- step of kind 'compaction' with the last step it covers (`compacted_through`).
--
-- SQLite cannot change a CHECK constraint in place: the steps are set aside, the table is
-- dropped (its event trigger with it) and created again under its own name with the new kind
-- and column, and the rows are put back. `SELECT *, NULL` names no column: a migration that
-- added a column to `task_steps` before this one makes it fail here, loudly, rather than lose
-- that column's data.

CREATE TEMP TABLE saved_steps AS SELECT * FROM task_steps;

DROP TABLE task_steps;

CREATE TABLE task_steps (
    task_id        TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('model', 'tool', 'summary', 'compaction')),
    tool           TEXT,
    call_id        TEXT,
    arguments      TEXT,
    -- Model steps: the answer's text; tool steps: the result; compaction steps: the summary.
    output         TEXT,
    -- Model steps: the calls asked for, a JSON array of {id, name, arguments}.
    tool_calls     TEXT NOT NULL DEFAULT '[]',
    error          TEXT,
    duration_ms    INTEGER NOT NULL,
    input_tokens   INTEGER,
    output_tokens  INTEGER,
    created_at     TEXT NOT NULL,
    model          TEXT,
    cost_micros    BIGINT NOT NULL DEFAULT 0,
    unpriced       INTEGER NOT NULL DEFAULT 0,
    -- Compaction steps: the summary covers steps 1 to this one.
    compacted_through INTEGER,
    PRIMARY KEY (task_id, seq)
);

INSERT INTO task_steps SELECT *, NULL FROM saved_steps;
DROP TABLE saved_steps;

CREATE TRIGGER step_event AFTER INSERT ON task_steps
BEGIN
    INSERT OR IGNORE INTO event_seqs (owner_id, seq)
    SELECT owner_id, 0 FROM tasks WHERE id = NEW.task_id;
    UPDATE event_seqs SET seq = seq + 1
    WHERE owner_id = (SELECT owner_id FROM tasks WHERE id = NEW.task_id);
    INSERT INTO events (owner_id, seq, agent_id, task_id, kind, ref, created_at)
    SELECT t.owner_id, s.seq, t.agent_id, t.id, 'step', NEW.seq, NEW.created_at
    FROM tasks t JOIN event_seqs s ON s.owner_id = t.owner_id WHERE t.id = NEW.task_id;
END;
