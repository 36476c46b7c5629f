-- Discord connections, agent-to-channel mappings and the outbox of agent posts.

CREATE TABLE chat_connections (
    owner_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    guild_id       TEXT NOT NULL,
    id             TEXT NOT NULL UNIQUE,
    guild_name     TEXT NOT NULL,
    -- 'bot_token': the user's own bot, its token sealed under the server key;
    -- 'oauth': the service's bot, installed through OAuth (no token stored here).
    kind           TEXT NOT NULL CHECK (kind IN ('bot_token', 'oauth')),
    bot_token      TEXT,
    channel_count  INTEGER NOT NULL DEFAULT 0,
    connected_at   TEXT NOT NULL,
    PRIMARY KEY (owner_id, guild_id)
);

CREATE TABLE chat_mappings (
    owner_id      TEXT NOT NULL,
    agent_id      TEXT NOT NULL,
    id            TEXT NOT NULL UNIQUE,
    guild_id      TEXT NOT NULL,
    channel_id    TEXT NOT NULL,
    channel_name  TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (owner_id, agent_id),
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE,
    FOREIGN KEY (owner_id, guild_id) REFERENCES chat_connections (owner_id, guild_id) ON DELETE CASCADE
);

CREATE TABLE outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id         TEXT NOT NULL,
    agent_id         TEXT NOT NULL,
    guild_id         TEXT NOT NULL,
    channel_id       TEXT NOT NULL,
    nonce            TEXT NOT NULL,
    payload          TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    next_attempt_at  TEXT NOT NULL,
    lease_owner      TEXT,
    lease_until      TEXT,
    -- Set once Discord accepted the post; delivered rows are kept a week for tracing.
    message_id       TEXT,
    delivered_at     TEXT,
    created_at       TEXT NOT NULL,
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE,
    FOREIGN KEY (owner_id, guild_id) REFERENCES chat_connections (owner_id, guild_id) ON DELETE CASCADE
);

CREATE INDEX outbox_pending ON outbox (channel_id, id) WHERE delivered_at IS NULL;
CREATE INDEX outbox_delivered ON outbox (delivered_at) WHERE delivered_at IS NOT NULL;
