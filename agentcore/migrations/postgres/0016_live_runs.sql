-- Runs a person watches and stops: a task can end 'cancelled' (by whom: `cancelled_by`), and
-- every activity entry and stored step is announced as a numbered event.

ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check
    CHECK (status IN ('queued', 'in_progress', 'awaiting_approval', 'complete', 'failed', 'cancelled'));
ALTER TABLE tasks ADD COLUMN cancelled_by TEXT;

DROP INDEX tasks_by_agent_finished;
CREATE INDEX tasks_by_agent_finished ON tasks (owner_id, agent_id, completed_at, id)
    WHERE status IN ('complete', 'failed', 'cancelled');
DROP INDEX tasks_finished_at;
CREATE INDEX tasks_finished_at ON tasks (completed_at) WHERE status IN ('complete', 'failed', 'cancelled');

ALTER TABLE backlog_counts ADD COLUMN cancelled BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION backlog_counts_for_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE backlog_counts SET
            queued = queued - (OLD.status = 'queued')::int,
            in_progress = in_progress - (OLD.status = 'in_progress')::int,
            awaiting_approval = awaiting_approval - (OLD.status = 'awaiting_approval')::int,
            complete = complete - (OLD.status = 'complete')::int,
            failed = failed - (OLD.status = 'failed')::int,
            cancelled = cancelled - (OLD.status = 'cancelled')::int
        WHERE owner_id = OLD.owner_id AND agent_id = OLD.agent_id;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        UPDATE backlog_counts SET
            queued = queued + (NEW.status = 'queued')::int,
            in_progress = in_progress + (NEW.status = 'in_progress')::int,
            awaiting_approval = awaiting_approval + (NEW.status = 'awaiting_approval')::int,
            complete = complete + (NEW.status = 'complete')::int,
            failed = failed + (NEW.status = 'failed')::int,
            cancelled = cancelled + (NEW.status = 'cancelled')::int
        WHERE owner_id = NEW.owner_id AND agent_id = NEW.agent_id;
    END IF;
    RETURN NULL;
END
$$;

-- Events: what `GET /api/events` streams, made from the data already kept. Each activity entry
-- and each stored step of a run is announced by one row here, numbered per owner (`seq`: 1, 2,
-- 3... in commit order, the stream's event id). A row points at its source (`ref`: the
-- activity entry's id, the step's number) rather than copying it; events with no other home
-- (a model call's retry) carry their own `data`. Pruned by age (`retention.rs`).
--
-- Commit order: the triggers are deferred to the commit, where `record_event` takes the
-- owner's `event_seqs` row lock, held until the commit ends. So one owner's transactions
-- number their events one after another, in the order they commit, and a reader that sees
-- `seq` n has seen every event before it. Taking the lock last keeps it out of every other
-- lock order (no deadlock), and holds it for the commit only. Each commit also notifies
-- `agentd_wake` with `events:<owner>` (one per transaction: PostgreSQL folds duplicates).

CREATE TABLE event_seqs (
    owner_id  TEXT PRIMARY KEY,
    seq       BIGINT NOT NULL
);

CREATE TABLE events (
    owner_id    TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    agent_id    TEXT NOT NULL,
    task_id     TEXT,
    kind        TEXT NOT NULL CHECK (kind IN ('activity', 'step', 'retry')),
    ref         BIGINT,
    data        TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner_id, seq)
);

CREATE INDEX events_by_age ON events (created_at);

CREATE FUNCTION record_event(p_owner TEXT, p_agent TEXT, p_task TEXT, p_kind TEXT, p_ref BIGINT,
                             p_data TEXT, p_at TIMESTAMPTZ) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    numbered BIGINT;
BEGIN
    INSERT INTO event_seqs AS s (owner_id, seq) VALUES (p_owner, 1)
        ON CONFLICT (owner_id) DO UPDATE SET seq = s.seq + 1
        RETURNING s.seq INTO numbered;
    INSERT INTO events (owner_id, seq, agent_id, task_id, kind, ref, data, created_at)
        VALUES (p_owner, numbered, p_agent, p_task, p_kind, p_ref, p_data, p_at);
    PERFORM pg_notify('agentd_wake', 'events:' || p_owner);
    RETURN numbered;
END
$$;

CREATE FUNCTION activity_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM record_event(NEW.owner_id, NEW.agent_id, NEW.task_id, 'activity', NEW.id, NULL,
                         NEW.created_at);
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER activity_event AFTER INSERT ON activity
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION activity_event();

CREATE FUNCTION step_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    task RECORD;
BEGIN
    SELECT owner_id, agent_id INTO task FROM tasks WHERE id = NEW.task_id;
    IF FOUND THEN
        PERFORM record_event(task.owner_id, task.agent_id, NEW.task_id, 'step', NEW.seq, NULL,
                             NEW.created_at);
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER step_event AFTER INSERT ON task_steps
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION step_event();
