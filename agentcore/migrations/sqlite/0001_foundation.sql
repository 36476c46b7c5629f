-- Accounts, agents, their backlog and activity. Timestamps are RFC 3339 text in UTC, written
-- by sqlx from chrono values (so they sort as text); ids are text.

CREATE TABLE secrets (
    name        TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    email          TEXT NOT NULL,
    email_key      TEXT NOT NULL UNIQUE,
    name           TEXT NOT NULL,
    password_hash  TEXT NOT NULL,
    token_version  INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);

CREATE TABLE agents (
    owner_id                TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    id                      TEXT NOT NULL,
    name                    TEXT NOT NULL,
    status                  TEXT NOT NULL CHECK (status IN ('active', 'idle', 'vacation', 'error')),
    status_before_vacation  TEXT CHECK (status_before_vacation IN ('active', 'idle', 'vacation', 'error')),
    channel                 TEXT NOT NULL,
    role_prompt             TEXT NOT NULL,
    throttle_seconds        REAL NOT NULL DEFAULT 0,
    workspace               TEXT,
    model                   TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (owner_id, id)
);

CREATE INDEX agents_by_owner_created ON agents (owner_id, created_at);

CREATE TABLE tasks (
    id             TEXT PRIMARY KEY,
    owner_id       TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    title          TEXT NOT NULL,
    description    TEXT,
    priority       INTEGER NOT NULL DEFAULT 0,
    status         TEXT NOT NULL CHECK (status IN ('queued', 'in_progress', 'complete', 'failed')),
    result         TEXT,
    error          TEXT,
    attempts       INTEGER NOT NULL DEFAULT 0,
    input_tokens   INTEGER,
    output_tokens  INTEGER,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    started_at     TEXT,
    completed_at   TEXT,
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
);

CREATE INDEX tasks_by_agent_status ON tasks (owner_id, agent_id, status, priority DESC, created_at);

CREATE TABLE activity (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id    TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    action      TEXT NOT NULL,
    details     TEXT NOT NULL,
    task_id     TEXT,
    created_at  TEXT NOT NULL,
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE
);

CREATE INDEX activity_by_agent ON activity (owner_id, agent_id, id);
