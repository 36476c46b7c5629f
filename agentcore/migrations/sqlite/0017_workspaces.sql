-- Teams. Everything a person owned now belongs to a workspace: the `owner_id` of every row names
-- a workspace. Each user gets a personal workspace whose id is their own id, so the rows already
-- stored are the personal workspace's without being touched; plan, Stripe customer and budget
-- move from the user to the workspace. Members hold a role in a workspace; invites and API keys
-- are stored by a keyed hash of their secret only; the audit log is chained by hashes.
--
-- SQLite cannot change a foreign key with ALTER TABLE, and rebuilding the tables is no way out
-- here: foreign keys cannot be turned off inside the migration's transaction, so dropping the
-- old `agents` would first delete its rows and cascade to every task, activity entry and step.
-- A foreign key's target is not part of what is stored on disk, so the six tables' definitions
-- are edited in place, as SQLite documents for such changes (ALTER TABLE, "making other kinds
-- of table schema changes": `writable_schema`), the schema is reloaded, and every foreign key
-- is checked before the commit. The tables created here change the schema's version, so other
-- connections read the new definitions too.

CREATE TABLE workspaces (
    id                   TEXT PRIMARY KEY,
    name                 TEXT NOT NULL,
    -- The user whose personal workspace this is (its id is theirs); NULL for a team's.
    personal_of          TEXT UNIQUE REFERENCES users (id),
    plan                 TEXT NOT NULL DEFAULT 'free',
    stripe_customer_id   TEXT,
    subscription_status  TEXT,
    budget_micros        BIGINT,
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL
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
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
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
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    accepted_by   TEXT,
    accepted_at   TEXT
);

CREATE INDEX invites_by_workspace ON invites (workspace_id, created_at);

CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    secret_hash   TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
    created_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    expires_at    TEXT,
    last_used_at  TEXT,
    revoked_at    TEXT
);

CREATE INDEX api_keys_by_workspace ON api_keys (workspace_id, created_at);

CREATE TABLE audit_log (
    workspace_id  TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    at            TEXT NOT NULL,
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
ALTER TABLE billing_subscriptions RENAME COLUMN user_id TO workspace_id;
DROP INDEX billing_subscriptions_by_user;
CREATE INDEX billing_subscriptions_by_workspace ON billing_subscriptions (workspace_id)
    WHERE workspace_id IS NOT NULL;

PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, 'REFERENCES users (id)', 'REFERENCES workspaces (id)')
WHERE type = 'table'
  AND name IN ('agents', 'chat_connections', 'mcp_servers', 'budget_spend', 'budget_warnings',
               'billing_subscriptions');
PRAGMA writable_schema = RESET;

DROP INDEX users_by_stripe_customer;
ALTER TABLE users DROP COLUMN plan;
ALTER TABLE users DROP COLUMN stripe_customer_id;
ALTER TABLE users DROP COLUMN subscription_status;
ALTER TABLE users DROP COLUMN budget_micros;

-- Fails the migration (and leaves the file as it was) if any reference is broken.
CREATE TEMP TABLE broken_references (found INTEGER CHECK (found = 0));
INSERT INTO broken_references SELECT COUNT(*) FROM pragma_foreign_key_check;
DROP TABLE broken_references;
