-- Each agent's backlog counts, kept by the database in the same transaction as every change to
-- a task (insert, status change, delete, also by cascade), so listing agents reads one row per
-- agent however many tasks they ever had. A table of its own, not columns of `agents`: many
-- transactions lock the agent row first and then change its tasks, while the runtime's bulk
-- requeues change tasks first; counting on the agent row would make those two orders deadlock.
-- A counts row is created with its agent and removed with it.

CREATE TABLE backlog_counts (
    owner_id           TEXT NOT NULL,
    agent_id           TEXT NOT NULL,
    queued             BIGINT NOT NULL DEFAULT 0,
    in_progress        BIGINT NOT NULL DEFAULT 0,
    awaiting_approval  BIGINT NOT NULL DEFAULT 0,
    complete           BIGINT NOT NULL DEFAULT 0,
    failed             BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (owner_id, agent_id),
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
);

INSERT INTO backlog_counts (owner_id, agent_id, queued, in_progress, awaiting_approval, complete, failed)
SELECT a.owner_id, a.id,
       COUNT(*) FILTER (WHERE t.status = 'queued'),
       COUNT(*) FILTER (WHERE t.status = 'in_progress'),
       COUNT(*) FILTER (WHERE t.status = 'awaiting_approval'),
       COUNT(*) FILTER (WHERE t.status = 'complete'),
       COUNT(*) FILTER (WHERE t.status = 'failed')
FROM agents a LEFT JOIN tasks t ON t.owner_id = a.owner_id AND t.agent_id = a.id
GROUP BY a.owner_id, a.id;

CREATE FUNCTION backlog_counts_for_agent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO backlog_counts (owner_id, agent_id) VALUES (NEW.owner_id, NEW.id);
    RETURN NULL;
END
$$;

CREATE TRIGGER agents_backlog_counts AFTER INSERT ON agents
    FOR EACH ROW EXECUTE FUNCTION backlog_counts_for_agent();

CREATE FUNCTION backlog_counts_for_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE backlog_counts SET
            queued = queued - (OLD.status = 'queued')::int,
            in_progress = in_progress - (OLD.status = 'in_progress')::int,
            awaiting_approval = awaiting_approval - (OLD.status = 'awaiting_approval')::int,
            complete = complete - (OLD.status = 'complete')::int,
            failed = failed - (OLD.status = 'failed')::int
        WHERE owner_id = OLD.owner_id AND agent_id = OLD.agent_id;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        UPDATE backlog_counts SET
            queued = queued + (NEW.status = 'queued')::int,
            in_progress = in_progress + (NEW.status = 'in_progress')::int,
            awaiting_approval = awaiting_approval + (NEW.status = 'awaiting_approval')::int,
            complete = complete + (NEW.status = 'complete')::int,
            failed = failed + (NEW.status = 'failed')::int
        WHERE owner_id = NEW.owner_id AND agent_id = NEW.agent_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_backlog_counts AFTER INSERT OR DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION backlog_counts_for_task();

CREATE TRIGGER tasks_backlog_counts_moved AFTER UPDATE OF status, owner_id, agent_id ON tasks
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
          OR OLD.agent_id IS DISTINCT FROM NEW.agent_id)
    EXECUTE FUNCTION backlog_counts_for_task();

-- Pages of a backlog read only their own rows: in creation order (`GET .../backlog?limit=`),
-- and finished tasks, the most recently finished first (the agent view's `?limit=`).
CREATE INDEX tasks_by_agent_created ON tasks (owner_id, agent_id, created_at, id);
CREATE INDEX tasks_by_agent_finished ON tasks (owner_id, agent_id, completed_at, id)
    WHERE status IN ('complete', 'failed');
