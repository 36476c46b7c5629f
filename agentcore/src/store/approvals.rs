//! Tool approvals and interaction ids. A run that reaches a call needing approval parks its
//! task (fenced on the lease, with the request's post, in one transaction); a decision moves it
//! back to the queue in one transaction too, so any node resumes it and an approval is decided
//! once. Interaction ids are remembered a day, so a second delivery of one runs nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::activity::{Action, NewActivity};
use crate::domain::agent::AgentId;
use crate::domain::approval::{self, Approval, Decider, Decision, decided_body};
use crate::domain::chat::NewPost;
use crate::domain::runtime::AgentKey;
use crate::domain::steps::Step;
use crate::domain::task::TaskId;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Conflict, Error, Resource, Result};
use crate::store::RunRef;
use crate::store::db::{SqlStore, query, query_as, query_scalar};
use crate::store::shared::{insert_activity, lock_agent, notify, queue_post, watched, watched_if};
use crate::store::steps::{advance_task, insert_step};

/// Which approval to decide: a task's pending one (its owner deciding through the API), or one
/// by id (a button in Discord, or the timeout).
#[derive(Debug, Clone, Copy)]
pub enum ApprovalRef<'a> {
    OfTask { owner: &'a WorkspaceId, agent: &'a AgentId, task: &'a TaskId },
    Id(&'a str),
}

/// A decided approval, its owner, and the Discord message that asked, when it was delivered
/// (to edit: an undelivered one is rewritten in the outbox instead).
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    pub owner: WorkspaceId,
    pub approval: Approval,
    /// `(guild_id, channel_id, message_id)`.
    pub message: Option<(String, String, String)>,
}

#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Parks the run at a call waiting for approval, only while `run.node` holds the task:
    /// stores `asked` first when it is not stored yet, then the approval (expiring
    /// `timeout_seconds` from now by the database's clock); moves the task to
    /// `awaiting_approval` without a lease, giving its attempt back; logs `approval_requested`
    /// and queues `post` to the agent's channel. `false`: the lease is gone, nothing written.
    async fn park_task(
        &self,
        run: RunRef<'_>,
        asked: Option<&Step>,
        approval: &Approval,
        timeout_seconds: f64,
        post: &NewPost,
    ) -> Result<bool>;
    /// The approval asked for a task's call, if any.
    async fn approval_of_call(&self, task: &TaskId, call_id: &str) -> Result<Option<Approval>>;
    /// An approval by id, with its owner.
    async fn approval(&self, id: &str) -> Result<Option<(WorkspaceId, Approval)>>;
    /// Decides a pending approval: its status and who, the task back in the queue (and its
    /// agent woken), a `tool_approved` or `tool_denied` entry, and the request's post, if not
    /// delivered yet, rewritten without buttons. `approval_not_found`, `task_not_found`, or
    /// the conflict `not_awaiting_approval` when it was decided already.
    async fn decide_approval(
        &self,
        which: ApprovalRef<'_>,
        decision: Decision,
        decider: &Decider,
        at: DateTime<Utc>,
    ) -> Result<Decided>;
    /// Up to `limit` pending approvals past their expiry, by the database's clock.
    async fn expired_approvals(&self, limit: i64) -> Result<Vec<String>>;
    /// Remembers an interaction id; `false` when it was seen before. Forgets ids older than a
    /// day.
    async fn claim_interaction(&self, id: &str, at: DateTime<Utc>) -> Result<bool>;
}

/// An approval as stored.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct ApprovalRow {
    pub(super) owner_id: String,
    id: String,
    pub(super) agent_id: String,
    task_id: String,
    call_id: String,
    tool: String,
    arguments: String,
    status: String,
    decided_by: Option<String>,
    decided_at: Option<DateTime<Utc>>,
    expires_at: DateTime<Utc>,
    pub(super) post_id: Option<i64>,
    created_at: DateTime<Utc>,
}

impl TryFrom<ApprovalRow> for Approval {
    type Error = crate::error::Error;

    fn try_from(row: ApprovalRow) -> Result<Self> {
        let corrupt = |what: &str, e: String| {
            crate::error::Error::internal(format!("corrupt approvals.{what}: {e}"))
        };
        Ok(Approval {
            id: row.id,
            task_id: row.task_id,
            agent_id: AgentId::parse(&row.agent_id).map_err(|e| corrupt("agent_id", e))?,
            tool: row.tool,
            arguments: serde_json::from_str(&row.arguments)
                .unwrap_or(serde_json::Value::String(row.arguments)),
            status: row.status.parse().map_err(|e| corrupt("status", e))?,
            decided_by: row.decided_by,
            decided_at: row.decided_at,
            expires_at: row.expires_at,
            created_at: row.created_at,
            call_id: row.call_id,
        })
    }
}

#[async_trait::async_trait]
impl<S: SqlStore> ApprovalStore for S {
    async fn park_task(
        &self,
        run: RunRef<'_>,
        asked: Option<&Step>,
        approval: &Approval,
        timeout_seconds: f64,
        post: &NewPost,
    ) -> Result<bool> {
        watched_if(
            self.storage_health(),
            async {
                let mut tx = self.begin_write().await?;
                let owner = WorkspaceId::from_trusted(run.agent.owner_id.clone());
                let own = AgentId::parse(&run.agent.agent_id).map_err(Error::internal)?;
                match lock_agent(&mut tx, &owner, &own).await {
                    Ok(()) => {}
                    Err(Error::NotFound { .. }) => return Ok(false),
                    Err(error) => return Err(error),
                }
                if let Some(asked) = asked {
                    if !advance_task(&mut tx, run.task, run.node, &[asked]).await? {
                        return Ok(false);
                    }
                    insert_step(&mut tx, run.task, asked).await?;
                }
                let at = approval.created_at;
                let parked = query(sql::PARK_TASK)
                    .bind(run.task.as_str())
                    .bind(run.node)
                    .bind(at)
                    .execute(&mut tx)
                    .await?;
                if parked.rows_affected() == 0 {
                    return Ok(false);
                }
                query(&sql::insert_approval(self.dialect().clock()))
                    .bind(&approval.id)
                    .bind(owner.as_str())
                    .bind(own.as_str())
                    .bind(run.task.as_str())
                    .bind(&approval.call_id)
                    .bind(&approval.tool)
                    .bind(approval.arguments.to_string())
                    .bind(at)
                    .bind(timeout_seconds)
                    .execute(&mut tx)
                    .await?;
                if queue_post(&mut tx, owner.as_str(), own.as_str(), post, at).await? {
                    query(sql::LINK_POST)
                        .bind(&approval.id)
                        .bind(owner.as_str())
                        .bind(&post.nonce)
                        .execute(&mut tx)
                        .await?;
                }
                let entry = NewActivity::for_task(
                    Action::ApprovalRequested,
                    run.task.as_str(),
                    format!("Waiting for approval to call {}.", approval.tool),
                );
                insert_activity(&mut tx, &owner, &own, &entry, at).await?;
                tx.commit().await?;
                Ok(true)
            },
            |parked| *parked,
        )
        .await
    }

    async fn approval_of_call(&self, task: &TaskId, call_id: &str) -> Result<Option<Approval>> {
        let row: Option<ApprovalRow> =
            query_as(&sql::select_approval("task_id = $1 AND call_id = $2", ""))
                .bind(task.as_str())
                .bind(call_id)
                .fetch_optional(&mut self.read().await?)
                .await?;
        row.map(Approval::try_from).transpose()
    }

    async fn approval(&self, id: &str) -> Result<Option<(WorkspaceId, Approval)>> {
        let row: Option<ApprovalRow> = query_as(&sql::select_approval("id = $1", ""))
            .bind(id)
            .fetch_optional(&mut self.read().await?)
            .await?;
        match row {
            Some(row) => {
                let owner = WorkspaceId::from_trusted(row.owner_id.clone());
                Ok(Some((owner, Approval::try_from(row)?)))
            }
            None => Ok(None),
        }
    }

    async fn decide_approval(
        &self,
        which: ApprovalRef<'_>,
        decision: Decision,
        decider: &Decider,
        at: DateTime<Utc>,
    ) -> Result<Decided> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let (owner, agent, id) = match which {
                ApprovalRef::Id(id) => {
                    let row: Option<ApprovalRow> = query_as(&sql::select_approval("id = $1", ""))
                        .bind(id)
                        .fetch_optional(&mut tx)
                        .await?;
                    let row = row.ok_or_else(|| Error::not_found(Resource::Approval, id))?;
                    let agent = AgentId::parse(&row.agent_id).map_err(Error::internal)?;
                    (WorkspaceId::from_trusted(row.owner_id), agent, id.to_owned())
                }
                ApprovalRef::OfTask { owner, agent, task } => {
                    lock_agent(&mut tx, owner, agent).await?;
                    let status: Option<String> = query_scalar(sql::TASK_STATUS)
                        .bind(owner.as_str())
                        .bind(agent.as_str())
                        .bind(task.as_str())
                        .fetch_optional(&mut tx)
                        .await?;
                    let status =
                        status.ok_or_else(|| Error::not_found(Resource::Task, task.as_str()))?;
                    let id: Option<String> = query_scalar(sql::PENDING_OF_TASK)
                        .bind(task.as_str())
                        .fetch_optional(&mut tx)
                        .await?;
                    let id = id.ok_or_else(|| {
                        Error::conflict(
                            Conflict::NotAwaitingApproval,
                            format!("Task {task} is {status}: it waits for no approval."),
                        )
                    })?;
                    (owner.clone(), agent.clone(), id)
                }
            };
            lock_agent(&mut tx, &owner, &agent).await?;
            let row: ApprovalRow =
                query_as(&sql::select_approval("id = $1", self.dialect().lock()))
                    .bind(&id)
                    .fetch_one(&mut tx)
                    .await?;
            let post_id = row.post_id;
            let (approval, entry) =
                approval::decide(Approval::try_from(row)?, decision, decider, at)
                    .map_err(|refused| Error::conflict(Conflict::NotAwaitingApproval, refused))?;
            query(sql::DECIDE)
                .bind(&id)
                .bind(approval.status.as_str())
                .bind(&approval.decided_by)
                .bind(at)
                .execute(&mut tx)
                .await?;
            query(sql::REQUEUE_TASK).bind(&approval.task_id).bind(at).execute(&mut tx).await?;
            insert_activity(&mut tx, &owner, &agent, &entry, at).await?;
            let mut message = None;
            if let Some(post_id) = post_id {
                let posted: Option<(String, String, Option<String>)> =
                    query_as(&sql::post_of_approval(self.dialect().lock()))
                        .bind(post_id)
                        .fetch_optional(&mut tx)
                        .await?;
                match posted {
                    Some((guild, channel, Some(message_id))) => {
                        message = Some((guild, channel, message_id));
                    }
                    Some(_) => {
                        let body = decided_body(&approval);
                        let payload = serde_json::to_string(&body).map_err(Error::internal)?;
                        query(sql::REWRITE_POST)
                            .bind(post_id)
                            .bind(payload)
                            .execute(&mut tx)
                            .await?;
                    }
                    None => {}
                }
            }
            notify(&mut tx, &AgentKey::new(owner.as_str(), agent.as_str()));
            tx.commit().await?;
            Ok(Decided { owner, approval, message })
        })
        .await
    }

    async fn expired_approvals(&self, limit: i64) -> Result<Vec<String>> {
        Ok(query_scalar(&sql::expired(self.dialect().clock()))
            .bind(limit)
            .fetch_all(&mut self.read().await?)
            .await?)
    }

    async fn claim_interaction(&self, id: &str, at: DateTime<Utc>) -> Result<bool> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            query(sql::FORGET_INTERACTIONS)
                .bind(at - chrono::Duration::days(1))
                .execute(&mut tx)
                .await?;
            let claimed = query(sql::CLAIM_INTERACTION).bind(id).bind(at).execute(&mut tx).await?;
            tx.commit().await?;
            Ok(claimed.rows_affected() > 0)
        })
        .await
    }
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    use crate::store::sql::Clock;

    /// Parks a task held by `$2`: no lease, the attempt given back (it did not fail).
    pub(crate) const PARK_TASK: &str = "UPDATE tasks SET status = 'awaiting_approval', \
        lease_owner = NULL, lease_until = NULL, attempts = CASE WHEN attempts > 0 \
        THEN attempts - 1 ELSE 0 END, updated_at = $3 \
        WHERE id = $1 AND lease_owner = $2 AND status = 'in_progress'";
    pub(crate) fn insert_approval(clock: Clock) -> String {
        format!(
            "INSERT INTO approvals (id, owner_id, agent_id, task_id, call_id, tool, arguments, \
             status, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, {})",
            (clock.plus)("$9")
        )
    }
    pub(crate) const LINK_POST: &str = "UPDATE approvals SET post_id = \
        (SELECT id FROM outbox WHERE owner_id = $2 AND nonce = $3) WHERE id = $1";
    pub(crate) fn select_approval(condition: &str, lock: &str) -> String {
        format!(
            "SELECT owner_id, id, agent_id, task_id, call_id, tool, arguments, status, \
             decided_by, decided_at, expires_at, post_id, created_at FROM approvals \
             WHERE {condition}{lock}"
        )
    }
    pub(crate) const TASK_STATUS: &str =
        "SELECT status FROM tasks WHERE owner_id = $1 AND agent_id = $2 AND id = $3";
    pub(crate) const PENDING_OF_TASK: &str =
        "SELECT id FROM approvals WHERE task_id = $1 AND status = 'pending'";
    pub(crate) const DECIDE: &str = "UPDATE approvals SET status = $2, decided_by = $3, \
        decided_at = $4 WHERE id = $1 AND status = 'pending'";
    pub(crate) const REQUEUE_TASK: &str = "UPDATE tasks SET status = 'queued', updated_at = $2 \
        WHERE id = $1 AND status = 'awaiting_approval'";
    /// The request's post, locked (`lock`): a delivery being recorded meanwhile either
    /// commits first, and its message is edited, or waits, and finds the post rewritten.
    pub(crate) fn post_of_approval(lock: &str) -> String {
        format!("SELECT guild_id, channel_id, message_id FROM outbox WHERE id = $1{lock}")
    }
    pub(crate) const REWRITE_POST: &str =
        "UPDATE outbox SET payload = $2, rewritten = TRUE WHERE id = $1 AND delivered_at IS NULL";
    pub(crate) fn expired(clock: Clock) -> String {
        format!(
            "SELECT id FROM approvals WHERE status = 'pending' AND expires_at <= {} \
             ORDER BY expires_at LIMIT $1",
            clock.now
        )
    }
    pub(crate) const FORGET_INTERACTIONS: &str = "DELETE FROM interactions WHERE received_at < $1";
    pub(crate) const CLAIM_INTERACTION: &str = "INSERT INTO interactions (id, received_at) \
        VALUES ($1, $2) ON CONFLICT (id) DO NOTHING";
}
