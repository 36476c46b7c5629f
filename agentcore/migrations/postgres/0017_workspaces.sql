-- Teams. Everything a person owned now belongs to a workspace: the `owner_id` of every row names
-- a workspace. Each user gets a personal workspace whose id is their own id, so the rows already
-- stored are the personal workspace's without being touched; plan, Stripe customer and budget
-- move from the user to the workspace. Members hold a role in a workspace; invites and API keys
-- are stored by a keyed hash of their secret only; the audit log is chained by hashes.

CREATE TABLE workspaces (
    id                   TEXT PRIMARY KEY,
    name                 TEXT NOT NULL,
    -- The user whose personal workspace this is (its id is theirs); NULL for a team's.
    personal_of          TEXT UNIQUE REFERENCES users (id),
    plan                 TEXT NOT NULL DEFAULT 'free',
    stripe_customer_id   TEXT,
    subscription_status  TEXT,
    budget_micros        BIGINT,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL
);

CREATE UNIQUE INDEX workspaces_by_stripe_customer ON workspaces (stripe_customer_id)
    WHERE stripe_customer_id IS NOT NULL;

INSERT INTO workspaces (id, name, personal_of, plan, stripe_customer_id, subscription_status,
                        budget_micros, created_at, updated_at)
SELECT id, name, id, plan, stripe_customer_id, subscription_status, budget_micros, created_at,
       updated_at
FROM users;

CREATE TABLE workspace_members (
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL REFERENCES users (id),
    role          TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);

CREATE INDEX workspace_members_by_user ON workspace_members (user_id);

INSERT INTO workspace_members (workspace_id, user_id, role, created_at, updated_at)
SELECT id, id, 'owner', created_at, created_at FROM users;

CREATE TABLE invites (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    token_hash    TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    email         TEXT,
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    accepted_by   TEXT,
    accepted_at   TIMESTAMPTZ
);

CREATE INDEX invites_by_workspace ON invites (workspace_id, created_at);

CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    secret_hash   TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    expires_at    TIMESTAMPTZ,
    last_used_at  TIMESTAMPTZ,
    revoked_at    TIMESTAMPTZ
);

CREATE INDEX api_keys_by_workspace ON api_keys (workspace_id, created_at);

CREATE TABLE audit_log (
    workspace_id  TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    at            TIMESTAMPTZ NOT NULL,
    -- 'user' or 'key', its id, and how it read then (an email, a key's name).
    actor_kind    TEXT NOT NULL,
    actor_id      TEXT NOT NULL,
    actor_label   TEXT NOT NULL,
    address       TEXT,
    action        TEXT NOT NULL,
    target_kind   TEXT NOT NULL,
    target_id     TEXT NOT NULL,
    -- JSON, secrets masked; NULL where there was nothing before (or after).
    before        TEXT,
    after         TEXT,
    prev_hash     TEXT NOT NULL,
    hash          TEXT NOT NULL,
    PRIMARY KEY (workspace_id, seq)
);

CREATE INDEX audit_log_by_time ON audit_log (at);

-- The rows that named a user now name a workspace.
ALTER TABLE agents DROP CONSTRAINT agents_owner_id_fkey,
    ADD CONSTRAINT agents_owner_id_fkey FOREIGN KEY (owner_id)
        REFERENCES workspaces (id) ON DELETE CASCADE;
ALTER TABLE chat_connections DROP CONSTRAINT chat_connections_owner_id_fkey,
    ADD CONSTRAINT chat_connections_owner_id_fkey FOREIGN KEY (owner_id)
        REFERENCES workspaces (id) ON DELETE CASCADE;
ALTER TABLE mcp_servers DROP CONSTRAINT mcp_servers_owner_id_fkey,
    ADD CONSTRAINT mcp_servers_owner_id_fkey FOREIGN KEY (owner_id)
        REFERENCES workspaces (id) ON DELETE CASCADE;
ALTER TABLE budget_spend DROP CONSTRAINT budget_spend_owner_id_fkey,
    ADD CONSTRAINT budget_spend_owner_id_fkey FOREIGN KEY (owner_id)
        REFERENCES workspaces (id) ON DELETE CASCADE;
ALTER TABLE budget_warnings DROP CONSTRAINT budget_warnings_owner_id_fkey,
    ADD CONSTRAINT budget_warnings_owner_id_fkey FOREIGN KEY (owner_id)
        REFERENCES workspaces (id) ON DELETE CASCADE;
ALTER TABLE billing_subscriptions DROP CONSTRAINT billing_subscriptions_user_id_fkey;
ALTER TABLE billing_subscriptions RENAME COLUMN user_id TO workspace_id;
ALTER TABLE billing_subscriptions ADD CONSTRAINT billing_subscriptions_workspace_id_fkey
    FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE SET NULL;
ALTER INDEX billing_subscriptions_by_user RENAME TO billing_subscriptions_by_workspace;

DROP INDEX users_by_stripe_customer;
ALTER TABLE users DROP COLUMN plan, DROP COLUMN stripe_customer_id,
    DROP COLUMN subscription_status, DROP COLUMN budget_micros;
