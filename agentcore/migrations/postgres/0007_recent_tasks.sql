-- A run's system prompt names the agent's last finished tasks: this index finds them without
-- reading (and sorting) every task the agent ever finished.
CREATE INDEX tasks_recent_complete ON tasks (owner_id, agent_id, completed_at DESC) WHERE status = 'complete';
