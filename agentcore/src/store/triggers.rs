//! Triggers of each workspace, and their calls. An accepted call is one transaction under the
//! agent's lock and the trigger's, in which its task, its `task_added` and `trigger_called`
//! entries and its `trigger_calls` row are written; that row's key on (trigger, webhook-id)
//! lets no `webhook-id` queue two tasks, whichever nodes receive it. Times of calls are the
//! database's clock, so the per-minute bound holds across nodes.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::activity::NewActivity;
use crate::domain::agent::{AgentId, AgentStatus};
use crate::domain::quota::Quota;
use crate::domain::runtime::AgentKey;
use crate::domain::task::{Priority, Task, TaskId};
use crate::domain::trigger::{
    CALLS_PER_MINUTE, TriggerId, TriggerName, TriggerRecord, description_template, title_template,
};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Conflict, Error, Resource, Result};
use crate::store::db::{SqlStore, Tx, query, query_as, query_scalar};
use crate::store::shared::{
    insert_activity, lock_agent, notify, nth_instant, require_agent, watched,
};
use crate::store::tasks::write_task;

/// Triggers, each scoped to its owner.
#[async_trait]
pub trait TriggerStore: Send + Sync {
    /// Adds a trigger with its sealed secret; fails with `agent_not_found`, or
    /// `quota_exceeded` when the owner has `max` triggers already.
    async fn insert_trigger(
        &self,
        owner: &WorkspaceId,
        trigger: &TriggerRecord,
        sealed: &str,
        max: u32,
    ) -> Result<()>;
    /// The owner's triggers (of one agent, when given: `agent_not_found` if it has none such),
    /// oldest first.
    async fn triggers(
        &self,
        owner: &WorkspaceId,
        agent: Option<&AgentId>,
    ) -> Result<Vec<TriggerRecord>>;
    /// Fails with `trigger_not_found`.
    async fn trigger(&self, owner: &WorkspaceId, id: &TriggerId) -> Result<TriggerRecord>;
    /// Locks the trigger, lets `decide` compute its new state, writes it.
    async fn update_trigger(
        &self,
        owner: &WorkspaceId,
        id: &TriggerId,
        decide: TriggerDecision<'_>,
    ) -> Result<TriggerRecord>;
    /// Deletes the trigger (and its calls' records); returns it as it was.
    async fn delete_trigger(&self, owner: &WorkspaceId, id: &TriggerId) -> Result<TriggerRecord>;
    /// Makes `sealed` the trigger's secret; the one it replaces stays valid for `overlap`
    /// seconds by the database's clock (a secret older than that is forgotten at once).
    /// Returns when the replaced one stops being valid.
    async fn rotate_trigger_secret(
        &self,
        owner: &WorkspaceId,
        id: &TriggerId,
        sealed: &str,
        overlap: i64,
    ) -> Result<DateTime<Utc>>;
    /// What a call to `id` is checked against: the trigger, its owner, its sealed secrets
    /// (the previous one only while still valid) and the database's time. `None` when there
    /// is no such trigger.
    async fn call_target(&self, id: &TriggerId) -> Result<Option<CallTarget>>;
    /// Records an accepted call, under the agent's and the trigger's locks: the first time
    /// for `webhook_id`, the task `make` builds from the trigger as it is now (with its
    /// entries, the first the task's `task_added`) is queued; a repeat gets the first one's
    /// task and writes nothing. Fails with `trigger_not_found` (deleted meanwhile),
    /// `trigger_disabled`, or `quota_exceeded` (`trigger_calls_per_minute`).
    async fn record_call(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &TriggerId,
        webhook_id: &str,
        make: CallMaker<'_>,
    ) -> Result<CallOutcome>;
}

/// Decides a trigger's new state from its current one, or refuses.
pub type TriggerDecision<'a> = &'a (dyn Fn(&TriggerRecord) -> Result<TriggerRecord> + Send + Sync);

/// Builds the task of a call from the trigger as it is, at the database's time, or refuses
/// it (the backlog's quotas).
pub type CallMaker<'a> =
    &'a (dyn Fn(&TriggerRecord, DateTime<Utc>) -> Result<(Task, Vec<NewActivity>)> + Send + Sync);

/// A trigger as a call to it is checked.
#[derive(Debug, Clone)]
pub struct CallTarget {
    pub owner: WorkspaceId,
    pub trigger: TriggerRecord,
    pub sealed: Vec<String>,
    pub now: DateTime<Utc>,
}

/// What [`TriggerStore::record_call`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// A task was queued; the agent's status says whether to wake it.
    Accepted { task_id: TaskId, agent_status: AgentStatus },
    /// The `webhook-id` was accepted before, with this task.
    Duplicate { task_id: TaskId },
}

/// A stored trigger row.
#[derive(sqlx::FromRow)]
struct TriggerRow {
    owner_id: String,
    id: String,
    agent_id: String,
    name: String,
    title: String,
    description: Option<String>,
    priority: i32,
    enabled: bool,
    secret: String,
    previous_secret: Option<String>,
    previous_until: Option<DateTime<Utc>>,
    calls: i64,
    last_called_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<&TriggerRow> for TriggerRecord {
    type Error = Error;

    fn try_from(row: &TriggerRow) -> Result<Self> {
        let bad = |field: &str, problem: String| {
            Error::internal(format!("stored trigger {}: {field} {problem}", row.id))
        };
        Ok(TriggerRecord {
            id: TriggerId::parse(&row.id).map_err(|e| bad("id", e))?,
            agent_id: AgentId::parse(&row.agent_id).map_err(|e| bad("agent_id", e))?,
            name: TriggerName::parse(&row.name).map_err(|e| bad("name", e))?,
            title: title_template(&row.title).map_err(|e| bad("title", e))?,
            description: row
                .description
                .as_deref()
                .map(description_template)
                .transpose()
                .map_err(|e| bad("description", e))?,
            priority: Priority::parse(row.priority.into()).map_err(|e| bad("priority", e))?,
            enabled: row.enabled,
            calls: row.calls,
            last_called_at: row.last_called_at,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

fn records(rows: &[TriggerRow]) -> Result<Vec<TriggerRecord>> {
    rows.iter().map(TriggerRecord::try_from).collect()
}

async fn write_trigger(tx: &mut Tx, trigger: &TriggerRecord) -> Result<()> {
    query(sql::UPDATE)
        .bind(trigger.id.as_str())
        .bind(trigger.name.as_str())
        .bind(trigger.title.as_str())
        .bind(trigger.description.as_ref().map(|d| d.as_str()))
        .bind(trigger.priority.get())
        .bind(trigger.enabled)
        .bind(trigger.updated_at)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

async fn locked(tx: &mut Tx, owner: &WorkspaceId, id: &TriggerId) -> Result<TriggerRow> {
    let row: Option<TriggerRow> = query_as(&sql::select_one(tx.dialect().lock()))
        .bind(owner.as_str())
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
    row.ok_or_else(|| Error::not_found(Resource::Trigger, id.as_str()))
}

async fn database_now(tx: &mut Tx) -> Result<DateTime<Utc>> {
    let statement = format!("SELECT {}", tx.dialect().clock().now);
    Ok(query_scalar(&statement).fetch_one(&mut *tx).await?)
}

#[async_trait::async_trait]
impl<S: SqlStore> TriggerStore for S {
    async fn insert_trigger(
        &self,
        owner: &WorkspaceId,
        trigger: &TriggerRecord,
        sealed: &str,
        max: u32,
    ) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            // The workspace's lock, then the agent's: the count is of the whole workspace, so
            // two additions to different agents cannot both pass it.
            super::workspaces::lock_workspace(&mut tx, owner).await?;
            lock_agent(&mut tx, owner, &trigger.agent_id).await?;
            let count: i64 =
                query_scalar(sql::COUNT).bind(owner.as_str()).fetch_one(&mut tx).await?;
            if count >= i64::from(max) {
                return Err(Error::QuotaExceeded {
                    quota: Quota::TriggersPerWorkspace,
                    limit: u64::from(max),
                });
            }
            query(sql::INSERT)
                .bind(trigger.id.as_str())
                .bind(owner.as_str())
                .bind(trigger.agent_id.as_str())
                .bind(sealed)
                .bind(trigger.created_at)
                .execute(&mut tx)
                .await?;
            write_trigger(&mut tx, trigger).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn triggers(
        &self,
        owner: &WorkspaceId,
        agent: Option<&AgentId>,
    ) -> Result<Vec<TriggerRecord>> {
        let mut conn = self.read().await?;
        if let Some(agent) = agent {
            require_agent(&mut conn, owner, agent, "").await?;
        }
        let rows: Vec<TriggerRow> = query_as(&sql::select_all())
            .bind(owner.as_str())
            .bind(agent.map(AgentId::as_str))
            .fetch_all(&mut conn)
            .await?;
        records(&rows)
    }

    async fn trigger(&self, owner: &WorkspaceId, id: &TriggerId) -> Result<TriggerRecord> {
        let row: Option<TriggerRow> = query_as(&sql::select_one(""))
            .bind(owner.as_str())
            .bind(id.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        TriggerRecord::try_from(
            &row.ok_or_else(|| Error::not_found(Resource::Trigger, id.as_str()))?,
        )
    }

    async fn update_trigger(
        &self,
        owner: &WorkspaceId,
        id: &TriggerId,
        decide: TriggerDecision<'_>,
    ) -> Result<TriggerRecord> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let current = TriggerRecord::try_from(&locked(&mut tx, owner, id).await?)?;
            let next = decide(&current)?;
            write_trigger(&mut tx, &next).await?;
            tx.commit().await?;
            Ok(next)
        })
        .await
    }

    async fn delete_trigger(&self, owner: &WorkspaceId, id: &TriggerId) -> Result<TriggerRecord> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let was = TriggerRecord::try_from(&locked(&mut tx, owner, id).await?)?;
            query(sql::DELETE).bind(owner.as_str()).bind(id.as_str()).execute(&mut tx).await?;
            tx.commit().await?;
            Ok(was)
        })
        .await
    }

    async fn rotate_trigger_secret(
        &self,
        owner: &WorkspaceId,
        id: &TriggerId,
        sealed: &str,
        overlap: i64,
    ) -> Result<DateTime<Utc>> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            locked(&mut tx, owner, id).await?;
            let until = (tx.dialect().clock().plus)(&overlap.to_string());
            let until: DateTime<Utc> = query_scalar(&sql::rotate(&until))
                .bind(owner.as_str())
                .bind(id.as_str())
                .bind(sealed)
                .fetch_one(&mut tx)
                .await?;
            tx.commit().await?;
            Ok(until)
        })
        .await
    }

    async fn call_target(&self, id: &TriggerId) -> Result<Option<CallTarget>> {
        let mut conn = self.read().await?;
        let row: Option<TriggerRow> =
            query_as(&sql::select_by_id()).bind(id.as_str()).fetch_optional(&mut conn).await?;
        let Some(row) = row else { return Ok(None) };
        let now: DateTime<Utc> = query_scalar(&format!("SELECT {}", self.dialect().clock().now))
            .fetch_one(&mut conn)
            .await?;
        let still_valid = row.previous_until.is_some_and(|until| until > now);
        let mut sealed = vec![row.secret.clone()];
        sealed.extend(row.previous_secret.clone().filter(|_| still_valid));
        Ok(Some(CallTarget {
            owner: WorkspaceId::parse(&row.owner_id).map_err(Error::internal)?,
            trigger: TriggerRecord::try_from(&row)?,
            sealed,
            now,
        }))
    }

    async fn record_call(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &TriggerId,
        webhook_id: &str,
        make: CallMaker<'_>,
    ) -> Result<CallOutcome> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            // The agent first, then the trigger: the order every writer of both takes.
            let status: Option<String> =
                query_scalar(&crate::store::tasks::sql::agent_status(tx.dialect().lock()))
                    .bind(owner.as_str())
                    .bind(agent.as_str())
                    .fetch_optional(&mut tx)
                    .await?;
            let status: AgentStatus = status
                .ok_or_else(|| Error::not_found(Resource::Trigger, id.as_str()))?
                .parse()
                .map_err(Error::internal)?;
            let current = TriggerRecord::try_from(&locked(&mut tx, owner, id).await?)?;
            if let Some(task_id) = first_task(&mut tx, id, webhook_id).await? {
                return Ok(CallOutcome::Duplicate { task_id });
            }
            if !current.enabled {
                return Err(Error::conflict(
                    Conflict::TriggerDisabled,
                    format!("Trigger '{id}' is disabled; enable it to accept calls."),
                ));
            }
            let now = database_now(&mut tx).await?;
            let recent: i64 = query_scalar(sql::RECENT_CALLS)
                .bind(id.as_str())
                .bind(now - chrono::Duration::seconds(60))
                .fetch_one(&mut tx)
                .await?;
            if recent >= i64::from(CALLS_PER_MINUTE) {
                return Err(Error::QuotaExceeded {
                    quota: Quota::TriggerCallsPerMinute,
                    limit: u64::from(CALLS_PER_MINUTE),
                });
            }
            let (task, entries) = make(&current, now)?;
            let fresh = query(sql::INSERT_CALL)
                .bind(id.as_str())
                .bind(webhook_id)
                .bind(task.id.as_str())
                .bind(now)
                .execute(&mut tx)
                .await?;
            if fresh.rows_affected() == 0 {
                // Unreachable under the trigger's lock; kept so a key clash is never a 500.
                let task_id = first_task(&mut tx, id, webhook_id)
                    .await?
                    .ok_or_else(|| Error::internal("a trigger call row vanished"))?;
                return Ok(CallOutcome::Duplicate { task_id });
            }
            let (first, rest) =
                entries.split_first().ok_or_else(|| Error::internal("a call without its entry"))?;
            let created_at = write_task(&mut tx, owner, &task, first).await?;
            for (nth, entry) in rest.iter().enumerate() {
                insert_activity(&mut tx, owner, agent, entry, nth_instant(created_at, nth + 1))
                    .await?;
            }
            query(sql::COUNT_CALL).bind(id.as_str()).bind(now).execute(&mut tx).await?;
            if status == AgentStatus::Active {
                notify(&mut tx, &AgentKey::new(owner.as_str(), agent.as_str()));
            }
            tx.commit().await?;
            Ok(CallOutcome::Accepted { task_id: task.id, agent_status: status })
        })
        .await
    }
}

async fn first_task(tx: &mut Tx, id: &TriggerId, webhook_id: &str) -> Result<Option<TaskId>> {
    let task: Option<String> = query_scalar(sql::CALL_TASK)
        .bind(id.as_str())
        .bind(webhook_id)
        .fetch_optional(&mut *tx)
        .await?;
    task.map(|t| TaskId::parse(&t).map_err(Error::internal)).transpose()
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    const COLUMNS: &str = "SELECT owner_id, id, agent_id, name, title, description, priority, \
        enabled, secret, previous_secret, previous_until, calls, last_called_at, created_at, \
        updated_at FROM triggers";
    /// A row with its identity and secret; `UPDATE` fills the rest.
    pub(crate) const INSERT: &str = "INSERT INTO triggers (id, owner_id, agent_id, name, title, \
        priority, enabled, secret, calls, created_at, updated_at) \
        VALUES ($1, $2, $3, '', '', 0, false, $4, 0, $5, $5)";
    pub(crate) const UPDATE: &str = "UPDATE triggers SET name = $2, title = $3, \
        description = $4, priority = $5, enabled = $6, updated_at = $7 WHERE id = $1";
    pub(crate) fn select_one(lock: &str) -> String {
        format!("{COLUMNS} WHERE owner_id = $1 AND id = $2{lock}")
    }
    /// Any owner's: a call names only the trigger.
    pub(crate) fn select_by_id() -> String {
        format!("{COLUMNS} WHERE id = $1")
    }
    /// Through `triggers_by_owner`; `$2` an agent, or NULL for all.
    pub(crate) fn select_all() -> String {
        format!(
            "{COLUMNS} WHERE owner_id = $1 AND ($2 IS NULL OR agent_id = $2) \
             ORDER BY created_at, id"
        )
    }
    pub(crate) const COUNT: &str = "SELECT COUNT(*) FROM triggers WHERE owner_id = $1";
    pub(crate) const DELETE: &str = "DELETE FROM triggers WHERE owner_id = $1 AND id = $2";
    /// `until`: the database's clock plus the overlap.
    pub(crate) fn rotate(until: &str) -> String {
        format!(
            "UPDATE triggers SET previous_secret = secret, previous_until = {until}, \
             secret = $3 WHERE owner_id = $1 AND id = $2 RETURNING previous_until"
        )
    }
    pub(crate) const CALL_TASK: &str =
        "SELECT task_id FROM trigger_calls WHERE trigger_id = $1 AND webhook_id = $2";
    /// Through `trigger_calls_recent`.
    pub(crate) const RECENT_CALLS: &str =
        "SELECT COUNT(*) FROM trigger_calls WHERE trigger_id = $1 AND received_at > $2";
    pub(crate) const INSERT_CALL: &str = "INSERT INTO trigger_calls (trigger_id, webhook_id, \
        task_id, received_at) VALUES ($1, $2, $3, $4) \
        ON CONFLICT (trigger_id, webhook_id) DO NOTHING";
    pub(crate) const COUNT_CALL: &str =
        "UPDATE triggers SET calls = calls + 1, last_called_at = $2 WHERE id = $1";
}
