//! The backlog: tasks of one agent, changed under the agent's lock.

use async_trait::async_trait;

use crate::domain::activity::NewActivity;
use crate::domain::agent::{AgentId, AgentStatus};
use crate::domain::paging::TaskPage;
use crate::domain::runtime::AgentKey;
use crate::domain::task::{Task, TaskId, TaskStatus};
use crate::domain::trace::TraceContext;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};
use crate::store::db::{SqlStore, Tx, query, query_as, query_scalar};
use crate::store::rows::{self, TaskRow};
use crate::store::shared::{
    insert_activity, lock_agent, notify, nth_instant, queue_post, require_agent, watched,
};

/// Tasks, each scoped to its owner and agent.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Adds a task under its agent's lock; returns its agent's status (an active agent has
    /// work to wake up for) and the creation time stored, which is the task's own unless the
    /// agent has a task created at or after it (another node's clock, a write that waited for
    /// the lock): then it is a millisecond after that one, so creation order is commit order
    /// and pages by creation time never skip a task.
    async fn insert_task(
        &self,
        owner: &WorkspaceId,
        task: &Task,
        activity: &NewActivity,
    ) -> Result<AddedTask>;
    async fn tasks(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        status: Option<TaskStatus>,
    ) -> Result<Vec<Task>>;
    /// One page of the agent's tasks, in the page's order; `agent_not_found` when the owner
    /// has no such agent. Reads only the page's rows (an index in each order).
    async fn task_page(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        page: &TaskPage,
    ) -> Result<Vec<Task>>;
    async fn task(&self, owner: &WorkspaceId, agent: &AgentId, id: &TaskId) -> Result<Task>;
    /// How many tasks wait in the queue of `agent`, and of all the owner's agents (for quotas).
    async fn queued_counts(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<(i64, i64)>;
    /// Locks the task, lets `decide` compute the change, writes it with its activity.
    /// Returns the task as written (or as it was, when deleted).
    async fn update_task(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &TaskId,
        decide: TaskDecision<'_>,
    ) -> Result<Task>;
}

pub use crate::domain::change::{TaskChange, TaskWrite};

/// What [`TaskStore::insert_task`] wrote.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AddedTask {
    pub agent_status: AgentStatus,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Decides a task's change from its current row, or refuses.
pub type TaskDecision<'a> = &'a (dyn Fn(&Task) -> Result<TaskChange> + Send + Sync);

#[async_trait::async_trait]
impl<S: SqlStore> TaskStore for S {
    async fn insert_task(
        &self,
        owner: &WorkspaceId,
        task: &Task,
        activity: &NewActivity,
    ) -> Result<AddedTask> {
        watched(self.storage_health(), async {
            match (self.scripts(), self.adds()) {
                (Some(scripts), _) => add::by_script(scripts, owner, task, activity).await,
                (None, Some(lanes)) => add::by_lane(lanes, owner, task, activity).await,
                (None, None) => Err(Error::internal("the store has no way to add a task")),
            }
        })
        .await
    }

    async fn queued_counts(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<(i64, i64)> {
        let counts: (i64, i64) = query_as(sql::QUEUED_COUNTS)
            .bind(owner.as_str())
            .bind(agent.as_str())
            .fetch_one(&mut self.read().await?)
            .await?;
        Ok(counts)
    }

    async fn tasks(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        status: Option<TaskStatus>,
    ) -> Result<Vec<Task>> {
        let mut conn = self.read().await?;
        require_agent(&mut conn, owner, agent, "").await?;
        let rows: Vec<TaskRow> = query_as(&sql::select_tasks())
            .bind(owner.as_str())
            .bind(agent.as_str())
            .bind(status.map(|s| s.as_str()))
            .fetch_all(&mut conn)
            .await?;
        rows::convert(rows)
    }

    async fn task_page(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        page: &crate::domain::paging::TaskPage,
    ) -> Result<Vec<Task>> {
        use crate::domain::paging::TaskOrder;
        let mut conn = self.read().await?;
        require_agent(&mut conn, owner, agent, "").await?;
        let like = self.dialect().like_any_case();
        let statement = sql::select_page(page.order, page.after.is_some(), like);
        let mut query = query_as::<TaskRow>(&statement)
            .bind(owner.as_str())
            .bind(agent.as_str())
            .bind(i64::from(page.limit));
        if page.order != TaskOrder::Finished {
            query = query
                .bind(page.status.map(|s| s.as_str()))
                .bind(page.search.as_ref().map(|search| search.pattern()));
        }
        if let Some(after) = &page.after {
            query = query.bind(after.at).bind(after.id.as_str());
        }
        rows::convert(query.fetch_all(&mut conn).await?)
    }

    async fn task(&self, owner: &WorkspaceId, agent: &AgentId, id: &TaskId) -> Result<Task> {
        let mut conn = self.read().await?;
        require_agent(&mut conn, owner, agent, "").await?;
        let row: Option<TaskRow> = query_as(&sql::select_task(""))
            .bind(owner.as_str())
            .bind(agent.as_str())
            .bind(id.as_str())
            .fetch_optional(&mut conn)
            .await?;
        row.ok_or_else(|| Error::not_found(Resource::Task, id.as_str()))?.try_into()
    }

    async fn update_task(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &TaskId,
        decide: TaskDecision<'_>,
    ) -> Result<Task> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_agent(&mut tx, owner, agent).await?;
            let row: Option<TaskRow> = query_as(&sql::select_task(self.dialect().lock()))
                .bind(owner.as_str())
                .bind(agent.as_str())
                .bind(id.as_str())
                .fetch_optional(&mut tx)
                .await?;
            let current =
                Task::try_from(row.ok_or_else(|| Error::not_found(Resource::Task, id.as_str()))?)?;
            let change = decide(&current)?;
            let at = crate::domain::now();
            let written = match change.write {
                TaskWrite::Delete => {
                    query(sql::DELETE_TASK)
                        .bind(owner.as_str())
                        .bind(agent.as_str())
                        .bind(id.as_str())
                        .execute(&mut tx)
                        .await?;
                    current
                }
                TaskWrite::Update(task) => {
                    query(sql::UPDATE_TASK)
                        .bind(owner.as_str())
                        .bind(agent.as_str())
                        .bind(id.as_str())
                        .bind(&task.title)
                        .bind(&task.description)
                        .bind(task.priority)
                        .bind(task.status.as_str())
                        .bind(&task.result)
                        .bind(&task.error)
                        .bind(task.attempts)
                        .bind(task.usage.map(|u| u.input_tokens))
                        .bind(task.usage.map(|u| u.output_tokens))
                        .bind(task.updated_at)
                        .bind(task.started_at)
                        .bind(task.completed_at)
                        .bind(task.steps)
                        .bind(&task.cancelled_by)
                        .bind(task.usage.map_or(0, |u| u.cache_read_tokens))
                        .bind(task.usage.map_or(0, |u| u.cache_write_tokens))
                        .execute(&mut tx)
                        .await?;
                    if task.status == TaskStatus::Cancelled {
                        // A call it waited on can no longer be approved.
                        query(sql::CLOSE_APPROVALS)
                            .bind(id.as_str())
                            .bind(&task.cancelled_by)
                            .bind(at)
                            .execute(&mut tx)
                            .await?;
                    }
                    if task.steps == 0 {
                        // A retry starts its run afresh.
                        query(sql::DELETE_STEPS).bind(id.as_str()).execute(&mut tx).await?;
                    }
                    // Queued: a worker may claim it; cancelled: the one running it stops.
                    if matches!(task.status, TaskStatus::Queued | TaskStatus::Cancelled) {
                        notify(&mut tx, &AgentKey::new(owner.as_str(), agent.as_str()));
                    }
                    *task
                }
            };
            for (nth, entry) in change.activity.iter().enumerate() {
                insert_activity(&mut tx, owner, agent, entry, nth_instant(at, nth)).await?;
            }
            if let Some(post) = &change.post {
                queue_post(&mut tx, owner.as_str(), agent.as_str(), post, at).await?;
            }
            tx.commit().await?;
            Ok(written)
        })
        .await
    }
}

/// Inserts a queued task with its `task_added` entry; returns the creation time
/// stored: never at or before the agent's latest task's (see `insert_task`).
pub(super) async fn write_task(
    tx: &mut Tx,
    owner: &WorkspaceId,
    task: &Task,
    activity: &NewActivity,
) -> Result<chrono::DateTime<chrono::Utc>> {
    let latest: Option<chrono::DateTime<chrono::Utc>> = query_scalar(sql::LATEST_CREATED)
        .bind(owner.as_str())
        .bind(task.agent_id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
    let created_at = crate::domain::task::creation_time(task.created_at, latest);
    let (creator_agent, creator_task) = creator(task);
    let trace = trace_of(task);
    query(sql::INSERT_TASK)
        .bind(task.id.as_str())
        .bind(owner.as_str())
        .bind(task.agent_id.as_str())
        .bind(&task.title)
        .bind(&task.description)
        .bind(task.priority)
        .bind(created_at)
        .bind(task.depth)
        .bind(creator_agent)
        .bind(creator_task)
        .bind(trace.as_ref().map(TraceContext::trace_id))
        .bind(trace.as_ref().map(TraceContext::parent_span_id))
        .execute(&mut *tx)
        .await?;
    insert_activity(&mut *tx, owner, &task.agent_id, activity, created_at).await?;
    Ok(created_at)
}

/// The creating agent and task of a task an agent created; none for a person's.
fn creator(task: &Task) -> (Option<&str>, Option<&str>) {
    match &task.created_by {
        crate::domain::task::CreatedBy::Agent { agent_id, task_id } => {
            (Some(agent_id.as_str()), Some(task_id.as_str()))
        }
        crate::domain::task::CreatedBy::User => (None, None),
    }
}

/// The trace a new task's runs continue: its own when the caller chose one, else the span
/// adding it (the request, the schedule's look, the delegating run), when tracing is on.
fn trace_of(task: &Task) -> Option<TraceContext> {
    task.trace.clone().or_else(crate::otel::current)
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    /// From the counts kept beside the tasks: one row per agent of the owner.
    pub(crate) const QUEUED_COUNTS: &str = "SELECT \
        CAST(COALESCE(SUM(queued) FILTER (WHERE agent_id = $2), 0) AS BIGINT), \
        CAST(COALESCE(SUM(queued), 0) AS BIGINT) FROM backlog_counts WHERE owner_id = $1";
    /// A task's columns, as `TaskRow` reads them.
    macro_rules! task_columns {
        () => {
            "id, agent_id, title, description, priority, status, result, error, attempts, \
             input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, created_at, \
             updated_at, started_at, completed_at, steps, depth, created_by_agent, \
             created_by_task, cancelled_by, trace_id, parent_span_id"
        };
    }
    pub(crate) const TASK_COLUMNS_LIST: &str = task_columns!();
    pub(crate) const TASK_COLUMNS: &str = concat!("SELECT ", task_columns!(), " FROM tasks");
    pub(crate) const INSERT_TASK: &str = "INSERT INTO tasks \
        (id, owner_id, agent_id, title, description, priority, status, attempts, created_at, \
        updated_at, depth, created_by_agent, created_by_task, trace_id, parent_span_id) \
        VALUES ($1, $2, $3, $4, $5, $6, 'queued', 0, $7, $7, $8, $9, $10, $11, $12)";
    /// The agent's latest creation time (the `tasks_by_agent_created` index's last entry).
    pub(crate) const LATEST_CREATED: &str = "SELECT created_at FROM tasks \
        WHERE owner_id = $1 AND agent_id = $2 ORDER BY created_at DESC LIMIT 1";
    pub(crate) fn select_tasks() -> String {
        format!(
            "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND ($3 IS NULL OR status = $3)"
        )
    }
    /// A page in `order` (`$3` the limit; `$4` the status and `$5` a search's `LIKE` pattern,
    /// in either creation order, `like` its operator), continuing after a cursor's time and id (the
    /// last two parameters) when `after`.
    pub(crate) fn select_page(
        order: crate::domain::paging::TaskOrder,
        after: bool,
        like: &str,
    ) -> String {
        use crate::domain::paging::TaskOrder;
        let search = format!(
            "AND ($5 IS NULL OR title {like} $5 ESCAPE '\\' \
             OR COALESCE(description, '') {like} $5 ESCAPE '\\')"
        );
        match (order, after) {
            (TaskOrder::Created, false) => format!(
                "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND ($4 IS NULL OR status = $4) \
                 {search} ORDER BY created_at, id LIMIT $3"
            ),
            (TaskOrder::Created, true) => format!(
                "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND ($4 IS NULL OR status = $4) \
                 {search} AND (created_at, id) > ($6, $7) ORDER BY created_at, id LIMIT $3"
            ),
            (TaskOrder::Newest, false) => format!(
                "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND ($4 IS NULL OR status = $4) \
                 {search} ORDER BY created_at DESC, id DESC LIMIT $3"
            ),
            (TaskOrder::Newest, true) => format!(
                "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND ($4 IS NULL OR status = $4) \
                 {search} AND (created_at, id) < ($6, $7) ORDER BY created_at DESC, id DESC LIMIT $3"
            ),
            (TaskOrder::Finished, false) => format!(
                "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 {FINISHED} \
                 ORDER BY completed_at DESC, id DESC LIMIT $3"
            ),
            (TaskOrder::Finished, true) => format!(
                "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 {FINISHED} \
                 AND (completed_at, id) < ($4, $5) ORDER BY completed_at DESC, id DESC LIMIT $3"
            ),
        }
    }
    /// The condition of the `tasks_by_agent_finished` index, as a query must spell it.
    pub(crate) const FINISHED: &str = "AND status IN ('complete', 'failed', 'cancelled')";
    pub(crate) fn select_task(lock: &str) -> String {
        format!("{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND id = $3{lock}")
    }
    pub(crate) const UPDATE_TASK: &str = "UPDATE tasks SET title = $4, description = $5, \
        priority = $6, status = $7, result = $8, error = $9, attempts = $10, input_tokens = $11, \
        output_tokens = $12, updated_at = $13, started_at = $14, completed_at = $15, steps = $16, \
        cancelled_by = $17, cache_read_tokens = $18, cache_write_tokens = $19, \
        lease_owner = CASE WHEN $7 = 'cancelled' THEN NULL ELSE lease_owner END, \
        lease_until = CASE WHEN $7 = 'cancelled' THEN NULL ELSE lease_until END \
        WHERE owner_id = $1 AND agent_id = $2 AND id = $3";
    pub(crate) const DELETE_STEPS: &str = "DELETE FROM task_steps WHERE task_id = $1";
    /// A cancelled task's pending approvals, denied by whoever cancelled it (`$2`) at `$3`.
    pub(crate) const CLOSE_APPROVALS: &str = "UPDATE approvals SET status = 'denied', \
        decided_by = $2, decided_at = $3 WHERE task_id = $1 AND status = 'pending'";
    pub(crate) const DELETE_TASK: &str =
        "DELETE FROM tasks WHERE owner_id = $1 AND agent_id = $2 AND id = $3";
    /// The agent's status, locking the row when `lock` is the backend's row-lock suffix.
    pub(crate) fn agent_status(lock: &str) -> String {
        format!("SELECT status FROM agents WHERE owner_id = $1 AND id = $2{lock}")
    }
}

mod add;
