-- The schema `run.sh` measures: the events tables, numbering at the commit as migration 0016
-- did (`record_event_old`) and staging as migration 0027 does (`record_event`, `number_events`).
DROP TABLE IF EXISTS event_seqs, events, pending_events, things CASCADE;
DROP FUNCTION IF EXISTS record_event, record_event_old, number_events;
CREATE TABLE things (id BIGSERIAL PRIMARY KEY, owner_id TEXT, body TEXT);
CREATE TABLE event_seqs (owner_id TEXT PRIMARY KEY, seq BIGINT NOT NULL);
CREATE TABLE events (owner_id TEXT NOT NULL, seq BIGINT NOT NULL, agent_id TEXT NOT NULL, task_id TEXT, kind TEXT NOT NULL, ref BIGINT, data TEXT, created_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (owner_id, seq));
CREATE FUNCTION record_event_old(p_owner TEXT, p_agent TEXT, p_task TEXT, p_kind TEXT, p_ref BIGINT,
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
CREATE FUNCTION record_event(p_owner TEXT, p_agent TEXT, p_task TEXT, p_kind TEXT, p_ref BIGINT, p_data TEXT, p_at TIMESTAMPTZ) RETURNS BIGINT LANGUAGE plpgsql AS $$ BEGIN RETURN 0; END $$;
\i agentcore/migrations/postgres/0027_events_numbered_after_commit.sql
