-- Inbound triggers: a signed call to /hooks/{id} queues a task on the trigger's agent, its
-- title and description filled from the call's JSON body. The signing secret is sealed with
-- the server key (as bot tokens are); after a rotation the previous one stays valid until
-- previous_until (the database's clock).
--
-- Each accepted call is a row in trigger_calls, written in the transaction that adds its task:
-- the key on (trigger, webhook-id) makes a second delivery of the same call find the first
-- one's task, whichever node receives it. The rows also count the calls of the last minute
-- (the per-trigger rate bound), and are pruned after a week (retention.rs).

CREATE TABLE triggers (
    id               TEXT PRIMARY KEY,
    owner_id         TEXT NOT NULL,
    agent_id         TEXT NOT NULL,
    name             TEXT NOT NULL,
    title            TEXT NOT NULL,
    description      TEXT,
    priority         INTEGER NOT NULL,
    enabled          BOOLEAN NOT NULL,
    secret           TEXT NOT NULL,
    previous_secret  TEXT,
    previous_until   TIMESTAMPTZ,
    calls            BIGINT NOT NULL DEFAULT 0,
    last_called_at   TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
);

CREATE INDEX triggers_by_owner ON triggers (owner_id, created_at, id);

CREATE TABLE trigger_calls (
    trigger_id   TEXT NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    webhook_id   TEXT NOT NULL,
    task_id      TEXT NOT NULL,
    received_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (trigger_id, webhook_id)
);

CREATE INDEX trigger_calls_recent ON trigger_calls (trigger_id, received_at);
CREATE INDEX trigger_calls_by_age ON trigger_calls (received_at);
