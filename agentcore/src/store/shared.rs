//! What every area of the store shares: the [`Store`](super::Store) methods that are not
//! about one area, the transaction helpers the areas call, and the plain functions they use.
//!
//! The helpers are plain functions over a transaction or a connection ([`Tx`], [`Ex`]): an
//! area calls `lock_agent(&mut tx, ..)`, `insert_activity(&mut tx, ..)`, `notify(&mut tx, ..)`;
//! each takes its backend's SQL from the connection's dialect.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::db::{Ex, SqlStore, Tx, query, query_scalar};
use super::{Backend, Notice, StorageHealth, Store, Wake, sql};
use crate::domain::activity::NewActivity;
use crate::domain::agent::AgentId;
use crate::domain::chat::NewPost;
use crate::domain::runtime::AgentKey;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};

pub(super) fn chrono_duration(duration: Duration) -> chrono::Duration {
    chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX)
}

/// Runs one write of data, reporting its outcome to the store's storage health.
pub(super) async fn watched<T>(
    health: &StorageHealth,
    write: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    health.watch(write.await, true)
}

/// Runs one write that may find nothing to write (a lease lost, a task gone): only an outcome
/// for which `wrote` holds ends a fault, since a transaction rolled back proves nothing.
pub(super) async fn watched_if<T>(
    health: &StorageHealth,
    write: impl std::future::Future<Output = Result<T>>,
    wrote: fn(&T) -> bool,
) -> Result<T> {
    let result = write.await;
    let evidence = result.as_ref().is_ok_and(wrote);
    health.watch(result, evidence)
}

/// Runs one write of the runtime's bookkeeping (leases, heartbeats, pruning). Its
/// faults count, but its success proves little: updating a few bytes in place can
/// still work on a disk too full for anything new.
pub(crate) async fn housekeeping<T>(
    health: &StorageHealth,
    write: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    health.watch(write.await, false)
}

/// The time of the `nth` entry of one change: a microsecond apart each, so entries keep
/// their order and paging by `before` never splits a change ambiguously.
pub(super) fn nth_instant(at: DateTime<Utc>, nth: usize) -> DateTime<Utc> {
    at + chrono::Duration::microseconds(i64::try_from(nth).unwrap_or(0))
}

/// Tells every node that the agent may have work, once the transaction has committed
/// (`wake_after_commit.rs`).
pub(super) fn notify(tx: &mut Tx, agent: &AgentKey) {
    tx.wake(Notice::Agent(agent.clone()));
}

/// Publishes `notice` on the wake-up channel at commit, inside the transaction (a no-op
/// without notifications): for the notices that revoke something, which may not be lost
/// between a commit and a send as an agent's wake-up may.
pub(super) async fn publish<'c>(ex: impl Into<Ex<'c>>, notice: &Notice) -> Result<()> {
    let ex = ex.into();
    if let Some(statement) = ex.dialect().notify() {
        query(statement).bind(notice.to_payload()).execute(ex).await?;
    }
    Ok(())
}

/// Locks the agent row for the transaction, or fails with `agent_not_found`.
pub(super) async fn lock_agent(tx: &mut Tx, owner: &WorkspaceId, id: &AgentId) -> Result<()> {
    let lock = tx.dialect().lock();
    require_agent(tx, owner, id, lock).await
}

/// Fails with `agent_not_found` unless the owner has this agent; `lock` is appended to the
/// query (the backend's row lock, or nothing for a plain read).
pub(super) async fn require_agent<'c>(
    ex: impl Into<Ex<'c>>,
    owner: &WorkspaceId,
    id: &AgentId,
    lock: &str,
) -> Result<()> {
    let found: Option<i32> = query_scalar(&sql::agent_exists(lock))
        .bind(owner.as_str())
        .bind(id.as_str())
        .fetch_optional(ex)
        .await?;
    found.map(|_| ()).ok_or_else(|| Error::not_found(Resource::Agent, id.as_str()))
}

/// Adds an entry to the agent's activity log, dated `at` (see [`Backend::insert_activity`](super::Backend::insert_activity)).
pub(super) async fn insert_activity<'c>(
    ex: impl Into<Ex<'c>>,
    owner: &WorkspaceId,
    agent: &AgentId,
    entry: &NewActivity,
    at: DateTime<Utc>,
) -> Result<()> {
    let ex = ex.into();
    query(ex.dialect().insert_activity())
        .bind(owner.as_str())
        .bind(agent.as_str())
        .bind(entry.action.as_str())
        .bind(&entry.details)
        .bind(&entry.task_id)
        .bind(at)
        .execute(ex)
        .await?;
    Ok(())
}

/// Queues `post` to the agent's mapped channel (nothing when it is unmapped).
pub(super) async fn queue_post<'c>(
    ex: impl Into<Ex<'c>>,
    owner: &str,
    agent: &str,
    post: &NewPost,
    at: DateTime<Utc>,
) -> Result<bool> {
    let ex = ex.into();
    let payload = serde_json::to_string(&post.body).map_err(Error::internal)?;
    let statement = sql::insert_post_for_mapping(ex.dialect().clock());
    let queued = query(&statement)
        .bind(owner)
        .bind(agent)
        .bind(&post.nonce)
        .bind(payload)
        .bind(at)
        .execute(ex)
        .await?;
    Ok(queued.rows_affected() > 0)
}

#[async_trait::async_trait]
impl<S: SqlStore + std::fmt::Debug + 'static> Store for S {
    fn backend(&self) -> Backend {
        self.dialect()
    }

    fn health(&self) -> &StorageHealth {
        self.storage_health()
    }

    fn commits(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        SqlStore::commits(self).cloned()
    }

    fn adds_waiting(&self) -> usize {
        self.adds().map_or(0, super::add_lanes::AddLanes::waiting)
    }

    fn audit_entries_waiting(&self) -> usize {
        self.audits().map_or(0, super::audit_lanes::AuditLanes::waiting)
    }

    fn finishes_waiting(&self) -> usize {
        self.finishes().waiting()
    }

    fn finish_transactions(&self) -> u64 {
        self.finishes().transactions()
    }

    async fn ping(&self) -> Result<()> {
        query("SELECT 1").execute(&mut self.read().await?).await?;
        Ok(())
    }

    async fn close(&self) {
        self.close_pools().await;
    }

    async fn secret_or_insert(&self, name: &str, candidate: &str) -> Result<String> {
        housekeeping(self.storage_health(), async {
            query(sql::INSERT_SECRET)
                .bind(name)
                .bind(candidate)
                .bind(crate::domain::now())
                .execute(self.writer())
                .await?;
            let value: String =
                query_scalar(sql::SELECT_SECRET).bind(name).fetch_one(self.writer()).await?;
            Ok(value)
        })
        .await
    }

    async fn replace_secret(&self, name: &str, old: &str, new: &str) -> Result<()> {
        housekeeping(self.storage_health(), async {
            query(sql::REPLACE_SECRET)
                .bind(name)
                .bind(old)
                .bind(new)
                .execute(self.writer())
                .await?;
            Ok(())
        })
        .await
    }

    fn listen(
        &self,
        wake: Wake,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        self.listener(wake, stop)
    }
}
