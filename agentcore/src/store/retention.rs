//! Forgetting what is old, a bounded batch at a time: finished tasks and activity (when the
//! operator keeps them only so long), delivered posts and applied billing events. Each call
//! deletes at most `batch` rows in one statement (its own short transaction), so pruning a large backlog never
//! holds the write lock for long; the caller repeats while a batch comes back full.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::db::{SqlStore, query};
use super::shared::housekeeping;
use crate::error::Result;

/// What to forget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prunable {
    /// Complete and failed tasks finished before the time (their steps, holds and approvals
    /// go with them; their agents' counts follow).
    FinishedTasks,
    /// Activity entries written before the time.
    Activity,
    /// Posts delivered to Discord before the time.
    DeliveredPosts,
    /// Stripe events received before the time (their order is kept on each subscription, and
    /// a replayed old event fails its signature's age check first).
    BillingEvents,
    /// Events (`GET /api/events`) written before the time: a client that reconnects later
    /// gets `resync`.
    Events,
    /// Audit entries recorded before the time, but never a workspace's last one: the chain
    /// goes on from it (`audit verify` takes the first entry left as given).
    Audit,
    /// Webhook deliveries made before the time that are no longer pending (their attempts go
    /// with them).
    WebhookDeliveries,
    /// The records of accepted trigger calls (`webhook-id` and task) received before the
    /// time: a repeat of an older call is then accepted again, but its signed timestamp is
    /// refused long before (5 minutes).
    TriggerCalls,
}

impl Prunable {
    pub fn as_str(self) -> &'static str {
        match self {
            Prunable::FinishedTasks => "finished tasks",
            Prunable::Activity => "activity",
            Prunable::DeliveredPosts => "delivered posts",
            Prunable::BillingEvents => "billing events",
            Prunable::Events => "events",
            Prunable::Audit => "audit entries",
            Prunable::WebhookDeliveries => "webhook deliveries",
            Prunable::TriggerCalls => "trigger calls",
        }
    }
}

#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Deletes up to `batch` rows of `what` older than `before`; returns how many.
    async fn prune(&self, what: Prunable, before: DateTime<Utc>, batch: i64) -> Result<u64>;
    /// Forgets the schedules' fire times before `before` (seconds since the epoch); returns
    /// how many.
    async fn prune_schedule_fires(&self, before: i64) -> Result<u64>;
}

#[async_trait::async_trait]
impl<S: SqlStore> RetentionStore for S {
    async fn prune(&self, what: Prunable, before: DateTime<Utc>, batch: i64) -> Result<u64> {
        housekeeping(self.storage_health(), async {
            let statement = match what {
                Prunable::FinishedTasks => sql::PRUNE_FINISHED_TASKS,
                Prunable::Activity => sql::PRUNE_ACTIVITY,
                Prunable::DeliveredPosts => sql::PRUNE_DELIVERED,
                Prunable::BillingEvents => sql::PRUNE_BILLING_EVENTS,
                Prunable::Events => sql::PRUNE_EVENTS,
                Prunable::Audit => sql::PRUNE_AUDIT,
                Prunable::WebhookDeliveries => sql::PRUNE_WEBHOOK_DELIVERIES,
                Prunable::TriggerCalls => sql::PRUNE_TRIGGER_CALLS,
            };
            let mut tx = self.begin_write().await?;
            let done = query(statement).bind(before).bind(batch).execute(&mut tx).await?;
            tx.commit().await?;
            Ok(done.rows_affected())
        })
        .await
    }

    async fn prune_schedule_fires(&self, before: i64) -> Result<u64> {
        housekeeping(self.storage_health(), async {
            let done = query(sql::PRUNE_FIRES).bind(before).execute(self.writer()).await?;
            Ok(done.rows_affected())
        })
        .await
    }
}

/// The statements of this area, the same on both backends: each picks its batch through an
/// index in time order (`$1` the time, `$2` the batch).
pub(super) mod sql {
    /// Through `tasks_finished_at`.
    pub(crate) const PRUNE_FINISHED_TASKS: &str = "DELETE FROM tasks WHERE id IN \
        (SELECT id FROM tasks WHERE status IN ('complete', 'failed', 'cancelled') \
        AND completed_at < $1 \
        ORDER BY completed_at LIMIT $2)";
    /// Activity has no index by time: its ids grow as it is written, so the oldest entries are
    /// the first ids. A batch looks at the `$2` oldest entries only and deletes those written
    /// before `$1`, so the work stays bounded even when nothing is old enough.
    pub(crate) const PRUNE_ACTIVITY: &str = "DELETE FROM activity WHERE id IN \
        (SELECT id FROM (SELECT id, created_at FROM activity ORDER BY id LIMIT $2) oldest \
        WHERE created_at < $1)";
    /// Through `outbox_delivered`.
    pub(crate) const PRUNE_DELIVERED: &str = "DELETE FROM outbox WHERE id IN \
        (SELECT id FROM outbox WHERE delivered_at < $1 ORDER BY delivered_at LIMIT $2)";
    /// Through `billing_events_received`.
    pub(crate) const PRUNE_BILLING_EVENTS: &str = "DELETE FROM billing_events WHERE id IN \
        (SELECT id FROM billing_events WHERE received_at < $1 ORDER BY received_at LIMIT $2)";
    /// Through `events_by_age`; never an event the webhooks' fan-out has not passed yet.
    pub(crate) const PRUNE_EVENTS: &str = "DELETE FROM events WHERE (owner_id, seq) IN \
        (SELECT owner_id, seq FROM events e WHERE created_at < $1 AND NOT EXISTS \
        (SELECT 1 FROM webhook_cursors c WHERE c.owner_id = e.owner_id AND c.seq < e.seq) \
        ORDER BY created_at LIMIT $2)";
    /// Through `webhook_deliveries_by_age`; pending ones stay.
    pub(crate) const PRUNE_WEBHOOK_DELIVERIES: &str = "DELETE FROM webhook_deliveries WHERE id IN \
        (SELECT id FROM webhook_deliveries WHERE created_at < $1 AND status <> 'pending' \
        ORDER BY created_at LIMIT $2)";
    /// Through `audit_log_by_time`; each workspace's latest entry stays.
    pub(crate) const PRUNE_AUDIT: &str = "DELETE FROM audit_log WHERE (workspace_id, seq) IN \
        (SELECT workspace_id, seq FROM audit_log a WHERE at < $1 AND seq < \
        (SELECT MAX(seq) FROM audit_log b WHERE b.workspace_id = a.workspace_id) \
        ORDER BY at LIMIT $2)";
    /// Through `trigger_calls_by_age`.
    pub(crate) const PRUNE_TRIGGER_CALLS: &str = "DELETE FROM trigger_calls WHERE \
        (trigger_id, webhook_id) IN (SELECT trigger_id, webhook_id FROM trigger_calls \
        WHERE received_at < $1 ORDER BY received_at LIMIT $2)";
    /// The schedules' fire times (`$1` seconds since the epoch), all at once: one row per
    /// schedule and minute at most.
    pub(crate) const PRUNE_FIRES: &str = "DELETE FROM schedule_fires WHERE fire_at < $1";
}
