//! Outbound webhooks' deliveries: the fan-out that turns an owner's new events into
//! deliveries (its cursor moved in the same transaction, compare-and-set, and one delivery per
//! endpoint and event by a unique key, so two nodes never double one), the leased attempts and
//! their answers, and the failure run that disables an endpoint. Every due time and lease is
//! the database's clock.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::db::{SqlStore, query, query_as, query_scalar};
use super::shared::{housekeeping, watched};
use crate::domain::now;
use crate::domain::quota::Quota;
use crate::domain::webhook::{
    AttemptOutcome, Delivery, DeliveryAttempt, DeliveryId, DeliveryStatus, MAX_PENDING,
    WebhookEvents, WebhookId,
};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};

/// One event's message, to go to every enabled endpoint of its owner that asks for its type.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub event_seq: i64,
    pub event_type: crate::domain::event::EventType,
    pub message_id: String,
    pub body: String,
}

/// A delivery leased to this node for one attempt.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimedDelivery {
    pub id: String,
    pub owner_id: String,
    pub webhook_id: String,
    pub message_id: String,
    pub event_type: String,
    pub body: String,
    /// Attempts made before this one.
    pub attempts: i32,
}

/// Where an attempt goes and what signs it (sealed).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SendTarget {
    pub url: String,
    pub secret: String,
    /// The previous secret, while its overlap lasts.
    pub previous_secret: Option<String>,
}

/// What an attempt's outcome changes.
#[derive(Debug, Clone)]
pub struct AttemptWrite<'a> {
    pub outcome: &'a AttemptOutcome,
    /// The wait before the next attempt; `None` when the delivery is done (delivered, or the
    /// schedule is spent).
    pub retry_in: Option<Duration>,
    /// Failed attempts in a row that disable the endpoint (0: never).
    pub disable_after: i32,
    /// What `disabled_reason` says then.
    pub reason: &'a str,
}

/// What writing an attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The lease ran out first: another node may be trying it; nothing was written.
    LeaseLost,
    Written {
        /// This attempt's failure disabled the endpoint.
        disabled: bool,
    },
}

#[async_trait]
pub trait WebhookDeliveryStore: Send + Sync {
    /// Owners whose events went past their fan-out cursor, with the cursor (at most `limit`).
    async fn fanout_due(&self, limit: i64) -> Result<Vec<(WorkspaceId, i64)>>;
    /// Moves `owner`'s cursor from `from` to `upto` and inserts `messages`' deliveries, in one
    /// transaction; `false` (nothing written) when the cursor was not at `from` any more.
    async fn fan_out(
        &self,
        owner: &WorkspaceId,
        from: i64,
        upto: i64,
        messages: &[NewDelivery],
    ) -> Result<bool>;
    /// Queues a message (a test, a redelivery) to one endpoint, due now.
    async fn queue_delivery(
        &self,
        owner: &WorkspaceId,
        webhook: &WebhookId,
        message_id: &str,
        event_type: &str,
        body: &str,
    ) -> Result<DeliveryId>;
    /// A delivery's message id, event type and body; fails with `webhook_delivery_not_found`.
    async fn delivery_message(
        &self,
        owner: &WorkspaceId,
        webhook: &WebhookId,
        id: &DeliveryId,
    ) -> Result<(String, String, String)>;
    /// An endpoint's deliveries newest first, before `before` when given, with their attempts.
    async fn deliveries(
        &self,
        owner: &WorkspaceId,
        webhook: &WebhookId,
        before: Option<&DeliveryId>,
        limit: u32,
    ) -> Result<Vec<Delivery>>;
    /// Leases up to `limit` due deliveries of enabled endpoints to `node` for `lease`.
    async fn claim_deliveries(
        &self,
        node: &str,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<ClaimedDelivery>>;
    /// The endpoint's URL and secrets; `None` once it is deleted.
    async fn send_target(&self, webhook: &str) -> Result<Option<SendTarget>>;
    /// Writes an attempt's outcome while `node` still holds the delivery's lease.
    async fn record_attempt(
        &self,
        delivery: &ClaimedDelivery,
        node: &str,
        write: &AttemptWrite<'_>,
    ) -> Result<Recorded>;
}

#[derive(sqlx::FromRow)]
struct EndpointRow {
    id: String,
    events: String,
    after_seq: i64,
    pending: i64,
}

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: String,
    message_id: String,
    event_type: String,
    status: String,
    attempts: i32,
    next_attempt_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct AttemptRow {
    delivery_id: String,
    attempt: i32,
    at: DateTime<Utc>,
    status: Option<i32>,
    error: Option<String>,
    duration_ms: i64,
    response: Option<String>,
}

#[async_trait]
impl<S: SqlStore> WebhookDeliveryStore for S {
    async fn fanout_due(&self, limit: i64) -> Result<Vec<(WorkspaceId, i64)>> {
        let rows: Vec<(String, i64)> =
            query_as(sql::FANOUT_DUE).bind(limit).fetch_all(&mut self.read().await?).await?;
        Ok(rows.into_iter().map(|(owner, seq)| (WorkspaceId::from_trusted(owner), seq)).collect())
    }

    async fn fan_out(
        &self,
        owner: &WorkspaceId,
        from: i64,
        upto: i64,
        messages: &[NewDelivery],
    ) -> Result<bool> {
        housekeeping(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let moved = query(sql::MOVE_CURSOR)
                .bind(owner.as_str())
                .bind(from)
                .bind(upto)
                .execute(&mut tx)
                .await?;
            if moved.rows_affected() == 0 {
                return Ok(false);
            }
            let mut endpoints: Vec<EndpointRow> =
                query_as(sql::ENABLED_ENDPOINTS).bind(owner.as_str()).fetch_all(&mut tx).await?;
            let insert = sql::insert_delivery(self.dialect().clock().now);
            let created_at = now();
            for message in messages {
                let pattern = WebhookEvents::pattern(message.event_type);
                let pattern = pattern.trim_matches('%');
                for endpoint in &mut endpoints {
                    if endpoint.after_seq >= message.event_seq || !endpoint.events.contains(pattern)
                    {
                        continue;
                    }
                    let status = if endpoint.pending >= MAX_PENDING {
                        DeliveryStatus::Failed
                    } else {
                        endpoint.pending += 1;
                        DeliveryStatus::Pending
                    };
                    query(&insert)
                        .bind(DeliveryId::generate().as_str())
                        .bind(owner.as_str())
                        .bind(endpoint.id.as_str())
                        .bind(message.message_id.as_str())
                        .bind(message.event_seq)
                        .bind(message.event_type.as_str())
                        .bind(message.body.as_str())
                        .bind(status.as_str())
                        .bind(created_at)
                        .execute(&mut tx)
                        .await?;
                }
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn queue_delivery(
        &self,
        owner: &WorkspaceId,
        webhook: &WebhookId,
        message_id: &str,
        event_type: &str,
        body: &str,
    ) -> Result<DeliveryId> {
        let id = DeliveryId::generate();
        watched(self.storage_health(), async {
            let done = query(&sql::queue_delivery(self.dialect().clock().now))
                .bind(id.as_str())
                .bind(owner.as_str())
                .bind(webhook.as_str())
                .bind(message_id)
                .bind(event_type)
                .bind(body)
                .bind(now())
                .bind(MAX_PENDING)
                .execute(self.writer())
                .await?;
            if done.rows_affected() == 0 {
                let found: i64 = query_scalar(sql::WEBHOOK_EXISTS)
                    .bind(owner.as_str())
                    .bind(webhook.as_str())
                    .fetch_one(self.writer())
                    .await?;
                if found == 0 {
                    return Err(Error::not_found(Resource::Webhook, webhook.as_str()));
                }
                let limit = MAX_PENDING.unsigned_abs();
                return Err(Error::QuotaExceeded { quota: Quota::PendingDeliveries, limit });
            }
            Ok(())
        })
        .await?;
        Ok(id)
    }

    async fn delivery_message(
        &self,
        owner: &WorkspaceId,
        webhook: &WebhookId,
        id: &DeliveryId,
    ) -> Result<(String, String, String)> {
        let row: Option<(String, String, String)> = query_as(sql::MESSAGE)
            .bind(owner.as_str())
            .bind(webhook.as_str())
            .bind(id.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        row.ok_or_else(|| Error::not_found(Resource::WebhookDelivery, id.as_str()))
    }

    async fn deliveries(
        &self,
        owner: &WorkspaceId,
        webhook: &WebhookId,
        before: Option<&DeliveryId>,
        limit: u32,
    ) -> Result<Vec<Delivery>> {
        let mut conn = self.read().await?;
        let rows: Vec<DeliveryRow> = query_as(sql::DELIVERIES)
            .bind(owner.as_str())
            .bind(webhook.as_str())
            .bind(before.map(DeliveryId::as_str))
            .bind(i64::from(limit))
            .fetch_all(&mut conn)
            .await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let statement = sql::attempts_of(rows.len());
        let mut select = query_as::<AttemptRow>(&statement);
        for row in &rows {
            select = select.bind(row.id.as_str());
        }
        let mut attempts: HashMap<String, Vec<DeliveryAttempt>> = HashMap::new();
        for a in select.fetch_all(&mut conn).await? {
            attempts.entry(a.delivery_id).or_default().push(DeliveryAttempt {
                attempt: a.attempt,
                at: a.at,
                status: a.status.and_then(|s| u16::try_from(s).ok()),
                error: a.error,
                duration_ms: a.duration_ms,
                response: a.response,
            });
        }
        rows.into_iter()
            .map(|row| {
                let status = DeliveryStatus::parse(&row.status)
                    .ok_or_else(|| Error::internal(format!("delivery status {}", row.status)))?;
                Ok(Delivery {
                    responses: attempts.remove(&row.id).unwrap_or_default(),
                    id: DeliveryId::parse(&row.id).map_err(Error::internal)?,
                    webhook_id: row.message_id,
                    event_type: row.event_type,
                    status,
                    attempts: row.attempts,
                    next_attempt_at: row.next_attempt_at,
                    created_at: row.created_at,
                })
            })
            .collect()
    }

    async fn claim_deliveries(
        &self,
        node: &str,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<ClaimedDelivery>> {
        housekeeping(self.storage_health(), async {
            let statement = sql::claim(self.dialect().clock(), self.dialect().skip_locked());
            Ok(query_as(&statement)
                .bind(node)
                .bind(lease.as_secs_f64())
                .bind(limit)
                .fetch_all(self.writer())
                .await?)
        })
        .await
    }

    async fn send_target(&self, webhook: &str) -> Result<Option<SendTarget>> {
        let statement = sql::send_target(self.dialect().clock().now);
        Ok(query_as(&statement).bind(webhook).fetch_optional(&mut self.read().await?).await?)
    }

    async fn record_attempt(
        &self,
        delivery: &ClaimedDelivery,
        node: &str,
        write: &AttemptWrite<'_>,
    ) -> Result<Recorded> {
        let outcome = write.outcome;
        let delivered = outcome.delivered();
        let status = match (delivered, write.retry_in) {
            (true, _) => DeliveryStatus::Delivered,
            (false, Some(_)) => DeliveryStatus::Pending,
            (false, None) => DeliveryStatus::Failed,
        };
        let at = now();
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let attempt: Option<i32> = query_scalar(&sql::finish_attempt(self.dialect().clock()))
                .bind(delivery.id.as_str())
                .bind(node)
                .bind(status.as_str())
                .bind(write.retry_in.unwrap_or_default().as_secs_f64())
                .fetch_optional(&mut tx)
                .await?;
            let Some(attempt) = attempt else { return Ok(Recorded::LeaseLost) };
            query(sql::INSERT_ATTEMPT)
                .bind(delivery.id.as_str())
                .bind(attempt)
                .bind(at)
                .bind(outcome.status.map(i32::from))
                .bind(outcome.error.as_deref())
                .bind(outcome.duration_ms)
                .bind(outcome.response.as_deref())
                .execute(&mut tx)
                .await?;
            let run: Option<(i32, bool)> = query_as(sql::FAILURE_RUN)
                .bind(delivery.webhook_id.as_str())
                .bind(delivered)
                .fetch_optional(&mut tx)
                .await?;
            let mut disabled = false;
            if let Some((run, true)) = run
                && write.disable_after > 0
                && run >= write.disable_after
            {
                query(sql::DISABLE)
                    .bind(delivery.webhook_id.as_str())
                    .bind(write.reason)
                    .bind(at)
                    .execute(&mut tx)
                    .await?;
                disabled = true;
            }
            tx.commit().await?;
            Ok(Recorded::Written { disabled })
        })
        .await
    }
}

/// The statements of this area, the same on both backends.
mod sql {
    use crate::store::sql::Clock;

    /// Owners with events past their cursor.
    pub(super) const FANOUT_DUE: &str = "SELECT c.owner_id, c.seq FROM webhook_cursors c \
        JOIN event_seqs s ON s.owner_id = c.owner_id WHERE s.seq > c.seq \
        ORDER BY s.seq - c.seq DESC, c.owner_id LIMIT $1";
    pub(super) const MOVE_CURSOR: &str =
        "UPDATE webhook_cursors SET seq = $3 WHERE owner_id = $1 AND seq = $2";
    /// The owner's enabled endpoints, each with its deliveries waiting.
    pub(super) const ENABLED_ENDPOINTS: &str = "SELECT w.id, w.events, w.after_seq, \
        (SELECT COUNT(*) FROM webhook_deliveries d WHERE d.webhook_id = w.id \
        AND d.status = 'pending') AS pending FROM webhooks w WHERE w.owner_id = $1 AND w.enabled";

    /// One event's delivery to one endpoint (`$8` its status: `failed` past the pending
    /// bound); a second for the same endpoint and event is no error and changes nothing.
    pub(super) fn insert_delivery(now: &str) -> String {
        format!(
            "INSERT INTO webhook_deliveries (id, owner_id, webhook_id, message_id, event_seq, \
             event_type, body, status, attempts, next_attempt_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, \
             CASE WHEN $8 = 'pending' THEN {now} END, $9) ON CONFLICT DO NOTHING"
        )
    }

    /// A message to one endpoint of the owner, due now; nothing when there is no such endpoint
    /// or it has `$8` deliveries pending already.
    pub(super) fn queue_delivery(now: &str) -> String {
        format!(
            "INSERT INTO webhook_deliveries (id, owner_id, webhook_id, message_id, event_type, \
             body, status, attempts, next_attempt_at, created_at) \
             SELECT $1, owner_id, id, $4, $5, $6, 'pending', 0, {now}, $7 FROM webhooks w \
             WHERE owner_id = $2 AND id = $3 AND (SELECT COUNT(*) FROM webhook_deliveries d \
             WHERE d.webhook_id = w.id AND d.status = 'pending') < $8"
        )
    }

    pub(super) const WEBHOOK_EXISTS: &str =
        "SELECT COUNT(*) FROM webhooks WHERE owner_id = $1 AND id = $2";

    pub(super) const MESSAGE: &str = "SELECT message_id, event_type, body FROM webhook_deliveries \
        WHERE owner_id = $1 AND webhook_id = $2 AND id = $3";
    pub(super) const DELIVERIES: &str = "SELECT id, message_id, event_type, status, attempts, \
        next_attempt_at, created_at FROM webhook_deliveries \
        WHERE owner_id = $1 AND webhook_id = $2 AND ($3 IS NULL OR id < $3) \
        ORDER BY id DESC LIMIT $4";

    /// The attempts of `count` deliveries (`$1`...), the latest first.
    pub(super) fn attempts_of(count: usize) -> String {
        let list: Vec<String> = (1..=count).map(|n| format!("${n}")).collect();
        format!(
            "SELECT delivery_id, attempt, at, status, error, duration_ms, response \
             FROM webhook_attempts WHERE delivery_id IN ({}) ORDER BY delivery_id, attempt DESC",
            list.join(", ")
        )
    }

    /// Leases (`$1` node, `$2` seconds) up to `$3` due deliveries of enabled endpoints, the
    /// longest due first, one attempt per endpoint at a time: the first due of an endpoint
    /// with none in flight. A slow or dead receiver holds one of a node's slots, not all.
    pub(super) fn claim(clock: Clock, skip_locked: &str) -> String {
        let (now, until) = (clock.now, (clock.plus)("$2"));
        format!(
            "UPDATE webhook_deliveries SET lease_owner = $1, lease_until = {until} \
             WHERE id IN (SELECT d.id FROM webhook_deliveries d WHERE d.status = 'pending' \
             AND d.next_attempt_at <= {now} AND (d.lease_until IS NULL OR d.lease_until < {now}) \
             AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.enabled) \
             AND NOT EXISTS (SELECT 1 FROM webhook_deliveries o WHERE o.webhook_id = d.webhook_id \
             AND o.status = 'pending' AND o.lease_until >= {now}) \
             AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id \
             AND e.status = 'pending' AND e.next_attempt_at <= {now} \
             AND (e.lease_until IS NULL OR e.lease_until < {now}) \
             AND (e.next_attempt_at < d.next_attempt_at \
             OR (e.next_attempt_at = d.next_attempt_at AND e.id < d.id))) \
             ORDER BY d.next_attempt_at LIMIT $3{skip_locked}) \
             RETURNING id, owner_id, webhook_id, message_id, event_type, body, attempts"
        )
    }

    pub(super) fn send_target(now: &str) -> String {
        format!(
            "SELECT url, secret, CASE WHEN previous_until > {now} THEN previous_secret END \
             AS previous_secret FROM webhooks WHERE id = $1"
        )
    }

    /// Counts the attempt and sets the status (`$3`), the next attempt `$4` seconds from now
    /// while pending, and lets go of the lease, if `$2` holds it; its number comes back.
    pub(super) fn finish_attempt(clock: Clock) -> String {
        format!(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, status = $3, \
             next_attempt_at = CASE WHEN $3 = 'pending' THEN {} END, \
             lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2 \
             RETURNING attempts",
            (clock.plus)("$4")
        )
    }

    pub(super) const INSERT_ATTEMPT: &str = "INSERT INTO webhook_attempts (delivery_id, attempt, \
        at, status, error, duration_ms, response) VALUES ($1, $2, $3, $4, $5, $6, $7)";
    /// A success (`$2`) ends the run of failures; a failure adds to it.
    pub(super) const FAILURE_RUN: &str = "UPDATE webhooks SET failure_run = \
        CASE WHEN $2 THEN 0 ELSE failure_run + 1 END WHERE id = $1 RETURNING failure_run, enabled";
    pub(super) const DISABLE: &str = "UPDATE webhooks SET enabled = FALSE, disabled_reason = $2, \
        updated_at = $3 WHERE id = $1";
}
