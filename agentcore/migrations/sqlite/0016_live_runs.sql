-- Runs a person watches and stops: a task can end 'cancelled' (by whom: `cancelled_by`), and
-- every activity entry and stored step is announced as a numbered event.
--
-- Cancelled. SQLite cannot change a CHECK constraint in place, and foreign keys cannot be
-- turned off in the migration's transaction: as in 0012, the tasks and the rows that cascade
-- from them (steps, budget holds, approvals) are set aside, the table is dropped (its backlog
-- triggers first, by name) and created again under its own name, and everything is put back.
-- The counts need no recount: the same rows come back, and the triggers return after them.

CREATE TEMP TABLE saved_tasks AS SELECT * FROM tasks;
CREATE TEMP TABLE saved_steps AS SELECT * FROM task_steps;
CREATE TEMP TABLE saved_holds AS SELECT * FROM budget_holds;
CREATE TEMP TABLE saved_approvals AS SELECT * FROM approvals;

DROP TRIGGER tasks_backlog_counts_added;
DROP TRIGGER tasks_backlog_counts_removed;
DROP TRIGGER tasks_backlog_counts_moved;
DROP TABLE tasks;

CREATE TABLE tasks (
    id             TEXT PRIMARY KEY,
    owner_id       TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    title          TEXT NOT NULL,
    description    TEXT,
    priority       INTEGER NOT NULL DEFAULT 0,
    status         TEXT NOT NULL CHECK (status IN ('queued', 'in_progress', 'awaiting_approval', 'complete', 'failed', 'cancelled')),
    result         TEXT,
    error          TEXT,
    attempts       INTEGER NOT NULL DEFAULT 0,
    input_tokens   INTEGER,
    output_tokens  INTEGER,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    started_at     TEXT,
    completed_at   TEXT,
    lease_owner    TEXT,
    lease_until    TEXT,
    steps          INTEGER NOT NULL DEFAULT 0,
    depth          INTEGER NOT NULL DEFAULT 0,
    created_by_agent TEXT,
    created_by_task  TEXT,
    cancelled_by   TEXT,
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
);

INSERT INTO tasks (id, owner_id, agent_id, title, description, priority, status, result,
    error, attempts, input_tokens, output_tokens, created_at, updated_at, started_at,
    completed_at, lease_owner, lease_until, steps, depth, created_by_agent, created_by_task)
SELECT id, owner_id, agent_id, title, description, priority, status, result,
    error, attempts, input_tokens, output_tokens, created_at, updated_at, started_at,
    completed_at, lease_owner, lease_until, steps, depth, created_by_agent, created_by_task
FROM saved_tasks;
INSERT INTO task_steps SELECT * FROM saved_steps;
INSERT INTO budget_holds SELECT * FROM saved_holds;
INSERT INTO approvals SELECT * FROM saved_approvals;
DROP TABLE saved_tasks;
DROP TABLE saved_steps;
DROP TABLE saved_holds;
DROP TABLE saved_approvals;

CREATE INDEX tasks_by_agent_status ON tasks (owner_id, agent_id, status, priority DESC, created_at);
CREATE INDEX tasks_in_progress ON tasks (lease_owner, lease_until) WHERE status = 'in_progress';
CREATE INDEX tasks_by_creator_task ON tasks (created_by_task) WHERE created_by_task IS NOT NULL;
CREATE INDEX tasks_recent_complete ON tasks (owner_id, agent_id, completed_at DESC) WHERE status = 'complete';
CREATE INDEX tasks_by_agent_created ON tasks (owner_id, agent_id, created_at, id);
CREATE INDEX tasks_by_agent_finished ON tasks (owner_id, agent_id, completed_at, id)
    WHERE status IN ('complete', 'failed', 'cancelled');
CREATE INDEX tasks_finished_at ON tasks (completed_at) WHERE status IN ('complete', 'failed', 'cancelled');

ALTER TABLE backlog_counts ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER tasks_backlog_counts_added AFTER INSERT ON tasks
BEGIN
    UPDATE backlog_counts SET
        queued = queued + (NEW.status = 'queued'),
        in_progress = in_progress + (NEW.status = 'in_progress'),
        awaiting_approval = awaiting_approval + (NEW.status = 'awaiting_approval'),
        complete = complete + (NEW.status = 'complete'),
        failed = failed + (NEW.status = 'failed'),
        cancelled = cancelled + (NEW.status = 'cancelled')
    WHERE owner_id = NEW.owner_id AND agent_id = NEW.agent_id;
END;

CREATE TRIGGER tasks_backlog_counts_removed AFTER DELETE ON tasks
BEGIN
    UPDATE backlog_counts SET
        queued = queued - (OLD.status = 'queued'),
        in_progress = in_progress - (OLD.status = 'in_progress'),
        awaiting_approval = awaiting_approval - (OLD.status = 'awaiting_approval'),
        complete = complete - (OLD.status = 'complete'),
        failed = failed - (OLD.status = 'failed'),
        cancelled = cancelled - (OLD.status = 'cancelled')
    WHERE owner_id = OLD.owner_id AND agent_id = OLD.agent_id;
END;

CREATE TRIGGER tasks_backlog_counts_moved AFTER UPDATE OF status, owner_id, agent_id ON tasks
WHEN OLD.status IS NOT NEW.status OR OLD.owner_id IS NOT NEW.owner_id
     OR OLD.agent_id IS NOT NEW.agent_id
BEGIN
    UPDATE backlog_counts SET
        queued = queued - (OLD.status = 'queued'),
        in_progress = in_progress - (OLD.status = 'in_progress'),
        awaiting_approval = awaiting_approval - (OLD.status = 'awaiting_approval'),
        complete = complete - (OLD.status = 'complete'),
        failed = failed - (OLD.status = 'failed'),
        cancelled = cancelled - (OLD.status = 'cancelled')
    WHERE owner_id = OLD.owner_id AND agent_id = OLD.agent_id;
    UPDATE backlog_counts SET
        queued = queued + (NEW.status = 'queued'),
        in_progress = in_progress + (NEW.status = 'in_progress'),
        awaiting_approval = awaiting_approval + (NEW.status = 'awaiting_approval'),
        complete = complete + (NEW.status = 'complete'),
        failed = failed + (NEW.status = 'failed'),
        cancelled = cancelled + (NEW.status = 'cancelled')
    WHERE owner_id = NEW.owner_id AND agent_id = NEW.agent_id;
END;

-- Events: what `GET /api/events` streams, made from the data already kept. Each activity entry
-- and each stored step of a run is announced by one row here, written by a trigger in the
-- transaction that writes it, numbered per owner (`seq`: 1, 2, 3... in commit order, the
-- stream's event id). A row points at its source (`ref`: the activity entry's id, the step's
-- number) rather than copying it; events with no other home (a model call's retry) carry
-- their own `data`. Pruned by age (`retention.rs`). On SQLite the single writer makes the
-- numbering commit-ordered.

CREATE TABLE event_seqs (
    owner_id  TEXT PRIMARY KEY,
    seq       INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE events (
    owner_id    TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    agent_id    TEXT NOT NULL,
    task_id     TEXT,
    kind        TEXT NOT NULL CHECK (kind IN ('activity', 'step', 'retry')),
    ref         INTEGER,
    data        TEXT,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (owner_id, seq)
) WITHOUT ROWID;

CREATE INDEX events_by_age ON events (created_at);

CREATE TRIGGER activity_event AFTER INSERT ON activity
BEGIN
    INSERT OR IGNORE INTO event_seqs (owner_id, seq) VALUES (NEW.owner_id, 0);
    UPDATE event_seqs SET seq = seq + 1 WHERE owner_id = NEW.owner_id;
    INSERT INTO events (owner_id, seq, agent_id, task_id, kind, ref, created_at)
    SELECT NEW.owner_id, seq, NEW.agent_id, NEW.task_id, 'activity', NEW.id, NEW.created_at
    FROM event_seqs WHERE owner_id = NEW.owner_id;
END;

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
