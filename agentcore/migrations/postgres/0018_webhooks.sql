-- Outbound webhooks: a workspace's endpoints, the events they ask for, and their deliveries.
--
-- An endpoint's signing secret is sealed like bot tokens ('v1:<nonce>:<ciphertext>'); after a
-- rotation the previous one keeps signing beside it until `previous_until`. `after_seq` is the
-- owner's latest event when the endpoint was made: it is sent only the events after it.
--
-- Fan-out: `webhook_cursors` holds, per owner with endpoints, the last event turned into
-- deliveries; it moves in the transaction that inserts them (compare-and-set on `seq`), and
-- the unique (webhook_id, event_seq) keeps two nodes from doubling one. A delivery keeps the
-- body it sends, rendered once, and its message id (`webhook-id`): every retry sends the same
-- bytes. Tests and redeliveries have no `event_seq`. Attempts are leased like the outbox's
-- posts, every time the database's.

CREATE TABLE webhooks (
    id                TEXT PRIMARY KEY,
    owner_id          TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    url               TEXT NOT NULL,
    events            TEXT NOT NULL,
    description       TEXT NOT NULL DEFAULT '',
    enabled           BOOLEAN NOT NULL,
    disabled_reason   TEXT,
    failure_run       INTEGER NOT NULL DEFAULT 0,
    secret            TEXT NOT NULL,
    previous_secret   TEXT,
    previous_until    TIMESTAMPTZ,
    after_seq         BIGINT NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    secret_rotated_at TIMESTAMPTZ
);

CREATE INDEX webhooks_by_owner ON webhooks (owner_id, created_at);

CREATE TABLE webhook_cursors (
    owner_id  TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    seq       BIGINT NOT NULL
);

CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    owner_id         TEXT NOT NULL,
    webhook_id       TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    message_id       TEXT NOT NULL,
    event_seq        BIGINT,
    event_type       TEXT NOT NULL,
    body             TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ,
    lease_owner      TEXT,
    lease_until      TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL,
    UNIQUE (webhook_id, event_seq)
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, id);
CREATE INDEX webhook_deliveries_by_age ON webhook_deliveries (created_at);
-- An endpoint's pending deliveries: counted against the bound, and looked at by each claim.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, next_attempt_at)
    WHERE status = 'pending';

CREATE TABLE webhook_attempts (
    delivery_id  TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt      INTEGER NOT NULL,
    at           TIMESTAMPTZ NOT NULL,
    status       INTEGER,
    error        TEXT,
    duration_ms  BIGINT NOT NULL,
    response     TEXT,
    PRIMARY KEY (delivery_id, attempt)
);
