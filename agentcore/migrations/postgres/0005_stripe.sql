-- Stripe webhooks: each event applied at most once, and each subscription's latest state, from
-- which a user's plan is computed (users.plan and users.subscription_status cache the result).

CREATE TABLE billing_events (
    id           TEXT PRIMARY KEY,
    type         TEXT NOT NULL,
    -- Stripe's `created`, unix seconds.
    created      BIGINT NOT NULL,
    received_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE billing_subscriptions (
    id                  TEXT PRIMARY KEY,
    customer_id         TEXT NOT NULL,
    -- NULL until the customer is linked to a user (the event is kept and applied then).
    user_id             TEXT REFERENCES users (id) ON DELETE SET NULL,
    status              TEXT NOT NULL,
    -- The plan it grants now; NULL grants nothing.
    plan                TEXT,
    -- The `created` of the last event applied: older events are ignored.
    last_event_created  BIGINT NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL
);

CREATE INDEX billing_subscriptions_by_customer ON billing_subscriptions (customer_id);
CREATE INDEX billing_subscriptions_by_user ON billing_subscriptions (user_id)
    WHERE user_id IS NOT NULL;
