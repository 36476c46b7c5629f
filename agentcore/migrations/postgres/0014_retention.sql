-- Pruning in bounded batches, oldest first, through an index in time order: finished tasks
-- (`retention.finished_days`) and applied Stripe events. Delivered posts have
-- `outbox_delivered` already; activity is pruned by id, which grows as it is written.

CREATE INDEX tasks_finished_at ON tasks (completed_at) WHERE status IN ('complete', 'failed');
CREATE INDEX billing_events_received ON billing_events (received_at);
