-- Adds to one agent committed together: a node gathers the adds to an agent that arrive while
-- one of its transactions for that agent is in flight and writes them in one call, one
-- transaction, one WAL flush (`store/add_lanes.rs`). Each still is exactly what `add_task`
-- writes, in the order given: the agent's lock is taken by the first and held to the commit,
-- so creation order stays commit order and a reader paging by creation time never skips one.

-- The tasks `p_ids` of `p_agent`, each queued with its `task_added` entry through `add_task`,
-- the `n`th value of every array belonging to the `n`th task (all arrays the same length).
-- Answers each task's id, the agent's status and the creation time stored, in the order
-- given, or no row at all when the owner has no such agent; all of them or none are written.
CREATE FUNCTION add_tasks(
    p_owner TEXT, p_agent TEXT, p_ids TEXT[], p_titles TEXT[], p_descriptions TEXT[],
    p_priorities INTEGER[], p_ats TIMESTAMPTZ[], p_depths INTEGER[], p_creator_agents TEXT[],
    p_creator_tasks TEXT[], p_trace_ids TEXT[], p_parent_span_ids TEXT[], p_actions TEXT[],
    p_details TEXT[], p_entry_tasks TEXT[])
RETURNS TABLE (task_id TEXT, agent_status TEXT, stored_at TIMESTAMPTZ) LANGUAGE plpgsql AS $$
DECLARE
    v_count INTEGER := cardinality(p_ids);
BEGIN
    -- A caller's mistake, not an add's: no part of it is written (XX000 is not retried alone).
    IF EXISTS (SELECT 1 FROM unnest(ARRAY[cardinality(p_titles), cardinality(p_descriptions),
            cardinality(p_priorities), cardinality(p_ats), cardinality(p_depths),
            cardinality(p_creator_agents), cardinality(p_creator_tasks), cardinality(p_trace_ids),
            cardinality(p_parent_span_ids), cardinality(p_actions), cardinality(p_details),
            cardinality(p_entry_tasks)]) AS n WHERE n <> v_count) THEN
        RAISE EXCEPTION 'add_tasks: % ids and arrays of other lengths', v_count
            USING ERRCODE = 'XX000';
    END IF;
    FOR i IN 1 .. v_count LOOP
        SELECT p_ids[i], a.agent_status, a.stored_at INTO task_id, agent_status, stored_at
        FROM add_task(p_ids[i], p_owner, p_agent, p_titles[i], p_descriptions[i],
            p_priorities[i], p_ats[i], p_depths[i], p_creator_agents[i], p_creator_tasks[i],
            p_trace_ids[i], p_parent_span_ids[i], p_actions[i], p_details[i], p_entry_tasks[i],
            NULL) a;
        IF NOT FOUND THEN
            -- No such agent: nothing is written. Once the first add holds the agent's lock,
            -- the agent cannot go, so a later add finding none is a fault: all or nothing.
            IF i = 1 THEN
                RETURN;
            END IF;
            RAISE EXCEPTION 'add_tasks: the agent went away after % adds', i - 1
                USING ERRCODE = 'XX000';
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
