//! What the node reports about itself: the counters of its workers, the work waiting in the
//! database and the health of its storage.

use std::sync::atomic::Ordering;

use super::Core;
use crate::telemetry::{Metrics, ModelCallMetrics, RuntimeStats, WebhookStats};

impl Core {
    /// What this node counted, and the work waiting in the database (left out while the
    /// database cannot be read: the storage fault counts matter most then).
    pub async fn metrics(&self) -> crate::Result<Metrics> {
        let backlogs = match self.store().backlogs().await {
            Ok(backlogs) => Some(backlogs),
            Err(error @ crate::Error::Storage { .. }) => {
                tracing::debug!(%error, "metrics without the backlog gauges");
                None
            }
            Err(error) => return Err(error),
        };
        let model_calls = self
            .counters()
            .models
            .iter()
            .map(|(provider, calls)| ModelCallMetrics {
                provider: provider.clone(),
                latency: calls.latency.snapshot(),
                transient_errors: calls.transient_errors.load(Ordering::Relaxed),
                permanent_errors: calls.permanent_errors.load(Ordering::Relaxed),
                rate_waits: calls.rate_waits.load(Ordering::Relaxed),
                rate_wait_seconds: calls.rate_wait_micros.load(Ordering::Relaxed) as f64 / 1e6,
                cooldown_skips: calls.cooldown_skips.load(Ordering::Relaxed),
            })
            .collect();
        Ok(Metrics {
            runtime: self.runtime_stats(),
            model_calls,
            mcp_calls: self.mcp().metrics(),
            discord_rate_limited: self.discord_rate_limited(),
            queued_tasks: backlogs.as_ref().map(|b| b.queued_tasks),
            tasks_in_progress: backlogs.as_ref().map(|b| b.tasks_in_progress),
            outbox_pending: backlogs.as_ref().map(|b| b.outbox_pending),
            clock_skew_seconds: self.counters().skew.seconds(),
            model_costs: self.counters().model_costs(),
            storage_faults: self.store().health().counts(),
            storage_fault: self.store().health().fault().map(|(fault, _)| fault),
            webhooks: WebhookStats {
                delivered: self.counters().webhooks_delivered.load(Ordering::Relaxed),
                failed_attempts: self.counters().webhook_attempts_failed.load(Ordering::Relaxed),
                failed_deliveries: self.counters().webhooks_failed.load(Ordering::Relaxed),
            },
            trigger_calls: self.counters().hooks.snapshot(),
            model_cooldowns: self.model_cooldowns().await,
            adds_waiting: self.store().adds_waiting(),
            audit_entries_waiting: self.store().audit_entries_waiting(),
            finishes_waiting: self.store().finishes_waiting(),
            finish_transactions: self.store().finish_transactions(),
        })
    }

    /// What this node's runtime has done since it started.
    pub fn runtime_stats(&self) -> RuntimeStats {
        let counters = self.counters();
        RuntimeStats {
            tasks_completed: counters.completed.load(Ordering::Relaxed),
            tasks_failed: counters.failed.load(Ordering::Relaxed),
            results_dropped: counters.dropped.load(Ordering::Relaxed),
            tasks_cancelled: counters.cancelled.load(Ordering::Relaxed),
            runs_interrupted: counters.interrupted.load(Ordering::Relaxed),
            agents_running: self.wakeups().running() as u64,
        }
    }
}
