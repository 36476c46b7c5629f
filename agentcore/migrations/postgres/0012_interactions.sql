-- Discord interactions and tool approvals. A task can wait for a person's approval of a tool
-- call ('awaiting_approval'); `approvals` holds each such call with its decision. A connection
-- can carry its application's id and public key (a user's own bot), and the roles allowed to
-- run commands that change something. `interactions` remembers each interaction id for a day,
-- so one Discord delivers twice runs once.

ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check
    CHECK (status IN ('queued', 'in_progress', 'awaiting_approval', 'complete', 'failed'));

ALTER TABLE agents ADD COLUMN approval_tools TEXT NOT NULL DEFAULT '[]';

ALTER TABLE chat_connections ADD COLUMN application_id TEXT;
ALTER TABLE chat_connections ADD COLUMN public_key TEXT;
ALTER TABLE chat_connections ADD COLUMN allowed_role_ids TEXT NOT NULL DEFAULT '[]';

CREATE TABLE approvals (
    id           TEXT PRIMARY KEY,
    owner_id     TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    task_id      TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    call_id      TEXT NOT NULL,
    tool         TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    -- 'pending' until decided; a timeout is a denial by nobody (decided_by NULL).
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
    decided_by   TEXT,
    decided_at   TIMESTAMPTZ,
    expires_at   TIMESTAMPTZ NOT NULL,
    -- The outbox row of the message with the buttons, to edit once decided.
    post_id      BIGINT,
    created_at   TIMESTAMPTZ NOT NULL,
    UNIQUE (task_id, call_id),
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
);

CREATE INDEX approvals_due ON approvals (expires_at) WHERE status = 'pending';

CREATE TABLE interactions (
    id           TEXT PRIMARY KEY,
    received_at  TIMESTAMPTZ NOT NULL
);

CREATE INDEX interactions_by_age ON interactions (received_at);
