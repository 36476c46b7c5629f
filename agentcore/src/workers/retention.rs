//! The node's housekeeping, all of it, once an hour on every node (the outbox worker's loop
//! runs it): events after a day (`EVENT_WINDOW`, but never one the webhooks' fan-out has not
//! passed), delivered posts and trigger calls' records after a week, webhook deliveries done
//! (delivered or failed) after 30 days, Stripe events and the records of schedules' fire times
//! after 30 days, and, when the operator set `retention.finished_days`, finished tasks and
//! activity older than that (`retention.audit_days`: audit entries). Each kind goes a bounded
//! batch at a time, so other writes interleave with a large prune.

use chrono::Duration as Days;

use crate::core::Core;
use crate::domain::event::EVENT_WINDOW;
use crate::domain::now;
use crate::error::Result;
use crate::store::Prunable;

/// Delivered posts are kept this long, with Discord's message id, for tracing.
const KEEP_DELIVERED_DAYS: i64 = 7;
/// Applied Stripe events are kept this long (Stripe retries a delivery for three days).
const KEEP_BILLING_EVENTS_DAYS: i64 = 30;
/// A fire time's record is kept this long (it guards against a second task for that time).
const KEEP_FIRES_DAYS: i64 = 30;
/// Webhook deliveries no longer pending are kept this long, with their attempts' answers.
const KEEP_WEBHOOK_DELIVERIES_DAYS: i64 = 30;
/// An accepted trigger call's record is kept this long: far past the 5 minutes in which its
/// signed timestamp can be accepted again, and long enough to look a call up.
const KEEP_TRIGGER_CALLS_DAYS: i64 = 7;
/// Rows deleted per statement.
pub(crate) const BATCH: i64 = 500;

/// Prunes everything due, logging what went and what could not.
pub(crate) async fn prune_all(core: &Core) {
    let mut due = Vec::new();
    if let Some(days) = core.retention_config().finished_days {
        let days = Days::days(i64::from(days));
        due.extend([(Prunable::FinishedTasks, days), (Prunable::Activity, days)]);
    }
    if let Some(days) = core.retention_config().audit_days {
        due.push((Prunable::Audit, Days::days(i64::from(days))));
    }
    due.extend([
        (Prunable::DeliveredPosts, Days::days(KEEP_DELIVERED_DAYS)),
        (Prunable::BillingEvents, Days::days(KEEP_BILLING_EVENTS_DAYS)),
        (Prunable::TriggerCalls, Days::days(KEEP_TRIGGER_CALLS_DAYS)),
        (Prunable::Events, Days::from_std(EVENT_WINDOW).unwrap_or(Days::days(1))),
        (Prunable::WebhookDeliveries, Days::days(KEEP_WEBHOOK_DELIVERIES_DAYS)),
    ]);
    for (what, keep) in due {
        match prune(core, what, keep).await {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, what = what.as_str(), "pruned"),
            Err(error) => tracing::warn!(%error, what = what.as_str(), "cannot prune"),
        }
    }
    let before = (now() - Days::days(KEEP_FIRES_DAYS)).timestamp();
    match core.retention_store().prune_schedule_fires(before).await {
        Ok(0) => {}
        Ok(count) => tracing::debug!(count, "old schedule fire records pruned"),
        Err(error) => tracing::warn!(%error, "cannot prune old schedule fire records"),
    }
}

/// Deletes `what` older than `keep`, batch after batch until one comes back short.
async fn prune(core: &Core, what: Prunable, keep: Days) -> Result<u64> {
    let before = now() - keep;
    let mut total = 0;
    loop {
        let count = core.retention_store().prune(what, before, BATCH).await?;
        total += count;
        if count < BATCH as u64 {
            return Ok(total);
        }
        // Let the writes waiting for the lock go first.
        tokio::task::yield_now().await;
    }
}
