-- Adds to one agent committed together: a node gathers the adds to an agent that arrive while
-- one of its transactions for that agent is in flight and writes them in one call, one
-- transaction, one WAL flush (`store/add_lanes.rs`). Each still is exactly what `add_task`
-- writes, in the order given: the agent's lock is taken by the first and held to the commit,
-- so creation order stays commit order and a reader paging by creation time never skips one.

-- The tasks `p_ids` of `p_agent`, each queued with its `task_added` entry through `add_task`,
-- the `n`th value of every array belonging to the `n`th task (all arrays the same length).
-- Answers each task's id, the agent's status and the creation time stored, in the order
-- given, or no row at all when the owner has no such agent.
CREATE FUNCTION add_tasks(
    p_owner TEXT, p_agent TEXT, p_ids TEXT[], p_titles TEXT[], p_descriptions TEXT[],
    p_priorities INTEGER[], p_ats TIMESTAMPTZ[], p_depths INTEGER[], p_creator_agents TEXT[],
    p_creator_tasks TEXT[], p_trace_ids TEXT[], p_parent_span_ids TEXT[], p_actions TEXT[],
    p_details TEXT[], p_entry_tasks TEXT[])
RETURNS TABLE (task_id TEXT, agent_status TEXT, stored_at TIMESTAMPTZ) LANGUAGE plpgsql AS $$
DECLARE
    i INTEGER;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
        SELECT p_ids[i], a.agent_status, a.stored_at INTO task_id, agent_status, stored_at
        FROM add_task(p_ids[i], p_owner, p_agent, p_titles[i], p_descriptions[i],
            p_priorities[i], p_ats[i], p_depths[i], p_creator_agents[i], p_creator_tasks[i],
            p_trace_ids[i], p_parent_span_ids[i], p_actions[i], p_details[i], p_entry_tasks[i],
            NULL) a;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
