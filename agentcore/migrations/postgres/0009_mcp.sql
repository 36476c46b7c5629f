-- MCP servers: each agent names the servers whose tools it may call (the operator's, from the
-- configuration, or its owner's own); users add streamable HTTP servers, their bearer tokens
-- sealed under the server key like bot tokens ('v1:<nonce>:<ciphertext>').

ALTER TABLE agents ADD COLUMN mcp_servers TEXT NOT NULL DEFAULT '[]';

CREATE TABLE mcp_servers (
    owner_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    url         TEXT NOT NULL,
    token       TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner_id, name)
);
