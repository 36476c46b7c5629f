//! How far this node's clock is from the database's.
//!
//! Leases, due times and throttles are judged by the database's clock (see `store::sql`), so
//! a node whose clock is off does no harm to them; but its logs and the timestamps it shows
//! are off, and so is the expiry of the tokens it checks. The runtime measures the difference
//! at start and every few minutes, logs a warning beyond [`WARN_BEYOND`], and reports it as
//! `agentd_clock_skew_seconds`.

use std::time::{Duration, Instant};

use chrono::Utc;

use super::Core;

/// How often the runtime compares the clocks.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(300);
/// A difference beyond this is logged as a warning.
pub(crate) const WARN_BEYOND: Duration = Duration::from_secs(5);

impl Core {
    /// Reads the database's clock and records how far this node's is from it: positive when
    /// this node is ahead. Half the round trip is allowed for.
    pub async fn check_clock(&self) -> crate::Result<f64> {
        let asked = Utc::now();
        let started = Instant::now();
        let database = self.store().database_time().await?;
        let half_trip = chrono::Duration::from_std(started.elapsed() / 2).unwrap_or_default();
        let local = asked + half_trip;
        let skew = local - database;
        let micros = skew.num_microseconds().unwrap_or(i64::MAX);
        self.counters().skew.set_micros(micros);
        let seconds = micros as f64 / 1e6;
        if seconds.abs() > WARN_BEYOND.as_secs_f64() {
            tracing::warn!(
                node_time = %local.to_rfc3339(),
                database_time = %database.to_rfc3339(),
                skew_seconds = seconds,
                "this node's clock is {:.1} s {} the database's: leases and schedules follow the \
                 database's clock, but this node's logs, timestamps and token expiry checks are \
                 off; fix its time synchronisation",
                seconds.abs(),
                if seconds > 0.0 { "ahead of" } else { "behind" }
            );
        }
        Ok(seconds)
    }
}
