//! What the node has done, for metrics: plain atomics the hot paths bump, and a snapshot the
//! server renders (in Prometheus' text format, in `agentd`). Nothing here knows about any
//! metrics system.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::error::StorageFault;
use crate::models::ModelError;
use crate::store::StorageFaultCounts;

/// Upper bounds of the latency buckets, in seconds: from a fast HTTP answer to a slow model call.
pub const LATENCY_BUCKETS: [f64; 14] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 120.0];

/// A latency histogram over [`LATENCY_BUCKETS`], lock-free.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last is above every bound.
    counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = LATENCY_BUCKETS.iter().position(|&bound| seconds <= bound);
        let index = bucket.unwrap_or(LATENCY_BUCKETS.len());
        self.counts[index].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0;
        let buckets = self
            .counts
            .iter()
            .map(|count| {
                cumulative += count.load(Ordering::Relaxed);
                cumulative
            })
            .collect();
        HistogramSnapshot {
            cumulative: buckets,
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// A histogram's state: `cumulative[i]` observations at or under `LATENCY_BUCKETS[i]`, the last
/// entry being all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    pub cumulative: Vec<u64>,
    pub sum_seconds: f64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

/// Model calls of one provider.
#[derive(Debug, Default)]
pub(crate) struct ProviderCalls {
    pub latency: Histogram,
    pub transient_errors: AtomicU64,
    pub permanent_errors: AtomicU64,
    /// Calls that waited for the shared rate limit, and how long they waited in all.
    pub rate_waits: AtomicU64,
    pub rate_wait_micros: AtomicU64,
    /// Calls not sent to a model of this provider: it was cooling down (or being probed).
    pub cooldown_skips: AtomicU64,
}

/// Everything the node counted, plus what waits in the database.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Tasks finished and agents held by this node.
    pub runtime: RuntimeStats,
    pub model_calls: Vec<ModelCallMetrics>,
    /// MCP tool calls, per server.
    pub mcp_calls: Vec<McpCallMetrics>,
    /// 429 answers from Discord, of any scope.
    pub discord_rate_limited: u64,
    /// Across every node: tasks queued, tasks in progress, posts not yet delivered; `None`
    /// when the database could not be read.
    pub queued_tasks: Option<i64>,
    pub tasks_in_progress: Option<i64>,
    pub outbox_pending: Option<i64>,
    /// This node's clock minus the database's, as last measured.
    pub clock_skew_seconds: Option<f64>,
    /// Micro-dollars spent on model calls by this node, per priced model (full name), then
    /// `unpriced` for the calls of models without a price (always 0: counted as calls).
    pub model_costs: Vec<ModelCost>,
    /// Writes refused for a storage fault since the process started.
    pub storage_faults: StorageFaultCounts,
    /// The fault writes fail with now, if they do.
    pub storage_fault: Option<StorageFault>,
    /// Webhook attempts this node made, by outcome.
    pub webhooks: WebhookStats,
    /// Calls to triggers (`POST /hooks/{id}`) this node answered, by outcome, every outcome
    /// listed.
    pub trigger_calls: Vec<(HookOutcome, u64)>,
    /// Models with a health record, and how many are in cool-down now (shared by every node;
    /// empty when the database could not be read): 0 or 1 for each model labelled by name,
    /// the count for `other` (see `Core::metrics`).
    pub model_cooldowns: Vec<(String, u32)>,
    /// Adds to agents' backlogs waiting on this node for a transaction of their agent's adds
    /// in flight, to be committed together in the next (PostgreSQL; 0 on SQLite).
    pub adds_waiting: usize,
    /// Audit entries waiting on this node for a transaction of their workspace's entries in
    /// flight, to be committed together in the next (PostgreSQL; 0 on SQLite).
    pub audit_entries_waiting: usize,
    /// Finished tasks waiting on this node for a transaction of finishes in flight, to be
    /// committed together in the next (both backends).
    pub finishes_waiting: usize,
    /// Transactions of finished tasks this node committed since it started: with
    /// `tasks_completed` and `tasks_failed`, how many finishes share a commit.
    pub finish_transactions: u64,
}

/// What this node's webhooks' worker did since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebhookStats {
    /// Attempts answered with a 2xx.
    pub delivered: u64,
    /// Attempts that failed (an answer other than 2xx, a timeout, a refused address).
    pub failed_attempts: u64,
    /// Deliveries given up after the last attempt of the schedule.
    pub failed_deliveries: u64,
}

/// How a call to a trigger ended: accepted (a task queued, or a repeat of an accepted call),
/// or refused and why. The words are the `outcome` label of `agentd_trigger_calls_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookOutcome {
    Accepted,
    Duplicate,
    /// No such trigger.
    NotFound,
    /// Over the body bound (413).
    TooLarge,
    /// Missing or bad signature, or a timestamp outside the window (401).
    InvalidSignature,
    /// A body that is not a JSON object (400).
    BadBody,
    Disabled,
    /// Over the trigger's calls a minute, or the backlog's quota (429).
    Limited,
    /// Anything else: a storage fault, an internal error.
    Failed,
}

impl HookOutcome {
    pub const ALL: [HookOutcome; 9] = [
        HookOutcome::Accepted,
        HookOutcome::Duplicate,
        HookOutcome::NotFound,
        HookOutcome::TooLarge,
        HookOutcome::InvalidSignature,
        HookOutcome::BadBody,
        HookOutcome::Disabled,
        HookOutcome::Limited,
        HookOutcome::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HookOutcome::Accepted => "accepted",
            HookOutcome::Duplicate => "duplicate",
            HookOutcome::NotFound => "not_found",
            HookOutcome::TooLarge => "too_large",
            HookOutcome::InvalidSignature => "invalid_signature",
            HookOutcome::BadBody => "bad_body",
            HookOutcome::Disabled => "disabled",
            HookOutcome::Limited => "limited",
            HookOutcome::Failed => "failed",
        }
    }
}

/// Trigger calls counted by outcome, in [`HookOutcome::ALL`]'s order.
#[derive(Debug, Default)]
pub(crate) struct HookCounters([AtomicU64; HookOutcome::ALL.len()]);

impl HookCounters {
    pub(crate) fn count(&self, outcome: HookOutcome) {
        if let Some(i) = HookOutcome::ALL.iter().position(|o| *o == outcome) {
            self.0[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<(HookOutcome, u64)> {
        HookOutcome::ALL.iter().zip(&self.0).map(|(o, n)| (*o, n.load(Ordering::Relaxed))).collect()
    }
}

/// What `GET /metrics` shows of one operator MCP server's calls, or of all users' servers.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallMetrics {
    /// The operator's server; `None` for users' servers, counted together: their names are
    /// their owners' business, and their number is up to the users.
    pub server: Option<String>,
    pub origin: crate::domain::mcp::McpOrigin,
    pub calls: u64,
    pub errors: u64,
    pub latency: HistogramSnapshot,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelCallMetrics {
    /// A configured provider's name, or `echo`.
    pub provider: String,
    /// Every call, answered or failed.
    pub latency: HistogramSnapshot,
    pub transient_errors: u64,
    pub permanent_errors: u64,
    /// Calls that waited for the shared rate limit (`models.rate_limits`) before they went.
    pub rate_waits: u64,
    pub rate_wait_seconds: f64,
    /// Calls that skipped a model of this provider in cool-down.
    pub cooldown_skips: u64,
}

/// What one model's calls cost on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCost {
    /// A priced model's full name, or `unpriced`.
    pub model: String,
    pub calls: u64,
    pub micros: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let histogram = Histogram::default();
        histogram.observe(Duration::from_micros(500));
        histogram.observe(Duration::from_millis(1));
        histogram.observe(Duration::from_millis(40));
        histogram.observe(Duration::from_secs(500));
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.cumulative[0], 2, "0.5 ms and exactly 1 ms are within 1 ms");
        assert_eq!(snapshot.cumulative[4], 2);
        assert_eq!(snapshot.cumulative[5], 3, "40 ms is within 50 ms");
        assert_eq!(snapshot.cumulative[LATENCY_BUCKETS.len() - 1], 3);
        assert_eq!(snapshot.count(), 4, "500 s is only in +Inf");
        assert!((snapshot.sum_seconds - 500.0415).abs() < 1e-6, "{}", snapshot.sum_seconds);
    }
}

/// What this node's runtime has done since it started, for operators and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    pub tasks_completed: u64,
    pub tasks_failed: u64,
    /// Outcomes not written: the task, its agent or the lease was gone when the call ended.
    pub results_dropped: u64,
    /// Runs stopped because a person cancelled their task.
    pub tasks_cancelled: u64,
    /// Runs stopped because the database stayed out of reach for a read they needed; their
    /// tasks run again.
    pub runs_interrupted: u64,
    /// Agents this node runs now.
    pub agents_running: u64,
}

/// What the runtime counts as it goes.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) completed: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) interrupted: AtomicU64,
    pub(crate) webhooks_delivered: AtomicU64,
    pub(crate) webhook_attempts_failed: AtomicU64,
    pub(crate) webhooks_failed: AtomicU64,
    /// Per provider of the registry, in its order.
    pub(crate) models: Vec<(String, ProviderCalls)>,
    /// Per priced model, then `unpriced`: calls and micro-dollars.
    pub(crate) costs: Vec<(String, AtomicU64, AtomicU64)>,
    /// This node's clock against the database's.
    pub(crate) skew: Skew,
    /// Calls to triggers, by outcome.
    pub(crate) hooks: HookCounters,
}

impl Counters {
    /// Counters for the calls of each of `providers`, and the cost of each `priced` model.
    pub(crate) fn new<'a>(
        providers: impl Iterator<Item = &'a str>,
        priced: impl Iterator<Item = &'a str>,
    ) -> Self {
        let costs = priced
            .chain(std::iter::once(UNPRICED))
            .map(|model| (model.to_owned(), AtomicU64::default(), AtomicU64::default()))
            .collect();
        Self {
            costs,
            completed: AtomicU64::default(),
            failed: AtomicU64::default(),
            dropped: AtomicU64::default(),
            cancelled: AtomicU64::default(),
            interrupted: AtomicU64::default(),
            webhooks_delivered: AtomicU64::default(),
            webhook_attempts_failed: AtomicU64::default(),
            webhooks_failed: AtomicU64::default(),
            models: providers.map(|name| (name.to_owned(), ProviderCalls::default())).collect(),
            skew: Skew::default(),
            hooks: HookCounters::default(),
        }
    }

    /// One answered model call of `model` that cost `micros`.
    pub(crate) fn model_cost(&self, model: &str, unpriced: bool, micros: i64) {
        let model = if unpriced { UNPRICED } else { model };
        if let Some((_, calls, total)) = self.costs.iter().find(|(name, ..)| name == model) {
            calls.fetch_add(1, Ordering::Relaxed);
            total.fetch_add(u64::try_from(micros).unwrap_or(0), Ordering::Relaxed);
        }
    }

    pub(crate) fn model_costs(&self) -> Vec<ModelCost> {
        self.costs
            .iter()
            .map(|(model, calls, micros)| ModelCost {
                model: model.clone(),
                calls: calls.load(Ordering::Relaxed),
                micros: micros.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// One model call of `provider` that waited `waited` for the shared rate limit.
    pub(crate) fn model_rate_wait(&self, provider: &str, waited: Duration) {
        if let Some((_, calls)) = self.models.iter().find(|(name, _)| name == provider) {
            calls.rate_waits.fetch_add(1, Ordering::Relaxed);
            let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
            calls.rate_wait_micros.fetch_add(micros, Ordering::Relaxed);
        }
    }

    /// One model call of `provider` that took `elapsed` and failed with `error`, if it did.
    pub(crate) fn model_call(&self, provider: &str, elapsed: Duration, error: Option<&ModelError>) {
        let Some((_, calls)) = self.models.iter().find(|(name, _)| name == provider) else {
            return;
        };
        calls.latency.observe(elapsed);
        match error {
            Some(ModelError::Transient { .. }) => &calls.transient_errors,
            Some(ModelError::Permanent { .. }) => &calls.permanent_errors,
            None => return,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// A call that skipped a model of `provider` in cool-down.
    pub(crate) fn model_skipped(&self, provider: &str) {
        if let Some((_, calls)) = self.models.iter().find(|(name, _)| name == provider) {
            calls.cooldown_skips.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The cost metrics' label for models without a price.
const UNPRICED: &str = "unpriced";

/// The last measured difference (this node minus the database), in microseconds.
#[derive(Debug)]
pub(crate) struct Skew(AtomicI64);

const UNKNOWN: i64 = i64::MIN;

impl Default for Skew {
    fn default() -> Self {
        Self(AtomicI64::new(UNKNOWN))
    }
}

impl Skew {
    pub(crate) fn set_micros(&self, micros: i64) {
        self.0.store(micros, Ordering::Relaxed);
    }

    pub(crate) fn seconds(&self) -> Option<f64> {
        match self.0.load(Ordering::Relaxed) {
            UNKNOWN => None,
            micros => Some(micros as f64 / 1e6),
        }
    }
}
