//! The backlog: tasks of one agent, changed under the agent's lock.

use async_trait::async_trait;

use crate::domain::activity::NewActivity;
use crate::domain::agent::{AgentId, AgentStatus};
use crate::domain::task::{Task, TaskId, TaskStatus};
use crate::domain::user::UserId;
use crate::error::Result;

/// Tasks, each scoped to its owner and agent.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Adds a task; returns its agent's status (an active agent has work to wake up for).
    async fn insert_task(
        &self,
        owner: &UserId,
        task: &Task,
        activity: &NewActivity,
    ) -> Result<AgentStatus>;
    async fn tasks(
        &self,
        owner: &UserId,
        agent: &AgentId,
        status: Option<TaskStatus>,
    ) -> Result<Vec<Task>>;
    async fn task(&self, owner: &UserId, agent: &AgentId, id: &TaskId) -> Result<Task>;
    /// Locks the task, lets `decide` compute the change, writes it with its activity.
    /// Returns the task as written (or as it was, when deleted).
    async fn update_task(
        &self,
        owner: &UserId,
        agent: &AgentId,
        id: &TaskId,
        decide: TaskDecision<'_>,
    ) -> Result<Task>;
}

pub use crate::domain::change::{TaskChange, TaskWrite};

/// Decides a task's change from its current row, or refuses.
pub type TaskDecision<'a> = &'a (dyn Fn(&Task) -> Result<TaskChange> + Send + Sync);

/// Implements [`TaskStore`] for a backend (see [`super::shared`]).
macro_rules! task_store {
    ($store:ty, $db:ty) => {
        const _: () = {
            use crate::domain::activity::NewActivity;
            use crate::domain::agent::{AgentId, AgentStatus};
            use crate::domain::runtime::AgentKey;
            use crate::domain::task::{Task, TaskId, TaskStatus};
            use crate::domain::user::UserId;
            use crate::error::{Error, Resource, Result};
            use crate::store::rows::{self, TaskRow};
            use crate::store::shared::{nth_instant, watched};
            use crate::store::tasks::sql;
            use crate::store::{TaskDecision, TaskWrite};

            #[async_trait::async_trait]
            impl $crate::store::TaskStore for $store {
                async fn insert_task(
                    &self,
                    owner: &UserId,
                    task: &Task,
                    activity: &NewActivity,
                ) -> Result<AgentStatus> {
                    watched(self.storage_health(), async {
                        let mut tx = self.begin_write().await?;
                        let status: Option<String> =
                            sqlx::query_scalar(&sql::agent_status(<$store>::LOCK))
                                .bind(owner.as_str())
                                .bind(task.agent_id.as_str())
                                .fetch_optional(&mut *tx)
                                .await?;
                        let status: AgentStatus = status
                            .ok_or_else(|| {
                                Error::not_found(Resource::Agent, task.agent_id.as_str())
                            })?
                            .parse()
                            .map_err(Error::internal)?;
                        Self::write_task(&mut tx, owner, task, activity).await?;
                        if status == AgentStatus::Active {
                            Self::notify(
                                &mut tx,
                                &AgentKey::new(owner.as_str(), task.agent_id.as_str()),
                            )
                            .await?;
                        }
                        tx.commit().await?;
                        Ok(status)
                    })
                    .await
                }

                async fn tasks(
                    &self,
                    owner: &UserId,
                    agent: &AgentId,
                    status: Option<TaskStatus>,
                ) -> Result<Vec<Task>> {
                    let mut conn = self.reader().acquire().await?;
                    Self::require_agent(&mut conn, owner, agent, "").await?;
                    let rows: Vec<TaskRow> = sqlx::query_as(&sql::select_tasks())
                        .bind(owner.as_str())
                        .bind(agent.as_str())
                        .bind(status.map(|s| s.as_str()))
                        .fetch_all(&mut *conn)
                        .await?;
                    rows::convert(rows)
                }

                async fn task(&self, owner: &UserId, agent: &AgentId, id: &TaskId) -> Result<Task> {
                    let mut conn = self.reader().acquire().await?;
                    Self::require_agent(&mut conn, owner, agent, "").await?;
                    let row: Option<TaskRow> = sqlx::query_as(&sql::select_task(""))
                        .bind(owner.as_str())
                        .bind(agent.as_str())
                        .bind(id.as_str())
                        .fetch_optional(&mut *conn)
                        .await?;
                    row.ok_or_else(|| Error::not_found(Resource::Task, id.as_str()))?.try_into()
                }

                async fn update_task(
                    &self,
                    owner: &UserId,
                    agent: &AgentId,
                    id: &TaskId,
                    decide: TaskDecision<'_>,
                ) -> Result<Task> {
                    watched(self.storage_health(), async {
                        let mut tx = self.begin_write().await?;
                        Self::lock_agent(&mut tx, owner, agent).await?;
                        let row: Option<TaskRow> = sqlx::query_as(&sql::select_task(Self::LOCK))
                            .bind(owner.as_str())
                            .bind(agent.as_str())
                            .bind(id.as_str())
                            .fetch_optional(&mut *tx)
                            .await?;
                        let current = Task::try_from(
                            row.ok_or_else(|| Error::not_found(Resource::Task, id.as_str()))?,
                        )?;
                        let change = decide(&current)?;
                        let at = $crate::domain::now();
                        let written = match change.write {
                            TaskWrite::Delete => {
                                sqlx::query(sql::DELETE_TASK)
                                    .bind(owner.as_str())
                                    .bind(agent.as_str())
                                    .bind(id.as_str())
                                    .execute(&mut *tx)
                                    .await?;
                                current
                            }
                            TaskWrite::Update(task) => {
                                sqlx::query(sql::UPDATE_TASK)
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
                                    .execute(&mut *tx)
                                    .await?;
                                if task.steps == 0 {
                                    // A retry starts its run afresh.
                                    sqlx::query(sql::DELETE_STEPS)
                                        .bind(id.as_str())
                                        .execute(&mut *tx)
                                        .await?;
                                }
                                if task.status == TaskStatus::Queued {
                                    Self::notify(
                                        &mut tx,
                                        &AgentKey::new(owner.as_str(), agent.as_str()),
                                    )
                                    .await?;
                                }
                                *task
                            }
                        };
                        for (nth, entry) in change.activity.iter().enumerate() {
                            Self::insert_activity(
                                &mut tx,
                                owner,
                                agent,
                                entry,
                                nth_instant(at, nth),
                            )
                            .await?;
                        }
                        tx.commit().await?;
                        Ok(written)
                    })
                    .await
                }
            }

            impl $store {
                /// Inserts a queued task with its `task_added` entry.
                async fn write_task(
                    tx: &mut sqlx::Transaction<'static, $db>,
                    owner: &UserId,
                    task: &Task,
                    activity: &NewActivity,
                ) -> Result<()> {
                    let creator = match &task.created_by {
                        $crate::domain::task::CreatedBy::Agent { agent_id, task_id } => {
                            Some((agent_id.as_str(), task_id.as_str()))
                        }
                        $crate::domain::task::CreatedBy::User => None,
                    };
                    sqlx::query(sql::INSERT_TASK)
                        .bind(task.id.as_str())
                        .bind(owner.as_str())
                        .bind(task.agent_id.as_str())
                        .bind(&task.title)
                        .bind(&task.description)
                        .bind(task.priority)
                        .bind(task.created_at)
                        .bind(task.depth)
                        .bind(creator.map(|(agent, _)| agent))
                        .bind(creator.map(|(_, task)| task))
                        .execute(&mut **tx)
                        .await?;
                    Self::insert_activity(tx, owner, &task.agent_id, activity, task.created_at)
                        .await
                }
            }
        };
    };
}
pub(super) use task_store;

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) const TASK_COLUMNS: &str = "SELECT id, agent_id, title, description, priority, status, result, \
        error, attempts, input_tokens, output_tokens, created_at, updated_at, started_at, \
        completed_at, steps, depth, created_by_agent, created_by_task FROM tasks";
    pub(crate) const INSERT_TASK: &str = "INSERT INTO tasks \
        (id, owner_id, agent_id, title, description, priority, status, attempts, created_at, \
        updated_at, depth, created_by_agent, created_by_task) \
        VALUES ($1, $2, $3, $4, $5, $6, 'queued', 0, $7, $7, $8, $9, $10)";
    pub(crate) fn select_tasks() -> String {
        format!(
            "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND ($3 IS NULL OR status = $3)"
        )
    }
    pub(crate) fn select_task(lock: &str) -> String {
        format!("{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND id = $3{lock}")
    }
    pub(crate) const UPDATE_TASK: &str = "UPDATE tasks SET title = $4, description = $5, \
        priority = $6, status = $7, result = $8, error = $9, attempts = $10, input_tokens = $11, \
        output_tokens = $12, updated_at = $13, started_at = $14, completed_at = $15, steps = $16 \
        WHERE owner_id = $1 AND agent_id = $2 AND id = $3";
    pub(crate) const DELETE_STEPS: &str = "DELETE FROM task_steps WHERE task_id = $1";
    pub(crate) const DELETE_TASK: &str =
        "DELETE FROM tasks WHERE owner_id = $1 AND agent_id = $2 AND id = $3";
    /// The agent's status, locking the row when `lock` is the backend's row-lock suffix.
    pub(crate) fn agent_status(lock: &str) -> String {
        format!("SELECT status FROM agents WHERE owner_id = $1 AND id = $2{lock}")
    }
}
