//! The audit log: each entry chained to the one before it under the workspace's row lock, so
//! two nodes never give two entries one number; on PostgreSQL the entries waiting on a node
//! for their workspace's lock go together (`audit_lanes.rs`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::audit_lanes::Pending;
use super::db::{SqlStore, query, query_as};
use super::shared::{watched, watched_if};
use super::workspaces::lock_workspace;
use crate::domain::audit::{AuditEntry, GENESIS, NewAuditEntry};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};

/// Which entries a page holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Entries numbered below this one (the next page of a newest-first listing).
    pub before: Option<i64>,
    /// Entries numbered above this one, oldest first (an export resuming).
    pub after: Option<i64>,
    pub action: Option<String>,
    pub actor_id: Option<String>,
    pub target_kind: Option<String>,
    pub target_id: Option<String>,
    pub limit: u32,
}

#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends `entry` as the workspace's next, chained to its last.
    async fn append_audit(
        &self,
        workspace: &WorkspaceId,
        entry: NewAuditEntry,
        at: DateTime<Utc>,
    ) -> Result<AuditEntry>;
    /// A page of entries: newest first, or oldest first after `filter.after`.
    async fn audit(&self, workspace: &WorkspaceId, filter: &AuditFilter)
    -> Result<Vec<AuditEntry>>;
}

#[derive(sqlx::FromRow)]
struct AuditRow {
    workspace_id: String,
    seq: i64,
    at: DateTime<Utc>,
    actor_kind: String,
    actor_id: String,
    actor_label: String,
    address: Option<String>,
    action: String,
    target_kind: String,
    target_id: String,
    before: Option<String>,
    after: Option<String>,
    prev_hash: String,
    hash: String,
}

impl AuditRow {
    fn entry(self) -> Result<AuditEntry> {
        let json = |text: Option<String>| -> Result<Option<serde_json::Value>> {
            text.map(|t| serde_json::from_str(&t).map_err(crate::error::Error::internal))
                .transpose()
        };
        Ok(AuditEntry {
            workspace_id: self.workspace_id,
            seq: self.seq,
            at: self.at,
            actor_kind: self.actor_kind,
            actor_id: self.actor_id,
            actor_label: self.actor_label,
            address: self.address,
            action: self.action,
            target_kind: self.target_kind,
            target_id: self.target_id,
            before: json(self.before)?,
            after: json(self.after)?,
            prev_hash: self.prev_hash,
            hash: self.hash,
        })
    }
}

#[async_trait]
impl<S: SqlStore> AuditStore for S {
    async fn append_audit(
        &self,
        workspace: &WorkspaceId,
        entry: NewAuditEntry,
        at: DateTime<Utc>,
    ) -> Result<AuditEntry> {
        if let Some(lanes) = self.audits() {
            let pending = Pending { entry, at };
            // No such workspace writes nothing: no proof that writes work.
            let write = lanes.write(workspace.clone(), pending);
            let written = watched_if(self.storage_health(), write, Option::is_some).await?;
            return written.ok_or_else(|| not_found(workspace));
        }
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_workspace(&mut tx, workspace).await?;
            let last: Option<(i64, String)> =
                query_as(sql::LAST).bind(workspace.as_str()).fetch_optional(&mut tx).await?;
            let (seq, prev) = last.map_or((1, GENESIS.to_owned()), |(seq, hash)| (seq + 1, hash));
            let entry = entry.chained(workspace.as_str(), seq, at, &prev);
            let text = |value: &Option<serde_json::Value>| value.as_ref().map(|v| v.to_string());
            query(sql::INSERT)
                .bind(&entry.workspace_id)
                .bind(entry.seq)
                .bind(entry.at)
                .bind(&entry.actor_kind)
                .bind(&entry.actor_id)
                .bind(&entry.actor_label)
                .bind(&entry.address)
                .bind(&entry.action)
                .bind(&entry.target_kind)
                .bind(&entry.target_id)
                .bind(text(&entry.before))
                .bind(text(&entry.after))
                .bind(&entry.prev_hash)
                .bind(&entry.hash)
                .execute(&mut tx)
                .await?;
            tx.commit().await?;
            Ok(entry)
        })
        .await
    }

    async fn audit(
        &self,
        workspace: &WorkspaceId,
        filter: &AuditFilter,
    ) -> Result<Vec<AuditEntry>> {
        let order = if filter.after.is_some() { "ASC" } else { "DESC" };
        let statement = format!("{} ORDER BY seq {order} LIMIT $8", sql::SELECT);
        let rows: Vec<AuditRow> = query_as(&statement)
            .bind(workspace.as_str())
            .bind(filter.before)
            .bind(filter.after)
            .bind(&filter.action)
            .bind(&filter.actor_id)
            .bind(&filter.target_kind)
            .bind(&filter.target_id)
            .bind(i64::from(filter.limit))
            .fetch_all(&mut self.read().await?)
            .await?;
        rows.into_iter().map(AuditRow::entry).collect()
    }
}

fn not_found(workspace: &WorkspaceId) -> Error {
    Error::not_found(Resource::Workspace, workspace.as_str())
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) const LAST: &str =
        "SELECT seq, hash FROM audit_log WHERE workspace_id = $1 ORDER BY seq DESC LIMIT 1";
    pub(crate) const INSERT: &str = "INSERT INTO audit_log (workspace_id, seq, at, actor_kind, \
        actor_id, actor_label, address, action, target_kind, target_id, before, after, \
        prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";
    pub(crate) const SELECT: &str = "SELECT workspace_id, seq, at, actor_kind, actor_id, \
        actor_label, address, action, target_kind, target_id, before, after, prev_hash, hash \
        FROM audit_log WHERE workspace_id = $1 \
        AND ($2 IS NULL OR seq < $2) AND ($3 IS NULL OR seq > $3) \
        AND ($4 IS NULL OR action = $4) AND ($5 IS NULL OR actor_id = $5) \
        AND ($6 IS NULL OR target_kind = $6) AND ($7 IS NULL OR target_id = $7)";
}
