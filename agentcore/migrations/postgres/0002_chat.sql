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
    channel_count  BIGINT NOT NULL DEFAULT 0,
    connected_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner_id, guild_id)
);

CREATE TABLE chat_mappings (
    owner_id      TEXT NOT NULL,
    agent_id      TEXT NOT NULL,
    id            TEXT NOT NULL UNIQUE,
    guild_id      TEXT NOT NULL,
    channel_id    TEXT NOT NULL,
    channel_name  TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner_id, agent_id),
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE,
    FOREIGN KEY (owner_id, guild_id) REFERENCES chat_connections (owner_id, guild_id) ON DELETE CASCADE
);

CREATE TABLE outbox (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner_id         TEXT NOT NULL,
    agent_id         TEXT NOT NULL,
    guild_id         TEXT NOT NULL,
    channel_id       TEXT NOT NULL,
    nonce            TEXT NOT NULL,
    payload          TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    lease_owner      TEXT,
    lease_until      TIMESTAMPTZ,
    -- Set once Discord accepted the post; delivered rows are kept a week for tracing.
    message_id       TEXT,
    delivered_at     TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL,
    FOREIGN KEY (owner_id, agent_id) REFERENCES agents (owner_id, id) ON DELETE CASCADE,
    FOREIGN KEY (owner_id, guild_id) REFERENCES chat_connections (owner_id, guild_id) ON DELETE CASCADE
);

CREATE INDEX outbox_pending ON outbox (channel_id, id) WHERE delivered_at IS NULL;
CREATE INDEX outbox_delivered ON outbox (delivered_at) WHERE delivered_at IS NOT NULL;
