//! The audit log as the facade keeps and shows it: every change a member, key or Discord user
//! makes to what a workspace shares is recorded after it is made, chained to the entry before.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Core, Principal};
use crate::domain::audit::{self, AuditEntry, MAX_PAGE, NewAuditEntry, Verified};
use crate::domain::workspace::{Need, WorkspaceId};
use crate::error::Result;
use crate::store::AuditFilter;

/// What a change was made to: its kind (`agent`, `member`, ...) and id.
pub(crate) type Target<'a> = (&'a str, &'a str);

/// Entries one export request reads at a time.
const EXPORT_BATCH: u32 = 1_000;

impl Core {
    /// Records a change the caller made: `action` on `target`, with what it was and became.
    /// The change is made already: a failure to record is logged (and counted by the storage
    /// health), not returned, so the caller learns their change stands.
    pub(crate) async fn record(
        &self,
        who: &Principal,
        action: &str,
        target: Target<'_>,
        before: Option<Value>,
        after: Option<Value>,
    ) {
        let entry = match self.audit_entry(who, action, target, before, after).await {
            Ok(entry) => entry,
            Err(error) => {
                tracing::error!(%error, action, "cannot describe a change for the audit log");
                return;
            }
        };
        self.append(&who.workspace, entry).await;
    }

    /// Records a change made from outside any request (a Stripe event): `actor` names it.
    pub(crate) async fn record_as(
        &self,
        workspace: &WorkspaceId,
        actor: &str,
        action: &str,
        target: Target<'_>,
        after: Option<Value>,
    ) {
        let entry = NewAuditEntry {
            actor_kind: actor.to_owned(),
            actor_id: actor.to_owned(),
            actor_label: actor.to_owned(),
            address: None,
            action: action.to_owned(),
            target_kind: target.0.to_owned(),
            target_id: target.1.to_owned(),
            before: None,
            after,
        };
        self.append(workspace, entry).await;
    }

    async fn append(&self, workspace: &WorkspaceId, entry: NewAuditEntry) {
        let action = entry.action.clone();
        if let Err(error) = self.store().append_audit(workspace, entry, crate::domain::now()).await
        {
            tracing::error!(%error, %workspace, action, "cannot record a change in the audit log");
        }
    }

    async fn audit_entry(
        &self,
        who: &Principal,
        action: &str,
        (kind, id): Target<'_>,
        before: Option<Value>,
        after: Option<Value>,
    ) -> Result<NewAuditEntry> {
        let (actor_kind, actor_id) = who.actor.kind_and_id();
        Ok(NewAuditEntry {
            actor_kind: actor_kind.to_owned(),
            actor_id,
            actor_label: self.actor_label(who).await?,
            address: who.address.clone(),
            action: action.to_owned(),
            target_kind: kind.to_owned(),
            target_id: id.to_owned(),
            before,
            after,
        })
    }

    /// A page of the workspace's audit log, newest first (owners and admins).
    pub async fn audit(&self, who: &Principal, mut filter: AuditFilter) -> Result<AuditPage> {
        who.require(Need::Manage)?;
        filter.after = None;
        filter.limit = filter.limit.clamp(1, MAX_PAGE);
        let entries = self.store().audit(&who.workspace, &filter).await?;
        let next_before = (entries.len() == filter.limit as usize)
            .then(|| entries.last().map(|e| e.seq))
            .flatten();
        Ok(AuditPage { entries, next_before })
    }

    /// The entries after `after`, oldest first, `EXPORT_BATCH` at most: an export reads on from
    /// the last one it got.
    pub async fn audit_export(&self, who: &Principal, after: i64) -> Result<Vec<AuditEntry>> {
        who.require(Need::Manage)?;
        let filter = AuditFilter { after: Some(after), limit: EXPORT_BATCH, ..Default::default() };
        self.store().audit(&who.workspace, &filter).await
    }

    /// Checks the whole chain as stored: what it covers, or where it breaks.
    pub async fn verify_audit(&self, who: &Principal) -> Result<Verified> {
        who.require(Need::Manage)?;
        let mut checker = audit::Checker::default();
        let mut after = 0;
        loop {
            let batch = self.audit_export(who, after).await?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            if checker.check(&batch).is_err() || batch.len() < EXPORT_BATCH as usize {
                break;
            }
        }
        Ok(checker.verified())
    }
}

/// A page of `GET /api/audit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    /// Pass as `before` for the next (older) page; `null` on the last.
    pub next_before: Option<i64>,
}
