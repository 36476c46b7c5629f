-- A task's change of status moves its agent's counts in one update when the task stays with
-- its agent (every change of status the service makes), not one update taking the old status
-- off and a second putting the new one on the same row. A task moved to another agent still
-- leaves one row and joins the other.

DROP TRIGGER tasks_backlog_counts_moved;

CREATE TRIGGER tasks_backlog_counts_moved AFTER UPDATE OF status ON tasks
WHEN OLD.status IS NOT NEW.status AND OLD.owner_id IS NEW.owner_id
     AND OLD.agent_id IS NEW.agent_id
BEGIN
    UPDATE backlog_counts SET
        queued = queued - (OLD.status = 'queued') + (NEW.status = 'queued'),
        in_progress = in_progress - (OLD.status = 'in_progress') + (NEW.status = 'in_progress'),
        awaiting_approval = awaiting_approval - (OLD.status = 'awaiting_approval')
            + (NEW.status = 'awaiting_approval'),
        complete = complete - (OLD.status = 'complete') + (NEW.status = 'complete'),
        failed = failed - (OLD.status = 'failed') + (NEW.status = 'failed'),
        cancelled = cancelled - (OLD.status = 'cancelled') + (NEW.status = 'cancelled')
    WHERE owner_id = NEW.owner_id AND agent_id = NEW.agent_id;
END;

CREATE TRIGGER tasks_backlog_counts_changed_agent AFTER UPDATE OF owner_id, agent_id ON tasks
WHEN OLD.owner_id IS NOT NEW.owner_id OR OLD.agent_id IS NOT NEW.agent_id
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
