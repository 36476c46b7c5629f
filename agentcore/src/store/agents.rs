//! Agents and their activity log. Creating one checks the owner's plan under the owner's lock.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::activity::{ActivityEntry, ActivityQuery, NewActivity};
use crate::domain::agent::{Agent, AgentFilter, AgentId, AgentStatus, NewAgent};
use crate::domain::billing::AgentLimit;
use crate::domain::paging::TaskCursor;
use crate::domain::runtime::AgentKey;
use crate::domain::task::Task;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Conflict, Error, Resource, Result};
use crate::store::db::{SqlStore, Tx, query, query_as, query_scalar};
use crate::store::db_error;
use crate::store::rows::{self, ActivityRow, AgentRow};
use crate::store::shared::{
    insert_activity, lock_agent, notify, nth_instant, queue_post, require_agent, watched,
};
use crate::store::tasks::write_task;

/// Agents, each scoped to its owner, and their activity.
#[async_trait]
pub trait AgentStore: Send + Sync {
    /// Fails with `agent_exists` when the owner has an agent with this id, and with
    /// `plan_limit_reached` when the owner's plan allows no more agents (counted in the same
    /// transaction, under the owner's lock, so concurrent creations cannot pass the limit).
    async fn insert_agent(
        &self,
        owner: &WorkspaceId,
        agent: &NewAgent,
        at: DateTime<Utc>,
        activity: &NewActivity,
        limit: AgentLimit<'_>,
    ) -> Result<Agent>;
    /// Creates an agent with a first queued task, like [`Self::insert_agent`] and
    /// [`TaskStore::insert_task`](super::TaskStore::insert_task) in one transaction, except that a taken id is numbered instead of
    /// refused: `agent.id`, else the first free of `<id>-2`, `<id>-3`, ... The task is written
    /// for the agent as created, whatever its `agent_id` says.
    async fn insert_agent_with_task(
        &self,
        owner: &WorkspaceId,
        agent: &NewAgent,
        agent_activity: &NewActivity,
        task: &Task,
        task_activity: &NewActivity,
        limit: AgentLimit<'_>,
    ) -> Result<AgentWithTask>;
    async fn list_agents(&self, owner: &WorkspaceId, filter: &AgentFilter) -> Result<Vec<Agent>>;
    async fn agent(&self, owner: &WorkspaceId, id: &AgentId) -> Result<Agent>;
    /// The agent and its tasks in one statement (one snapshot: the counts and the tasks
    /// agree): every task, in no particular order, or with `finished_page` (a limit, and the
    /// cursor to continue after) every unfinished task and that page of finished tasks, the
    /// finished ones in the page's order (most recently finished first).
    async fn agent_with_tasks(
        &self,
        owner: &WorkspaceId,
        id: &AgentId,
        finished_page: Option<(u32, Option<&TaskCursor>)>,
    ) -> Result<(Agent, Vec<Task>)>;
    /// Locks the agent, lets `decide` compute the change, writes it with its activity.
    async fn update_agent(
        &self,
        owner: &WorkspaceId,
        id: &AgentId,
        decide: AgentDecision<'_>,
    ) -> Result<Agent>;
    /// Removes the agent with its backlog and activity, in one transaction.
    async fn delete_agent(&self, owner: &WorkspaceId, id: &AgentId) -> Result<()>;
    async fn activity(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        query: &ActivityQuery,
    ) -> Result<Vec<ActivityEntry>>;
    /// Writes one entry on its own (for events that change nothing else).
    async fn log_activity(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        entry: &NewActivity,
    ) -> Result<()>;
}

pub use crate::domain::change::AgentChange;

/// Decides an agent's change from its current row, or refuses. `Ok(None)`: nothing to write.
pub type AgentDecision<'a> = &'a (dyn Fn(&Agent) -> Result<Option<AgentChange>> + Send + Sync);

/// An agent created with its first task.
#[derive(Debug, Clone)]
pub struct AgentWithTask {
    pub agent: Agent,
    pub task: Task,
}

#[async_trait::async_trait]
impl<S: SqlStore> AgentStore for S {
    async fn insert_agent(
        &self,
        owner: &WorkspaceId,
        agent: &NewAgent,
        at: DateTime<Utc>,
        activity: &NewActivity,
        limit: crate::domain::billing::AgentLimit<'_>,
    ) -> Result<Agent> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            check_plan(&mut tx, owner, limit).await?;
            write_agent(&mut tx, owner, agent, &agent.id, at, activity).await?;
            let agent = select_agent_in(&mut tx, owner, &agent.id).await?;
            tx.commit().await?;
            Ok(agent)
        })
        .await
    }

    async fn insert_agent_with_task(
        &self,
        owner: &WorkspaceId,
        agent: &NewAgent,
        agent_activity: &NewActivity,
        task: &Task,
        task_activity: &NewActivity,
        limit: crate::domain::billing::AgentLimit<'_>,
    ) -> Result<AgentWithTask> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            check_plan(&mut tx, owner, limit).await?;
            let taken: Vec<String> = query_scalar(sql::AGENT_IDS_LIKE)
                .bind(owner.as_str())
                .bind(format!("{}%", agent.id))
                .fetch_all(&mut tx)
                .await?;
            let id = agent.id.first_free(&taken).map_err(Error::internal)?;
            write_agent(&mut tx, owner, agent, &id, task.created_at, agent_activity).await?;
            let task = Task { agent_id: id.clone(), ..task.clone() };
            write_task(&mut tx, owner, &task, task_activity).await?;
            let agent = select_agent_in(&mut tx, owner, &id).await?;
            tx.commit().await?;
            Ok(AgentWithTask { agent, task })
        })
        .await
    }

    async fn list_agents(&self, owner: &WorkspaceId, filter: &AgentFilter) -> Result<Vec<Agent>> {
        let rows: Vec<AgentRow> = query_as(&sql::select_agents())
            .bind(owner.as_str())
            .bind(filter.workspace.as_ref().map(|w| w.as_str()))
            .bind(filter.status.map(|s| s.as_str()))
            .fetch_all(&mut self.read().await?)
            .await?;
        rows::convert(rows)
    }

    async fn agent(&self, owner: &WorkspaceId, id: &AgentId) -> Result<Agent> {
        let row: Option<AgentRow> = query_as(&sql::select_agent())
            .bind(owner.as_str())
            .bind(id.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        row.ok_or_else(|| Error::not_found(Resource::Agent, id.as_str()))?.try_into()
    }

    async fn agent_with_tasks(
        &self,
        owner: &WorkspaceId,
        id: &AgentId,
        finished_page: Option<(u32, Option<&TaskCursor>)>,
    ) -> Result<(Agent, Vec<Task>)> {
        let after = finished_page.map(|(_, after)| after.is_some());
        let statement = sql::select_agent_with_tasks(after);
        let mut query = query(&statement).bind(owner.as_str()).bind(id.as_str());
        if let Some((limit, after)) = finished_page {
            query = query.bind(i64::from(limit));
            if let Some(after) = after {
                query = query.bind(after.at).bind(after.id.as_str());
            }
        }
        let rows = query.fetch_all(&mut self.read().await?).await?;
        let first = rows.get::<AgentRow>(0);
        let agent: Agent =
            first.ok_or_else(|| Error::not_found(Resource::Agent, id.as_str()))??.try_into()?;
        let mut tasks = Vec::with_capacity(rows.len());
        for index in 0..rows.len() {
            if let Some(row) = rows.get::<rows::ViewTaskRow>(index) {
                tasks.extend(row?.task(&agent.id)?);
            }
        }
        Ok((agent, tasks))
    }

    async fn update_agent(
        &self,
        owner: &WorkspaceId,
        id: &AgentId,
        decide: AgentDecision<'_>,
    ) -> Result<Agent> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_agent(&mut tx, owner, id).await?;
            let row: AgentRow = query_as(&sql::select_agent())
                .bind(owner.as_str())
                .bind(id.as_str())
                .fetch_one(&mut tx)
                .await?;
            let current = Agent::try_from(row)?;
            let Some(change) = decide(&current)? else {
                return Ok(current);
            };
            let next = &change.agent;
            query(sql::UPDATE_AGENT)
                .bind(owner.as_str())
                .bind(id.as_str())
                .bind(&next.name)
                .bind(next.status.as_str())
                .bind(next.status_before_vacation.map(|s| s.as_str()))
                .bind(&next.channel)
                .bind(&next.role_prompt)
                .bind(next.throttle_seconds)
                .bind(&next.workspace)
                .bind(&next.model)
                .bind(next.updated_at)
                .bind(serde_json::to_string(&next.tools).map_err(Error::internal)?)
                .bind(next.max_steps)
                .bind(serde_json::to_string(&next.mcp_servers).map_err(Error::internal)?)
                .bind(next.budget_monthly_usd.map(crate::domain::budget::micros))
                .bind(serde_json::to_string(&next.approval_tools).map_err(Error::internal)?)
                .bind(
                    next.fallback_models
                        .as_ref()
                        .map(serde_json::to_string)
                        .transpose()
                        .map_err(Error::internal)?,
                )
                .execute(&mut tx)
                .await?;
            for (nth, entry) in change.activity.iter().enumerate() {
                insert_activity(&mut tx, owner, id, entry, nth_instant(next.updated_at, nth))
                    .await?;
            }
            if let Some(post) = &change.post {
                queue_post(&mut tx, owner.as_str(), id.as_str(), post, next.updated_at).await?;
            }
            // The node running the agent must hear of any move, also away from `active`.
            if next.status == AgentStatus::Active || next.status != current.status {
                notify(&mut tx, &AgentKey::new(owner.as_str(), id.as_str()));
            }
            tx.commit().await?;
            Ok(change.agent)
        })
        .await
    }

    async fn delete_agent(&self, owner: &WorkspaceId, id: &AgentId) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_agent(&mut tx, owner, id).await?;
            query(sql::DELETE_AGENT)
                .bind(owner.as_str())
                .bind(id.as_str())
                .execute(&mut tx)
                .await?;
            notify(&mut tx, &AgentKey::new(owner.as_str(), id.as_str()));
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn activity(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        query: &ActivityQuery,
    ) -> Result<Vec<ActivityEntry>> {
        let mut conn = self.read().await?;
        require_agent(&mut conn, owner, agent, "").await?;
        // A page above `after` is read upwards from it, then turned newest first.
        let statement =
            if query.after.is_some() { sql::SELECT_ACTIVITY_UP } else { sql::SELECT_ACTIVITY };
        let mut rows: Vec<ActivityRow> = query_as(statement)
            .bind(owner.as_str())
            .bind(agent.as_str())
            .bind(query.before)
            .bind(i64::from(query.limit))
            .bind(query.after)
            .fetch_all(&mut conn)
            .await?;
        if query.after.is_some() {
            rows.reverse();
        }
        rows::convert(rows)
    }

    async fn log_activity(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        entry: &NewActivity,
    ) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_agent(&mut tx, owner, agent).await?;
            insert_activity(&mut tx, owner, agent, entry, crate::domain::now()).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

/// Locks the owner's row (so creations of one user queue up) and fails with
/// `plan_limit_reached` when the plan allows no more agents, or
/// `quota_exceeded` when the operator's agent quota does (without billing).
async fn check_plan(
    tx: &mut Tx,
    owner: &WorkspaceId,
    limit: crate::domain::billing::AgentLimit<'_>,
) -> Result<()> {
    let plan: Option<String> = query_scalar(&sql::user_plan(tx.dialect().lock()))
        .bind(owner.as_str())
        .fetch_optional(&mut *tx)
        .await?;
    let plan = plan.ok_or(Error::Unauthorized)?;
    if limit.of(&plan).is_none() {
        return Ok(());
    }
    let used: i64 =
        query_scalar(sql::COUNT_AGENTS).bind(owner.as_str()).fetch_one(&mut *tx).await?;
    limit.room(&plan, used).map_err(Error::from)
}

/// Inserts the agent under `id` with its `agent_created` entry.
async fn write_agent(
    tx: &mut Tx,
    owner: &WorkspaceId,
    agent: &NewAgent,
    id: &AgentId,
    at: DateTime<Utc>,
    activity: &NewActivity,
) -> Result<()> {
    query(sql::INSERT_AGENT)
        .bind(owner.as_str())
        .bind(id.as_str())
        .bind(agent.name.as_str())
        .bind(agent.channel.as_str())
        .bind(agent.role_prompt.as_str())
        .bind(agent.throttle_seconds.get())
        .bind(agent.workspace.as_ref().map(|w| w.as_str()))
        .bind(agent.model.as_ref().map(|m| m.as_str()))
        .bind(at)
        .bind(agent.tools.to_json())
        .bind(agent.max_steps.get())
        .bind(agent.mcp_servers.to_json())
        .bind(agent.budget.map(|b| b.micros()))
        .bind(agent.approval_tools.to_json())
        .bind(agent.fallback_models.as_ref().map(|f| f.to_json()))
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            db_error(
                e,
                Some(Error::conflict(
                    Conflict::AgentExists,
                    format!("You already have an agent with id '{id}'."),
                )),
            )
        })?;
    insert_activity(&mut *tx, owner, id, activity, at).await
}

async fn select_agent_in(tx: &mut Tx, owner: &WorkspaceId, id: &AgentId) -> Result<Agent> {
    let row: AgentRow = query_as(&sql::select_agent())
        .bind(owner.as_str())
        .bind(id.as_str())
        .fetch_one(&mut *tx)
        .await?;
    Agent::try_from(row)
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) const INSERT_AGENT: &str = "INSERT INTO agents \
        (owner_id, id, name, status, channel, role_prompt, throttle_seconds, workspace, model, \
        created_at, updated_at, tools, max_steps, mcp_servers, budget_micros, approval_tools, \
        fallback_models) \
        VALUES ($1, $2, $3, 'idle', $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13, $14, $15)";
    /// Agents with the counts of their backlog; callers add conditions on `a` after `WHERE`.
    /// The counts are the agent's `backlog_counts` row, which the database keeps with every
    /// change to a task (migration 13): one row per agent, however long its history.
    const AGENT_COLUMNS: &str = "SELECT a.id, a.name, a.status, a.status_before_vacation, \
        a.channel, a.role_prompt, a.throttle_seconds, a.workspace, a.model, a.tools, \
        a.max_steps, a.mcp_servers, a.budget_micros, a.approval_tools, a.fallback_models, a.created_at, \
        a.updated_at, \
        COALESCE(c.queued, 0) AS queued, COALESCE(c.in_progress, 0) AS in_progress, \
        COALESCE(c.awaiting_approval, 0) AS awaiting_approval, \
        COALESCE(c.complete, 0) AS complete, COALESCE(c.failed, 0) AS failed, \
        COALESCE(c.cancelled, 0) AS cancelled";
    const AGENT_FROM: &str = "FROM agents a \
        LEFT JOIN backlog_counts c ON c.owner_id = a.owner_id AND c.agent_id = a.id";
    pub(crate) fn select_agents() -> String {
        format!(
            "{AGENT_COLUMNS} {AGENT_FROM} WHERE a.owner_id = $1 \
             AND ($2 IS NULL OR a.workspace = $2) AND ($3 IS NULL OR a.status = $3) \
             ORDER BY a.created_at, a.id"
        )
    }
    pub(crate) fn select_agent() -> String {
        format!("{AGENT_COLUMNS} {AGENT_FROM} WHERE a.owner_id = $1 AND a.id = $2")
    }
    /// The agent with each of its tasks, one row a task (`t_`-named columns,
    /// `rows::ViewTaskRow`), or one row with null task columns for an agent without tasks; no
    /// row: no such agent. With `page`, only the unfinished tasks and a page of finished ones
    /// (`$3` the limit, after `$4`, `$5` a cursor's time and id when `after`), in page order.
    pub(crate) fn select_agent_with_tasks(page: Option<bool>) -> String {
        use crate::domain::paging::TaskOrder;
        use crate::store::tasks::sql::{TASK_COLUMNS, select_page};
        // Paged: in the finished page's order (unfinished tasks, with no finishing time, fall
        // first or last depending on the backend; the caller sorts them apart).
        let (tasks, order) = match page {
            None => ("tasks t ON t.owner_id = a.owner_id AND t.agent_id = a.id".to_owned(), ""),
            Some(after) => (
                format!(
                    "({TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 \
                      AND status IN ('queued', 'in_progress', 'awaiting_approval') \
                     UNION ALL SELECT * FROM ({}) f) t ON 1 = 1",
                    // (A finished page has no search: its `like` is not used.)
                    select_page(TaskOrder::Finished, after, "LIKE")
                ),
                " ORDER BY t.completed_at DESC, t.id DESC",
            ),
        };
        format!(
            "{AGENT_COLUMNS}, t.id AS t_id, t.title AS t_title, t.description AS t_description, \
             t.priority AS t_priority, t.status AS t_status, t.result AS t_result, \
             t.error AS t_error, t.attempts AS t_attempts, t.input_tokens AS t_input_tokens, \
             t.output_tokens AS t_output_tokens, t.cache_read_tokens AS t_cache_read_tokens, \
             t.cache_write_tokens AS t_cache_write_tokens, t.created_at AS t_created_at, \
             t.updated_at AS t_updated_at, t.started_at AS t_started_at, \
             t.completed_at AS t_completed_at, t.steps AS t_steps, t.depth AS t_depth, \
             t.created_by_agent AS t_created_by_agent, t.created_by_task AS t_created_by_task, \
             t.cancelled_by AS t_cancelled_by \
             {AGENT_FROM} LEFT JOIN {tasks} WHERE a.owner_id = $1 AND a.id = $2{order}"
        )
    }
    /// Moving into `active` clears the failure streak and the throttle wait: a start resumes at once.
    pub(crate) const UPDATE_AGENT: &str = "UPDATE agents SET name = $3, status = $4, \
        status_before_vacation = $5, channel = $6, role_prompt = $7, throttle_seconds = $8, \
        workspace = $9, model = $10, updated_at = $11, tools = $12, max_steps = $13, \
        mcp_servers = $14, budget_micros = $15, approval_tools = $16, fallback_models = $17, \
        failure_streak = CASE WHEN $4 = 'active' AND status <> 'active' THEN 0 ELSE failure_streak END, \
        next_run_at = CASE WHEN $4 = 'active' AND status <> 'active' THEN NULL ELSE next_run_at END \
        WHERE owner_id = $1 AND id = $2";
    pub(crate) const DELETE_AGENT: &str = "DELETE FROM agents WHERE owner_id = $1 AND id = $2";
    /// A page of the log between `$3` (before, may be null) and `$5` (after, may be null),
    /// newest first.
    pub(crate) const SELECT_ACTIVITY: &str = "SELECT action, details, task_id, created_at \
        FROM activity WHERE owner_id = $1 AND agent_id = $2 AND ($3 IS NULL OR created_at < $3) \
        AND ($5 IS NULL OR created_at > $5) ORDER BY id DESC LIMIT $4";
    /// The same page, oldest first: the `$4` entries just after `$5`.
    pub(crate) const SELECT_ACTIVITY_UP: &str = "SELECT action, details, task_id, created_at \
        FROM activity WHERE owner_id = $1 AND agent_id = $2 AND ($3 IS NULL OR created_at < $3) \
        AND ($5 IS NULL OR created_at > $5) ORDER BY id LIMIT $4";
    /// The owner's plan, locking the user row so agent creations of one user queue up.
    pub(crate) fn user_plan(lock: &str) -> String {
        format!("SELECT plan FROM workspaces WHERE id = $1{lock}")
    }
    pub(crate) const COUNT_AGENTS: &str = "SELECT COUNT(*) FROM agents WHERE owner_id = $1";
    /// The owner's agent ids starting with `$2` (a prefix followed by `%`), to number a new one.
    pub(crate) const AGENT_IDS_LIKE: &str =
        "SELECT id FROM agents WHERE owner_id = $1 AND id LIKE $2";
}
