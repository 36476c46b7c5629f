-- An add no longer notifies inside its transaction: the caller sends the agent's wake-up once
-- the function has returned (`store/wake_after_commit.rs`). A NOTIFY takes a lock for the
-- whole server at its commit and holds it through the WAL flush, so every add committed one
-- at a time, whatever agent it was for, each still holding its agent's row lock while it
-- waited: from 16 clients to ten agents at the database alone, 970-1,300 adds a second
-- against 1,545-2,016 without it (BENCHMARKS.md).
--
-- The signature stays, `p_wake` with it: a node of the previous release still calls the
-- function during a rolling upgrade, and its adds then wake the other nodes only at their
-- next poll.

-- The task `p_id` of `p_agent`, queued, and its `task_added` entry, under the agent's lock.
-- Answers the agent's status and the creation time stored, or no row when the owner has no
-- such agent. `p_wake` is no longer used.
CREATE OR REPLACE FUNCTION add_task(
    p_id TEXT, p_owner TEXT, p_agent TEXT, p_title TEXT, p_description TEXT,
    p_priority INTEGER, p_at TIMESTAMPTZ, p_depth INTEGER, p_creator_agent TEXT,
    p_creator_task TEXT, p_trace_id TEXT, p_parent_span_id TEXT, p_action TEXT,
    p_details TEXT, p_entry_task TEXT, p_wake TEXT)
RETURNS TABLE (agent_status TEXT, stored_at TIMESTAMPTZ) LANGUAGE plpgsql AS $$
DECLARE
    v_status TEXT;
    v_at TIMESTAMPTZ;
BEGIN
    SELECT a.status INTO v_status FROM agents a
        WHERE a.owner_id = p_owner AND a.id = p_agent FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_at := task_creation_time(p_at, (SELECT t.created_at FROM tasks t
        WHERE t.owner_id = p_owner AND t.agent_id = p_agent
        ORDER BY t.created_at DESC LIMIT 1));
    INSERT INTO tasks (id, owner_id, agent_id, title, description, priority, status, attempts,
        created_at, updated_at, depth, created_by_agent, created_by_task, trace_id,
        parent_span_id)
    VALUES (p_id, p_owner, p_agent, p_title, p_description, p_priority, 'queued', 0, v_at, v_at,
        p_depth, p_creator_agent, p_creator_task, p_trace_id, p_parent_span_id);
    -- As every entry: never dated before the agent's previous one.
    INSERT INTO activity (owner_id, agent_id, action, details, task_id, created_at)
    SELECT p_owner, p_agent, p_action, p_details, p_entry_task,
        GREATEST(v_at, (SELECT e.created_at + interval '1 microsecond' FROM activity e
            WHERE e.owner_id = p_owner AND e.agent_id = p_agent ORDER BY e.id DESC LIMIT 1));
    agent_status := v_status;
    stored_at := v_at;
    RETURN NEXT;
END
$$;
