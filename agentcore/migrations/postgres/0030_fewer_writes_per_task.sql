-- Fewer writes per task: a task's change of status moves its agent's counts in one update, and
-- the events of activity entries and steps are staged by the statement that writes their rows,
-- not at the commit.
--
-- Counts: `backlog_counts_for_task` took the old status off in one update and put the new one
-- on in a second, on the same row whenever the task stays with its agent (every change of
-- status the service makes). Two row versions a change, and the second always ran the row's
-- foreign-key check on `agents` again: PostgreSQL checks a referencing row whose version was
-- written by the same transaction, as the first update's was. Now one update when the agent
-- is the same; a task moved to another agent still leaves one row and joins the other.
--
-- Events: the triggers were deferred to the commit (0016) so that `record_event` took the
-- owner's counter last, held for the commit only. Since 0027 they only stage the event in
-- `pending_events` and the numbering takes the counter after the commit, so nothing needs the
-- commit any more. Fired at the end of the statement that wrote their rows, the triggers see
-- those rows in the same order as before (a transaction's after-row events are queued as its
-- rows are written, and its statements run one after another), so a transaction's events are
-- staged, and numbered, in the order its rows were written, as they were. What changes is
-- where the work runs: inside the statement, not in a queue the commit works through.

CREATE OR REPLACE FUNCTION backlog_counts_for_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.owner_id = NEW.owner_id AND OLD.agent_id = NEW.agent_id THEN
        UPDATE backlog_counts SET
            queued = queued - (OLD.status = 'queued')::int + (NEW.status = 'queued')::int,
            in_progress = in_progress - (OLD.status = 'in_progress')::int
                + (NEW.status = 'in_progress')::int,
            awaiting_approval = awaiting_approval - (OLD.status = 'awaiting_approval')::int
                + (NEW.status = 'awaiting_approval')::int,
            complete = complete - (OLD.status = 'complete')::int
                + (NEW.status = 'complete')::int,
            failed = failed - (OLD.status = 'failed')::int + (NEW.status = 'failed')::int,
            cancelled = cancelled - (OLD.status = 'cancelled')::int
                + (NEW.status = 'cancelled')::int
        WHERE owner_id = NEW.owner_id AND agent_id = NEW.agent_id;
        RETURN NULL;
    END IF;
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

DROP TRIGGER activity_event ON activity;
CREATE TRIGGER activity_event AFTER INSERT ON activity
    FOR EACH ROW EXECUTE FUNCTION activity_event();

DROP TRIGGER step_event ON task_steps;
CREATE TRIGGER step_event AFTER INSERT ON task_steps
    FOR EACH ROW EXECUTE FUNCTION step_event();
