//! Model health shared by every node (migration 21): a row per model that failed lately, its
//! cool-down and its probe's lease, all timed by the database's clock. The rules (when a
//! cool-down starts, how long it lasts) are the domain's (`domain::fallback`); this area only
//! reads and writes them. Nothing is written for a healthy model's success.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::fallback::{HealthPolicy, HealthRecord};
use crate::error::Result;
use crate::store::db::{SqlStore, query, query_as, query_scalar};
use crate::store::shared::watched;

#[async_trait]
pub trait ModelHealthStore: Send + Sync {
    /// Every model with a health record, by name, and the database's clock.
    async fn model_health(&self) -> Result<(Vec<(String, HealthRecord)>, DateTime<Utc>)>;
    /// Counts a failed call of `model` (after its retries) under `policy`; the record after it.
    async fn model_failed(&self, model: &str, policy: &HealthPolicy) -> Result<HealthRecord>;
    /// A call of `model` succeeded: its record goes.
    async fn model_recovered(&self, model: &str) -> Result<()>;
    /// Takes the lease of the one probe of `model` whose cool-down is over, for `seconds`;
    /// `false` when it is still cooling down or another caller holds an unexpired lease.
    async fn take_probe(&self, model: &str, seconds: f64) -> Result<bool>;
}

#[derive(sqlx::FromRow)]
struct HealthRow {
    model: String,
    failures: i32,
    cooldowns: i32,
    cooldown_until: Option<DateTime<Utc>>,
    probe_until: Option<DateTime<Utc>>,
}

impl HealthRow {
    fn into_record(self) -> (String, HealthRecord) {
        let record = HealthRecord {
            failures: self.failures,
            cooldowns: self.cooldowns,
            cooldown_until: self.cooldown_until,
            probe_until: self.probe_until,
        };
        (self.model, record)
    }
}

#[async_trait]
impl<S: SqlStore> ModelHealthStore for S {
    async fn model_health(&self) -> Result<(Vec<(String, HealthRecord)>, DateTime<Utc>)> {
        let mut conn = self.read().await?;
        let rows: Vec<HealthRow> = query_as(sql::SELECT_ALL).fetch_all(&mut conn).await?;
        let now: DateTime<Utc> = query_scalar(&format!("SELECT {}", self.dialect().clock().now))
            .fetch_one(&mut conn)
            .await?;
        Ok((rows.into_iter().map(HealthRow::into_record).collect(), now))
    }

    async fn model_failed(&self, model: &str, policy: &HealthPolicy) -> Result<HealthRecord> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let clock = tx.dialect().clock();
            let started: DateTime<Utc> =
                query_scalar(&format!("SELECT {}", clock.now)).fetch_one(&mut tx).await?;
            // The row exists before it is locked: two nodes' first failures cannot both insert.
            query(sql::ENSURE).bind(model).bind(started).execute(&mut tx).await?;
            let current: HealthRow = query_as(&sql::select_one(tx.dialect().lock()))
                .bind(model)
                .fetch_one(&mut tx)
                .await?;
            // The clock read after the lock: a wait for it does not date the cool-down back.
            let now: DateTime<Utc> = query_scalar(&format!("SELECT {}", tx.dialect().wall_clock()))
                .fetch_one(&mut tx)
                .await?;
            let (_, current) = current.into_record();
            let next = HealthRecord::after_failure(Some(&current), policy, now);
            query(sql::UPDATE)
                .bind(model)
                .bind(next.failures)
                .bind(next.cooldowns)
                .bind(next.cooldown_until)
                .bind(next.probe_until)
                .bind(now)
                .execute(&mut tx)
                .await?;
            tx.commit().await?;
            Ok(next)
        })
        .await
    }

    async fn model_recovered(&self, model: &str) -> Result<()> {
        watched(self.storage_health(), async {
            query(sql::DELETE).bind(model).execute(self.writer()).await?;
            Ok(())
        })
        .await
    }

    async fn take_probe(&self, model: &str, seconds: f64) -> Result<bool> {
        watched(self.storage_health(), async {
            let taken = query(&sql::take_probe(self.dialect().clock()))
                .bind(model)
                .bind(seconds)
                .execute(self.writer())
                .await?;
            Ok(taken.rows_affected() == 1)
        })
        .await
    }
}

/// The statements of this area, the same on both backends but for the clock.
mod sql {
    use crate::store::sql::Clock;

    pub(super) const SELECT_ALL: &str = "SELECT model, failures, cooldowns, cooldown_until, \
        probe_until FROM model_health ORDER BY model";
    pub(super) fn select_one(lock: &str) -> String {
        format!(
            "SELECT model, failures, cooldowns, cooldown_until, probe_until FROM model_health \
             WHERE model = $1{lock}"
        )
    }
    pub(super) const ENSURE: &str = "INSERT INTO model_health (model, updated_at) \
        VALUES ($1, $2) ON CONFLICT (model) DO NOTHING";
    pub(super) const UPDATE: &str = "UPDATE model_health SET failures = $2, cooldowns = $3, \
        cooldown_until = $4, probe_until = $5, updated_at = $6 WHERE model = $1";
    pub(super) const DELETE: &str = "DELETE FROM model_health WHERE model = $1";
    /// Compare-and-set: only a caller that finds the cool-down over and no live probe lease
    /// changes the row, so one probe runs at a time across nodes.
    pub(super) fn take_probe(clock: Clock) -> String {
        format!(
            "UPDATE model_health SET probe_until = {} \
             WHERE model = $1 AND cooldown_until IS NOT NULL AND cooldown_until <= {now} \
             AND (probe_until IS NULL OR probe_until <= {now})",
            (clock.plus)("$2"),
            now = clock.now
        )
    }
}
