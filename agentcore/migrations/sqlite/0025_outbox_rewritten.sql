-- A post rewritten in the outbox (an approval decided before its request was recorded as
-- delivered). Discord may already hold the first body: a send cut off before its answer, or
-- lost with its lease, is sent again with the same nonce, and Discord answers with the
-- message it made first. A rewritten post is edited once it is delivered.
ALTER TABLE outbox ADD COLUMN rewritten INTEGER NOT NULL DEFAULT 0;
