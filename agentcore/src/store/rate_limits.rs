//! Shared rate limits (see `domain::ratelimit`): the slots of each limited scope's window,
//! the agents waiting for one, and the provider's own "no call before", all by the database's
//! clock. A caller's look is one transaction under the scope rows' locks (taken in name order),
//! so callers on every node see one count and one queue.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::ratelimit::{
    Decision, RateLimit, Standing, TICKET_GRACE, Waiting, Why, decide, rank,
};
use crate::error::Result;
use crate::store::db::{SqlStore, Tx, query, query_as, query_scalar};
use crate::store::shared::{chrono_duration, housekeeping};

/// A caller asking for a slot in each of `scopes`: one request and `tokens` (its estimate).
#[derive(Debug, Clone, Copy)]
pub struct SlotAsk<'a> {
    pub owner: &'a str,
    pub agent: &'a str,
    /// Each scope with its limit, as `RateLimits::for_call` gives them.
    pub scopes: &'a [(String, RateLimit)],
    pub tokens: i64,
    pub window: Duration,
}

/// What a look at the scopes came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// Sent: the grants' ids, to correct their tokens once the answer says how many.
    Granted(Vec<String>),
    /// Look again after `wait`; the caller keeps its place in the queue until then.
    Wait { wait: Duration, scope: String, why: Why },
}

#[async_trait]
pub trait RateLimitStore: Send + Sync {
    /// Takes a slot in every scope of `ask`, or none and says how long to wait.
    async fn take_slot(&self, ask: SlotAsk<'_>) -> Result<Slot>;
    /// Sets the tokens of the grants to what the answer reported.
    async fn correct_slot(&self, grants: &[String], tokens: i64) -> Result<()>;
    /// The provider said no call of `scopes` should go for `wait`: every caller waits that
    /// long from now (the database's now); a longer block already set stays.
    async fn block_scopes(&self, scopes: &[String], wait: Duration) -> Result<()>;
}

/// A slot is free again this long after a window has passed since its grant: a margin (a
/// fiftieth of the window) for the time between a grant and the call reaching the provider.
fn slot_life(window: Duration) -> chrono::Duration {
    chrono_duration(window + window / 50)
}

#[async_trait]
impl<S: SqlStore> RateLimitStore for S {
    async fn take_slot(&self, ask: SlotAsk<'_>) -> Result<Slot> {
        housekeeping(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let mut scopes: Vec<&(String, RateLimit)> = ask.scopes.iter().collect();
            scopes.sort_by(|a, b| a.0.cmp(&b.0));
            let mut blocks = Vec::with_capacity(scopes.len());
            for (scope, _) in &scopes {
                blocks.push(lock_scope(&mut tx, scope).await?);
            }
            let now: DateTime<Utc> = query_scalar(&format!("SELECT {}", tx.dialect().wall_clock()))
                .fetch_one(&mut tx)
                .await?;
            let life = slot_life(ask.window);
            let mut wait: Option<(DateTime<Utc>, String, Why)> = None;
            for ((scope, limit), blocked_until) in scopes.iter().zip(blocks) {
                let standing = look(&mut tx, &ask, scope, now, life, blocked_until).await?;
                if let Decision::Wait(why) = decide(limit, &standing, ask.tokens) {
                    let until = free_at(&mut tx, scope, why, now, life).await?;
                    if wait.as_ref().is_none_or(|(later, ..)| until > *later) {
                        wait = Some((until, scope.clone(), why));
                    }
                }
            }
            let slot = match wait {
                Some((until, scope, why)) => {
                    let back_by = until + chrono_duration(TICKET_GRACE);
                    for (scope, _) in &scopes {
                        query(sql::KEEP_TICKET)
                            .bind(scope.as_str())
                            .bind(ask.owner)
                            .bind(ask.agent)
                            .bind(back_by)
                            .execute(&mut tx)
                            .await?;
                    }
                    let wait = (until - now).to_std().unwrap_or_default();
                    Slot::Wait { wait, scope, why }
                }
                None => {
                    let mut grants = Vec::with_capacity(scopes.len());
                    for (scope, _) in &scopes {
                        let id = uuid::Uuid::now_v7().to_string();
                        query(sql::GRANT)
                            .bind(id.as_str())
                            .bind(scope.as_str())
                            .bind(ask.owner)
                            .bind(ask.agent)
                            .bind(ask.tokens)
                            .bind(now)
                            .execute(&mut tx)
                            .await?;
                        query(sql::SERVED)
                            .bind(scope.as_str())
                            .bind(ask.owner)
                            .bind(ask.agent)
                            .bind(now)
                            .execute(&mut tx)
                            .await?;
                        grants.push(id);
                    }
                    Slot::Granted(grants)
                }
            };
            tx.commit().await?;
            Ok(slot)
        })
        .await
    }

    async fn correct_slot(&self, grants: &[String], tokens: i64) -> Result<()> {
        housekeeping(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            for id in grants {
                query(sql::CORRECT).bind(id.as_str()).bind(tokens).execute(&mut tx).await?;
            }
            tx.commit().await
        })
        .await
    }

    async fn block_scopes(&self, scopes: &[String], wait: Duration) -> Result<()> {
        housekeeping(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let mut scopes: Vec<&String> = scopes.iter().collect();
            scopes.sort();
            for scope in scopes {
                lock_scope(&mut tx, scope).await?;
                let now: DateTime<Utc> =
                    query_scalar(&format!("SELECT {}", tx.dialect().wall_clock()))
                        .fetch_one(&mut tx)
                        .await?;
                query(sql::BLOCK)
                    .bind(scope.as_str())
                    .bind(now + chrono_duration(wait))
                    .execute(&mut tx)
                    .await?;
            }
            tx.commit().await
        })
        .await
    }
}

/// Locks the scope's row (made on its first use); its provider block.
async fn lock_scope(tx: &mut Tx, scope: &str) -> Result<Option<DateTime<Utc>>> {
    query(sql::INSERT_SCOPE).bind(scope).execute(&mut *tx).await?;
    let lock = tx.dialect().lock();
    let blocked: Option<DateTime<Utc>> =
        query_scalar(&sql::lock_scope(lock)).bind(scope).fetch_one(&mut *tx).await?;
    Ok(blocked)
}

/// The scope's window as the caller sees it: grants older than a window and rows of agents
/// neither waiting nor served within two dropped, the caller queued (if it was not), and its
/// place in the queue.
async fn look(
    tx: &mut Tx,
    ask: &SlotAsk<'_>,
    scope: &str,
    now: DateTime<Utc>,
    life: chrono::Duration,
    blocked_until: Option<DateTime<Utc>>,
) -> Result<Standing> {
    // When an agent was last served is kept two windows: past its grant's own window (else the
    // agents served first would be even again with those never served as soon as their grants
    // leave the window), and no longer (a service older than that counts as none, as for an
    // agent whose row is pruned: an agent back from a pause does not go before one that has
    // waited since longer; ticket age decides between them).
    let remembered = now - life - life;
    query(sql::PRUNE_GRANTS).bind(scope).bind(now - life).execute(&mut *tx).await?;
    query(sql::PRUNE_TICKETS).bind(scope).bind(remembered).execute(&mut *tx).await?;
    query(sql::QUEUE_TICKET)
        .bind(scope)
        .bind(ask.owner)
        .bind(ask.agent)
        .bind(now)
        .bind(now + chrono_duration(TICKET_GRACE))
        .bind(now - life)
        .execute(&mut *tx)
        .await?;
    let (requests, tokens): (i64, i64) =
        query_as(sql::WINDOW).bind(scope).fetch_one(&mut *tx).await?;
    type Row = (String, String, DateTime<Utc>, Option<DateTime<Utc>>);
    let queue: Vec<Row> = query_as(sql::QUEUE).bind(scope).bind(now).fetch_all(&mut *tx).await?;
    let queue: Vec<Waiting> = queue
        .into_iter()
        .map(|(owner, agent, since, served)| {
            let served = served.filter(|at| *at >= remembered);
            Waiting { owner, agent, since, served }
        })
        .collect();
    let me = queue.iter().find(|w| w.owner == ask.owner && w.agent == ask.agent);
    let rank = me.map_or(0, |me| rank(&queue, me));
    Ok(Standing { now, blocked_until, requests, tokens, rank })
}

/// When the slot the caller waits for is free.
async fn free_at(
    tx: &mut Tx,
    scope: &str,
    why: Why,
    now: DateTime<Utc>,
    life: chrono::Duration,
) -> Result<DateTime<Utc>> {
    let index = match why {
        Why::Provider(until) => return Ok(until),
        Why::Requests { grant } => grant,
        Why::Tokens => 0,
    };
    let granted: Option<DateTime<Utc>> = query_scalar(sql::NTH_GRANT)
        .bind(scope)
        .bind(i64::try_from(index).unwrap_or(0))
        .fetch_optional(&mut *tx)
        .await?;
    Ok(granted.map_or(now + life, |at| at + life).max(now))
}

mod sql {
    pub(super) const INSERT_SCOPE: &str =
        "INSERT INTO rate_scopes (scope) VALUES ($1) ON CONFLICT (scope) DO NOTHING";

    pub(super) fn lock_scope(lock: &str) -> String {
        format!("SELECT blocked_until FROM rate_scopes WHERE scope = $1{lock}")
    }

    pub(super) const BLOCK: &str = "UPDATE rate_scopes SET blocked_until = $2 \
        WHERE scope = $1 AND (blocked_until IS NULL OR blocked_until < $2)";

    pub(super) const PRUNE_GRANTS: &str =
        "DELETE FROM rate_grants WHERE scope = $1 AND granted_at <= $2";

    /// Drops the rows of agents neither waiting nor served since `$2` (two windows ago).
    pub(super) const PRUNE_TICKETS: &str = "DELETE FROM rate_tickets WHERE scope = $1 \
        AND (back_by IS NULL OR back_by < $2) AND (served_at IS NULL OR served_at < $2)";

    /// Queues the caller: a caller that waits keeps its place, and so does one whose wait
    /// lapsed within a window (`$6`; it waited for its node's call permit, say); any other
    /// starts a new wait now.
    pub(super) const QUEUE_TICKET: &str = "INSERT INTO rate_tickets \
        (scope, owner_id, agent_id, since, back_by) VALUES ($1, $2, $3, $4, $5) \
        ON CONFLICT (scope, owner_id, agent_id) DO UPDATE SET \
        since = CASE WHEN rate_tickets.back_by >= $6 THEN rate_tickets.since \
        ELSE excluded.since END, back_by = excluded.back_by";

    pub(super) const KEEP_TICKET: &str = "UPDATE rate_tickets SET back_by = $4 \
        WHERE scope = $1 AND owner_id = $2 AND agent_id = $3";

    /// The caller was served now (`$4`): it waits no more.
    pub(super) const SERVED: &str = "UPDATE rate_tickets \
        SET since = NULL, back_by = NULL, served_at = $4 \
        WHERE scope = $1 AND owner_id = $2 AND agent_id = $3";

    pub(super) const WINDOW: &str = "SELECT COUNT(*), CAST(COALESCE(SUM(tokens), 0) AS BIGINT) \
        FROM rate_grants WHERE scope = $1";

    /// The waiting agents (those that said they would look again by now, `$2`), with when
    /// each was last served.
    pub(super) const QUEUE: &str = "SELECT owner_id, agent_id, since, served_at \
        FROM rate_tickets WHERE scope = $1 AND back_by >= $2";

    pub(super) const NTH_GRANT: &str = "SELECT granted_at FROM rate_grants WHERE scope = $1 \
        ORDER BY granted_at LIMIT 1 OFFSET $2";

    pub(super) const GRANT: &str = "INSERT INTO rate_grants \
        (id, scope, owner_id, agent_id, tokens, granted_at) VALUES ($1, $2, $3, $4, $5, $6)";

    pub(super) const CORRECT: &str = "UPDATE rate_grants SET tokens = $2 WHERE id = $1";
}
