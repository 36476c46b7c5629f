-- Plans: every user is on one ('free' until a subscription says otherwise).

ALTER TABLE users ADD COLUMN plan TEXT NOT NULL DEFAULT 'free';
ALTER TABLE users ADD COLUMN stripe_customer_id TEXT;
ALTER TABLE users ADD COLUMN subscription_status TEXT;

CREATE UNIQUE INDEX users_by_stripe_customer ON users (stripe_customer_id)
    WHERE stripe_customer_id IS NOT NULL;
