//! PostgreSQL's audit entries of one workspace, committed together.
//!
//! An entry is chained to the workspace's last under the workspace's row lock, held through
//! its commit's WAL flush, so that two nodes never give two entries one number. Every audited
//! change of a workspace therefore waited for the one before it to reach the disk: starting a
//! thousand agents of one workspace while its other agents worked ran at about ninety starts a
//! second on two cores, each start's answer waiting in that queue.
//!
//! Here each workspace has a lane on the node (`lanes.rs`): the entries that arrive while a
//! transaction of the workspace's entries is in flight go together as the next one, chained
//! one after another in the order the node received them, after the last entry read under the
//! lock, and inserted by one statement: one lock taken, one flush for all of them. The chain
//! is what it would be had they come one at a time in that order. An entry whose caller
//! stopped waiting (a client gone) is written all the same: the change it records is made.

use std::sync::LazyLock;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Pool, Postgres};

use super::Backend;
use super::audit::sql::LAST;
use super::lanes::{Batch, Lanes, column};
use crate::domain::audit::{AuditEntry, GENESIS, NewAuditEntry};
use crate::domain::workspace::WorkspaceId;

/// The most entries in one transaction: a bound on how long one holds the workspace's lock.
const MOST_IN_A_TRANSACTION: usize = 100;

/// The workspace's row lock, as `workspaces::lock_workspace` takes it.
static LOCK: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT id FROM workspaces WHERE id = $1{}", Backend::Postgres.lock())
});

/// The workspace's entries: `$1` the workspace, then one array per column, in `audit_log`'s
/// order.
const INSERT_ALL: &str = "INSERT INTO audit_log (workspace_id, seq, at, actor_kind, actor_id, \
    actor_label, address, action, target_kind, target_id, before, after, prev_hash, hash) \
    SELECT $1::text, * FROM UNNEST($2::bigint[], $3::timestamptz[], $4::text[], $5::text[], \
    $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], \
    $13::text[], $14::text[])";

/// One entry waiting for its place in the chain, with the time it is dated.
#[derive(Debug)]
pub(crate) struct Pending {
    pub entry: NewAuditEntry,
    pub at: DateTime<Utc>,
}

/// The store's lanes of audit entries, one per workspace with an entry in flight on this node;
/// an entry's answer is `None` when there is no such workspace.
pub(crate) type AuditLanes = Lanes<Audits>;

/// How a lane of audit entries writes.
pub(crate) struct Audits {
    pool: Pool<Postgres>,
}

impl Audits {
    pub(crate) fn lanes(pool: Pool<Postgres>) -> AuditLanes {
        Lanes::new(Audits { pool })
    }
}

#[async_trait]
impl Batch for Audits {
    type Key = WorkspaceId;
    type Item = Pending;
    type Answer = Option<AuditEntry>;
    type Error = sqlx::Error;
    const MOST: usize = MOST_IN_A_TRANSACTION;
    /// The change an entry records is made already: its entry is written all the same.
    const KEEPS_ABANDONED: bool = true;

    async fn write(
        &self,
        workspace: &WorkspaceId,
        pending: &[&Pending],
    ) -> std::result::Result<Vec<Option<AuditEntry>>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let found: Option<String> = sqlx::query_scalar(LOCK.as_str())
            .bind(workspace.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        if found.is_none() {
            return Ok(pending.iter().map(|_| None).collect());
        }
        let last: Option<(i64, String)> =
            sqlx::query_as(LAST).bind(workspace.as_str()).fetch_optional(&mut *tx).await?;
        let (mut seq, mut prev) = last.unwrap_or((0, GENESIS.to_owned()));
        let mut entries = Vec::with_capacity(pending.len());
        for one in pending {
            seq += 1;
            let entry = one.entry.clone().chained(workspace.as_str(), seq, one.at, &prev);
            prev.clone_from(&entry.hash);
            entries.push(entry);
        }
        insert_all(&mut tx, workspace, &entries).await?;
        tx.commit().await?;
        Ok(entries.into_iter().map(Some).collect())
    }

    fn its_own(error: &sqlx::Error) -> bool {
        super::lanes::values_refused(error)
    }
}

/// Inserts `entries` in one statement.
async fn insert_all(
    tx: &mut sqlx::Transaction<'static, Postgres>,
    workspace: &WorkspaceId,
    entries: &[AuditEntry],
) -> std::result::Result<(), sqlx::Error> {
    let json = |value: &Option<serde_json::Value>| value.as_ref().map(ToString::to_string);
    sqlx::query(INSERT_ALL)
        .bind(workspace.as_str())
        .bind(column(entries, |e| e.seq))
        .bind(column(entries, |e| e.at))
        .bind(column(entries, |e| e.actor_kind.clone()))
        .bind(column(entries, |e| e.actor_id.clone()))
        .bind(column(entries, |e| e.actor_label.clone()))
        .bind(column(entries, |e| e.address.clone()))
        .bind(column(entries, |e| e.action.clone()))
        .bind(column(entries, |e| e.target_kind.clone()))
        .bind(column(entries, |e| e.target_id.clone()))
        .bind(column(entries, |e| json(&e.before)))
        .bind(column(entries, |e| json(&e.after)))
        .bind(column(entries, |e| e.prev_hash.clone()))
        .bind(column(entries, |e| e.hash.clone()))
        .execute(&mut **tx)
        .await?;
    Ok(())
}
