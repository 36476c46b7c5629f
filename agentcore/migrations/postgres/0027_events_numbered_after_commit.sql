-- Events are numbered after their transaction commits, not inside it.
--
-- Until now `record_event` numbered each event at the commit under the owner's `event_seqs`
-- row lock and sent `NOTIFY`, and both were held through the commit's WAL flush: one owner's
-- event-writing commits went one at a time, and every notifying commit of the database too
-- (PostgreSQL serialises them on a lock of its own). A task's finish is such a commit.
--
-- Now the triggers (still deferred to the commit, so an event's `id` follows the order its
-- rows were written in) only stage the event in `pending_events`: an insert, no lock on a
-- shared row, no notification. `number_events` numbers what has committed: for each owner,
-- in name order (so two callers never wait on each other in a cycle), it locks the owner's
-- `event_seqs` row, moves the owner's staged events into `events` numbered after the latest
-- in `id` order, moves the counter and notifies `events:<owner>` once. The owner's lock is
-- held only by these numbering transactions, which commit one after another, so `seq` is
-- still 1, 2, 3... per owner in the order the numbers were given, and a reader that sees
-- `seq` n has seen every event before it.
--
-- Who numbers (`core/numbering.rs`): each node, right after it wrote events and at least
-- every second (what a killed node or another process left), and a stream before it reads
-- with live events held.

CREATE TABLE pending_events (
    id          BIGSERIAL PRIMARY KEY,
    owner_id    TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    task_id     TEXT,
    kind        TEXT NOT NULL CHECK (kind IN ('activity', 'step', 'retry')),
    ref         BIGINT,
    data        TEXT,
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE INDEX pending_events_by_owner ON pending_events (owner_id, id);

-- The same signature as before (callers and triggers are unchanged); the event has no number
-- yet, so it returns NULL.
CREATE OR REPLACE FUNCTION record_event(p_owner TEXT, p_agent TEXT, p_task TEXT, p_kind TEXT,
                                        p_ref BIGINT, p_data TEXT, p_at TIMESTAMPTZ)
RETURNS BIGINT LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pending_events (owner_id, agent_id, task_id, kind, ref, data, created_at)
        VALUES (p_owner, p_agent, p_task, p_kind, p_ref, p_data, p_at);
    RETURN NULL;
END
$$;

-- Numbers the committed staged events of `p_owner` (every owner's when NULL), at most
-- `p_limit` owners a call, those waiting longest first; returns the owners whose events it numbered. Each statement in
-- this function reads with a snapshot of its own (READ COMMITTED): the move below, taken
-- after the owner's lock, sees every event committed before it, and none that a numbering
-- which held the lock before has moved.
CREATE FUNCTION number_events(p_owner TEXT, p_limit INTEGER) RETURNS SETOF TEXT
LANGUAGE plpgsql AS $$
DECLARE
    v_owner TEXT;
    v_latest BIGINT;
    v_last BIGINT;
BEGIN
    -- The owners whose events have waited longest (no owner waits behind others' busy ones),
    -- locked in name order.
    FOR v_owner IN
        SELECT w.owner_id FROM (
            SELECT p.owner_id, min(p.id) AS oldest FROM pending_events p
            WHERE p_owner IS NULL OR p.owner_id = p_owner
            GROUP BY p.owner_id ORDER BY oldest LIMIT p_limit
        ) w ORDER BY w.owner_id
    LOOP
        INSERT INTO event_seqs (owner_id, seq) VALUES (v_owner, 0) ON CONFLICT DO NOTHING;
        SELECT s.seq INTO v_latest FROM event_seqs s WHERE s.owner_id = v_owner FOR UPDATE;
        WITH moved AS (
            DELETE FROM pending_events p WHERE p.owner_id = v_owner
            RETURNING p.id, p.agent_id, p.task_id, p.kind, p.ref, p.data, p.created_at
        ), numbered AS (
            INSERT INTO events (owner_id, seq, agent_id, task_id, kind, ref, data, created_at)
            SELECT v_owner, v_latest + row_number() OVER (ORDER BY m.id), m.agent_id, m.task_id,
                   m.kind, m.ref, m.data, m.created_at
            FROM moved m
            RETURNING seq
        )
        SELECT max(n.seq) INTO v_last FROM numbered n;
        IF v_last IS NOT NULL THEN
            UPDATE event_seqs SET seq = v_last WHERE owner_id = v_owner;
            PERFORM pg_notify('agentd_wake', 'events:' || v_owner);
            RETURN NEXT v_owner;
        END IF;
    END LOOP;
END
$$;
