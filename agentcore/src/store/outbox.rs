//! The outbox: posts to Discord channels, delivered in order per lane (owner and channel) by
//! whichever node holds the lease of the lane's head post. Every time here is the database's.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::db::{SqlStore, query, query_as};
use super::rows::{OutboxLaneRow, OutboxRow, post_body};
use super::shared::{housekeeping, insert_activity, lock_agent, watched};
use crate::domain::activity::NewActivity;
use crate::domain::chat::{OutboxLane, OutboxPost};
use crate::domain::message::MessageBody;
use crate::domain::workspace::WorkspaceId;
use crate::error::Result;

/// The durable queue of posts to Discord.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Lanes with posts waiting.
    async fn outbox_lanes(&self) -> Result<Vec<OutboxLane>>;
    /// Leases the oldest post of `lane` to `node` for `lease`, if it is due and not leased.
    /// Every time in this part of the trait is the database's: nodes whose own clocks
    /// disagree still agree on who holds what and what is due.
    async fn claim_post(
        &self,
        lane: &OutboxLane,
        node: &str,
        lease: Duration,
    ) -> Result<Option<OutboxPost>>;
    /// How long until the oldest post of `lane` may be taken (zero: now); `None` when there
    /// is none.
    async fn next_post_due(&self, lane: &OutboxLane) -> Result<Option<Duration>>;
    /// Extends `node`'s lease on a post it is still sending to `lease` from now; `false` when
    /// it no longer holds it.
    async fn renew_post_lease(&self, id: i64, node: &str, lease: Duration) -> Result<bool>;
    /// Records Discord's id for a delivered post; what the store found: the post, or the
    /// post rewritten since it was queued (its message to edit), or `node` no longer held it.
    async fn finish_post(&self, id: i64, node: &str, message_id: &str) -> Result<Finished>;
    /// Releases a post for another attempt after `delay`.
    async fn retry_post(&self, id: i64, node: &str, delay: Duration, error: &str) -> Result<()>;
    /// Drops a post that can never be delivered, logging `activity` for its agent.
    async fn drop_post(&self, post: &OutboxPost, node: &str, activity: &NewActivity) -> Result<()>;
}

/// What recording a delivery found.
#[derive(Debug, Clone, PartialEq)]
pub enum Finished {
    /// Recorded.
    Delivered,
    /// Recorded, and the post was rewritten since it was queued (an approval decided before
    /// its request was recorded as delivered): Discord may show the first body (a send cut
    /// off, or lost with its lease, was sent again with the same nonce, and Discord answers
    /// with the message it made first), so the message is to be edited to this.
    Rewritten(MessageBody),
    /// The node no longer held the post: whoever takes it next sends it with the same nonce.
    NotHeld,
}

#[async_trait::async_trait]
impl<S: SqlStore> OutboxStore for S {
    async fn outbox_lanes(&self) -> Result<Vec<OutboxLane>> {
        let rows: Vec<OutboxLaneRow> =
            query_as(self.dialect().outbox_lanes()).fetch_all(&mut self.read().await?).await?;
        Ok(rows.into_iter().map(OutboxLane::from).collect())
    }

    async fn claim_post(
        &self,
        lane: &OutboxLane,
        node: &str,
        lease: Duration,
    ) -> Result<Option<OutboxPost>> {
        housekeeping(self.storage_health(), async {
            let row: Option<OutboxRow> = query_as(&sql::claim_post(self.dialect().clock()))
                .bind(&lane.owner_id)
                .bind(&lane.channel_id)
                .bind(node)
                .bind(lease.as_secs_f64())
                .fetch_optional(self.writer())
                .await?;
            row.map(OutboxPost::try_from).transpose()
        })
        .await
    }

    async fn next_post_due(&self, lane: &OutboxLane) -> Result<Option<Duration>> {
        let head: Option<(DateTime<Utc>, Option<DateTime<Utc>>, DateTime<Utc>)> =
            query_as(&sql::select_head_due(self.dialect().clock()))
                .bind(&lane.owner_id)
                .bind(&lane.channel_id)
                .fetch_optional(&mut self.read().await?)
                .await?;
        Ok(head.map(|(due, lease, now)| {
            let due = lease.map_or(due, |lease| due.max(lease));
            (due - now).to_std().unwrap_or(Duration::ZERO)
        }))
    }

    async fn renew_post_lease(&self, id: i64, node: &str, lease: Duration) -> Result<bool> {
        housekeeping(self.storage_health(), async {
            let renewed = query(&sql::renew_post_lease(self.dialect().clock()))
                .bind(id)
                .bind(node)
                .bind(lease.as_secs_f64())
                .execute(self.writer())
                .await?;
            Ok(renewed.rows_affected() > 0)
        })
        .await
    }

    async fn finish_post(&self, id: i64, node: &str, message_id: &str) -> Result<Finished> {
        watched(self.storage_health(), async {
            let stored: Option<(bool, Option<String>)> = query_as(sql::MARK_DELIVERED)
                .bind(id)
                .bind(node)
                .bind(message_id)
                .bind(crate::domain::now())
                .fetch_optional(self.writer())
                .await?;
            match stored {
                None => Ok(Finished::NotHeld),
                Some((true, Some(payload))) => Ok(Finished::Rewritten(post_body(&payload)?)),
                Some(_) => Ok(Finished::Delivered),
            }
        })
        .await
    }

    async fn retry_post(&self, id: i64, node: &str, delay: Duration, error: &str) -> Result<()> {
        watched(self.storage_health(), async {
            query(&sql::reschedule_post(self.dialect().clock()))
                .bind(id)
                .bind(node)
                .bind(delay.as_secs_f64())
                .bind(error)
                .execute(self.writer())
                .await?;
            Ok(())
        })
        .await
    }

    async fn drop_post(&self, post: &OutboxPost, node: &str, activity: &NewActivity) -> Result<()> {
        watched(self.storage_health(), async {
            let owner = WorkspaceId::from_trusted(post.owner_id.clone());
            let mut tx = self.begin_write().await?;
            // Agent first, as every writer does; a deleted agent took its posts with it.
            if lock_agent(&mut tx, &owner, &post.agent_id).await.is_err() {
                return Ok(());
            }
            let removed = query(sql::DELETE_POST).bind(post.id).bind(node).execute(&mut tx).await?;
            if removed.rows_affected() > 0 {
                insert_activity(&mut tx, &owner, &post.agent_id, activity, crate::domain::now())
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    use crate::store::sql::Clock;

    /// Takes the oldest undelivered post of a lane if it is due and nobody holds it: order per
    /// lane is kept because only the head is ever taken.
    /// Leases (`$4` seconds) the head post of a lane if it is due and nobody holds it.
    pub(crate) fn claim_post(clock: Clock) -> String {
        let (now, until) = (clock.now, (clock.plus)("$4"));
        format!(
            "UPDATE outbox SET lease_owner = $3, lease_until = {until} \
             WHERE id = (SELECT id FROM outbox WHERE owner_id = $1 AND channel_id = $2 \
             AND delivered_at IS NULL ORDER BY id LIMIT 1) \
             AND delivered_at IS NULL AND next_attempt_at <= {now} \
             AND (lease_until IS NULL OR lease_until < {now}) \
             RETURNING id, owner_id, agent_id, guild_id, channel_id, nonce, payload, attempts"
        )
    }
    /// When the head post of a lane may be taken, with the database's time now.
    pub(crate) fn select_head_due(clock: Clock) -> String {
        format!(
            "SELECT next_attempt_at, lease_until, {} AS now FROM outbox \
             WHERE owner_id = $1 AND channel_id = $2 AND delivered_at IS NULL ORDER BY id LIMIT 1",
            clock.now
        )
    }
    pub(crate) const DELETE_POST: &str = "DELETE FROM outbox WHERE id = $1 AND lease_owner = $2";
    /// Records a delivery; answers whether a decided approval rewrote the post since it was
    /// queued and, only then, its payload as it is now (the row's lock orders the two).
    pub(crate) const MARK_DELIVERED: &str = "UPDATE outbox SET message_id = $3, delivered_at = $4, \
        lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2 \
        RETURNING rewritten, CASE WHEN rewritten THEN payload END";
    /// Extends the lease of a post this node is still sending, to `$3` seconds from now.
    pub(crate) fn renew_post_lease(clock: Clock) -> String {
        format!(
            "UPDATE outbox SET lease_until = {} \
             WHERE id = $1 AND lease_owner = $2 AND delivered_at IS NULL",
            (clock.plus)("$3")
        )
    }
    /// Releases a post for another attempt `$3` seconds from now.
    pub(crate) fn reschedule_post(clock: Clock) -> String {
        format!(
            "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = {}, last_error = $4, \
             lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2",
            (clock.plus)("$3")
        )
    }
}
