-- Each agent's backlog counts, kept by the database in the same transaction as every change to
-- a task (insert, status change, delete, also by cascade), so listing agents reads one row per
-- agent however many tasks they ever had. A table of its own, like PostgreSQL's (where
-- counting on the agent row would let lock orders deadlock). A counts row is created with its
-- agent and removed with it.
--
-- A later migration that rebuilds `tasks` or `agents` (SQLite's way to change a constraint, as
-- 0012 did) drops these triggers with the table and must create them again.

CREATE TABLE backlog_counts (
    owner_id           TEXT NOT NULL,
    agent_id           TEXT NOT NULL,
    queued             INTEGER NOT NULL DEFAULT 0,
    in_progress        INTEGER NOT NULL DEFAULT 0,
    awaiting_approval  INTEGER NOT NULL DEFAULT 0,
    complete           INTEGER NOT NULL DEFAULT 0,
    failed             INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (owner_id, agent_id),
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
) WITHOUT ROWID;

INSERT INTO backlog_counts (owner_id, agent_id, queued, in_progress, awaiting_approval, complete, failed)
SELECT a.owner_id, a.id,
       COUNT(*) FILTER (WHERE t.status = 'queued'),
       COUNT(*) FILTER (WHERE t.status = 'in_progress'),
       COUNT(*) FILTER (WHERE t.status = 'awaiting_approval'),
       COUNT(*) FILTER (WHERE t.status = 'complete'),
       COUNT(*) FILTER (WHERE t.status = 'failed')
FROM agents a LEFT JOIN tasks t ON t.owner_id = a.owner_id AND t.agent_id = a.id
GROUP BY a.owner_id, a.id;

CREATE TRIGGER agents_backlog_counts AFTER INSERT ON agents
BEGIN
    INSERT INTO backlog_counts (owner_id, agent_id) VALUES (NEW.owner_id, NEW.id);
END;

CREATE TRIGGER tasks_backlog_counts_added AFTER INSERT ON tasks
BEGIN
    UPDATE backlog_counts SET
        queued = queued + (NEW.status = 'queued'),
        in_progress = in_progress + (NEW.status = 'in_progress'),
        awaiting_approval = awaiting_approval + (NEW.status = 'awaiting_approval'),
        complete = complete + (NEW.status = 'complete'),
        failed = failed + (NEW.status = 'failed')
    WHERE owner_id = NEW.owner_id AND agent_id = NEW.agent_id;
END;

CREATE TRIGGER tasks_backlog_counts_removed AFTER DELETE ON tasks
BEGIN
    UPDATE backlog_counts SET
        queued = queued - (OLD.status = 'queued'),
        in_progress = in_progress - (OLD.status = 'in_progress'),
        awaiting_approval = awaiting_approval - (OLD.status = 'awaiting_approval'),
        complete = complete - (OLD.status = 'complete'),
        failed = failed - (OLD.status = 'failed')
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
        failed = failed - (OLD.status = 'failed')
    WHERE owner_id = OLD.owner_id AND agent_id = OLD.agent_id;
    UPDATE backlog_counts SET
        queued = queued + (NEW.status = 'queued'),
        in_progress = in_progress + (NEW.status = 'in_progress'),
        awaiting_approval = awaiting_approval + (NEW.status = 'awaiting_approval'),
        complete = complete + (NEW.status = 'complete'),
        failed = failed + (NEW.status = 'failed')
    WHERE owner_id = NEW.owner_id AND agent_id = NEW.agent_id;
END;

-- Pages of a backlog read only their own rows: in creation order (`GET .../backlog?limit=`),
-- and finished tasks, the most recently finished first (the agent view's `?limit=`).
CREATE INDEX tasks_by_agent_created ON tasks (owner_id, agent_id, created_at, id);
CREATE INDEX tasks_by_agent_finished ON tasks (owner_id, agent_id, completed_at, id)
    WHERE status IN ('complete', 'failed');
