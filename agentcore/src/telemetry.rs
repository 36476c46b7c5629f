//! What the node has done, for metrics: plain atomics the hot paths bump, and a snapshot the
//! server renders (in Prometheus' text format, in `agentd`). Nothing here knows about any
//! metrics system.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::runtime::RuntimeStats;

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

/// The model providers calls are counted by.
pub const PROVIDERS: [&str; 3] = ["echo", "openai", "anthropic"];

/// Model calls of one provider.
#[derive(Debug, Default)]
pub(crate) struct ProviderCalls {
    pub latency: Histogram,
    pub transient_errors: AtomicU64,
    pub permanent_errors: AtomicU64,
}

/// Everything the node counted, plus what waits in the database.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Tasks finished and agents held by this node.
    pub runtime: RuntimeStats,
    pub model_calls: Vec<ModelCallMetrics>,
    /// 429 answers from Discord, of any scope.
    pub discord_rate_limited: u64,
    /// Across every node: tasks queued, tasks in progress, posts not yet delivered.
    pub queued_tasks: i64,
    pub tasks_in_progress: i64,
    pub outbox_pending: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelCallMetrics {
    pub provider: &'static str,
    /// Every call, answered or failed.
    pub latency: HistogramSnapshot,
    pub transient_errors: u64,
    pub permanent_errors: u64,
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
