-- The runtime: which node runs each agent and until when, the persisted throttle, and task
-- leases. A lease is a node id plus an expiry; a node renews all of its leases in one heartbeat.

ALTER TABLE agents ADD COLUMN lease_owner TEXT;
ALTER TABLE agents ADD COLUMN lease_until TIMESTAMPTZ;
-- The earliest time the next task may start (the throttle); survives restarts and takeovers.
ALTER TABLE agents ADD COLUMN next_run_at TIMESTAMPTZ;
-- Consecutive failed tasks; the third puts the agent in 'error'.
ALTER TABLE agents ADD COLUMN failure_streak INTEGER NOT NULL DEFAULT 0;

ALTER TABLE tasks ADD COLUMN lease_owner TEXT;
ALTER TABLE tasks ADD COLUMN lease_until TIMESTAMPTZ;

CREATE INDEX agents_claimable ON agents (lease_until) WHERE status = 'active';
CREATE INDEX agents_by_lease_owner ON agents (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX tasks_in_progress ON tasks (lease_owner, lease_until) WHERE status = 'in_progress';

-- Live nodes, for each node's fair share of the active agents.
CREATE TABLE runtime_nodes (
    id           TEXT PRIMARY KEY,
    started_at   TIMESTAMPTZ NOT NULL,
    alive_until  TIMESTAMPTZ NOT NULL
);
