//! A run's steps and what they change: each step is stored fenced on the task's lease, with its
//! effect (memory, a post, a new task) in the same transaction; and the agent's memory block.

use async_trait::async_trait;

use crate::domain::activity::{Action, NewActivity};
use crate::domain::agent::AgentId;
use crate::domain::runtime::AgentKey;
use crate::domain::steps::{Effect, RecentTask, Step, refuse_task, said};
use crate::domain::task::{Task, TaskId};
use crate::domain::tool_result::{ToolError, ToolResult};
use crate::domain::tools::{MemoryText, write_memory};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};
use crate::store::db::{Arg, SqlStore, Tx, query, query_as, query_scalar};
use crate::store::rows::{self, StepRow};
use crate::store::shared::{
    insert_activity, lock_agent, notify, queue_post, require_agent, watched, watched_if,
};
use crate::store::tasks::write_task;

/// Which run a step belongs to: the task, its agent, and the node that must still hold it.
#[derive(Debug, Clone, Copy)]
pub struct RunRef<'a> {
    pub agent: &'a AgentKey,
    pub task: &'a TaskId,
    pub node: &'a str,
}

/// What a run starts or resumes from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunContext {
    /// The task's stored steps, in order: a resumed run goes on after them.
    pub steps: Vec<Step>,
    /// The agent's last finished tasks, newest first.
    pub recent: Vec<RecentTask>,
}

#[async_trait]
pub trait StepStore: Send + Sync {
    /// The steps of a task, oldest first.
    async fn steps(&self, owner: &WorkspaceId, agent: &AgentId, task: &TaskId)
    -> Result<Vec<Step>>;
    /// The stored steps of a task in progress (read only when its count of steps, `stored`,
    /// is above 0) and the agent's `recent` last finished tasks (none asked: no query).
    async fn run_context(
        &self,
        agent: &AgentKey,
        task: &TaskId,
        stored: i32,
        recent: usize,
    ) -> Result<RunContext>;
    /// Stores `step` (numbered one after the task's last) with `effect` applied, only while
    /// the run's node holds the task. Returns the step as stored: an effect that was refused
    /// (memory full, no channel, no such agent) is the step's error. `None`: the lease is
    /// gone and nothing was written. `asked`: the model step that asked for this call, when
    /// it is not stored yet; it is stored first, in the same transaction (one commit a step
    /// fewer for a tool that runs locally).
    async fn record_step(
        &self,
        run: RunRef<'_>,
        asked: Option<&Step>,
        step: &Step,
        effect: Option<&Effect>,
    ) -> Result<Option<Step>>;
    async fn memory(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<String>;
    /// Replaces the memory block, with a `memory_updated` entry when it changed.
    async fn set_memory(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        memory: &MemoryText,
    ) -> Result<String>;
}

#[async_trait::async_trait]
impl<S: SqlStore> StepStore for S {
    async fn steps(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        task: &TaskId,
    ) -> Result<Vec<Step>> {
        let mut conn = self.read().await?;
        require_agent(&mut conn, owner, agent, "").await?;
        let found: Option<i32> = query_scalar(sql::TASK_EXISTS)
            .bind(owner.as_str())
            .bind(agent.as_str())
            .bind(task.as_str())
            .fetch_optional(&mut conn)
            .await?;
        found.ok_or_else(|| Error::not_found(Resource::Task, task.as_str()))?;
        let rows: Vec<StepRow> =
            query_as(sql::SELECT_STEPS).bind(task.as_str()).fetch_all(&mut conn).await?;
        rows::convert(rows)
    }

    async fn run_context(
        &self,
        agent: &AgentKey,
        task: &TaskId,
        stored: i32,
        recent: usize,
    ) -> Result<RunContext> {
        if stored == 0 && recent == 0 {
            return Ok(RunContext::default());
        }
        let mut conn = self.read().await?;
        let mut rows: Vec<StepRow> = Vec::new();
        if stored > 0 {
            rows = query_as(sql::SELECT_STEPS).bind(task.as_str()).fetch_all(&mut conn).await?;
        }
        let mut recent_rows: Vec<(String, String)> = Vec::new();
        if recent > 0 {
            recent_rows = query_as(sql::RECENT_TASKS)
                .bind(&agent.owner_id)
                .bind(&agent.agent_id)
                .bind(i64::try_from(recent).unwrap_or(i64::MAX))
                .fetch_all(&mut conn)
                .await?;
        }
        Ok(RunContext {
            steps: rows::convert(rows)?,
            recent: recent_rows
                .into_iter()
                .map(|(title, result)| RecentTask { title, result })
                .collect(),
        })
    }

    async fn record_step(
        &self,
        run: RunRef<'_>,
        asked: Option<&Step>,
        step: &Step,
        effect: Option<&Effect>,
    ) -> Result<Option<Step>> {
        watched_if(
            self.storage_health(),
            async {
                let mut tx = self.begin_write().await?;
                let owner = WorkspaceId::from_trusted(run.agent.owner_id.clone());
                let own = AgentId::parse(&run.agent.agent_id).map_err(Error::internal)?;
                // Agents before tasks, the lock order of every writer; two agents in
                // the order of their ids.
                let mut agents = vec![&own];
                if let Some(Effect::CreateTask { agent: target, .. }) = effect {
                    agents.push(target);
                    agents.sort();
                    agents.dedup();
                }
                for agent in agents.into_iter().filter(|_| effect.is_some()) {
                    match lock_agent(&mut tx, &owner, agent).await {
                        Ok(()) => {}
                        // This agent is gone: so is its task. Another one is the
                        // tool's error, told by `apply_effect`.
                        Err(Error::NotFound { .. }) if *agent == own => {
                            return Ok(None);
                        }
                        Err(Error::NotFound { .. }) => {}
                        Err(error) => return Err(error),
                    }
                }
                let counted: Vec<&Step> = asked.into_iter().chain([step]).collect();
                if !advance_task(&mut tx, run.task, run.node, &counted).await? {
                    return Ok(None);
                }
                if let Some(asked) = asked {
                    insert_step(&mut tx, run.task, asked).await?;
                }
                let mut stored = step.clone();
                if let Some(effect) = effect {
                    let outcome =
                        apply_effect(&mut tx, &owner, &own, run.task, effect, step).await?;
                    let (output, error) = match outcome {
                        Ok(text) => (Some(text), None),
                        Err(error) => (None, Some(error.to_string())),
                    };
                    stored.output = output;
                    stored.error = error;
                }
                insert_step(&mut tx, run.task, &stored).await?;
                tx.commit().await?;
                Ok(Some(stored))
            },
            Option::is_some,
        )
        .await
    }

    async fn memory(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<String> {
        let memory: Option<String> = query_scalar(&sql::memory(""))
            .bind(owner.as_str())
            .bind(agent.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        memory.ok_or_else(|| Error::not_found(Resource::Agent, agent.as_str()))
    }

    async fn set_memory(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        memory: &MemoryText,
    ) -> Result<String> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let current: Option<String> = query_scalar(&sql::memory(self.dialect().lock()))
                .bind(owner.as_str())
                .bind(agent.as_str())
                .fetch_optional(&mut tx)
                .await?;
            let current =
                current.ok_or_else(|| Error::not_found(Resource::Agent, agent.as_str()))?;
            if current != memory.as_str() {
                write_memory_in(&mut tx, owner, agent, memory.as_str(), "Memory edited.").await?;
            }
            tx.commit().await?;
            Ok(memory.as_str().to_owned())
        })
        .await
    }
}

/// Counts `steps` (consecutive, in order) on the task in one statement, only
/// while `node` holds it and the first of them is its next step; `false` when
/// the lease is gone.
pub(super) async fn advance_task(
    tx: &mut Tx,
    task: &TaskId,
    node: &str,
    steps: &[&Step],
) -> Result<bool> {
    let (Some(first), Some(last)) = (steps.first(), steps.last()) else {
        return Ok(true);
    };
    let usage =
        steps.iter().fold(None, |total, step| crate::domain::steps::add_usage(total, step.usage));
    let held = query(sql::ADVANCE_TASK)
        .bind(task.as_str())
        .bind(node)
        .bind(last.seq)
        .bind(usage.map(|u| u.input_tokens))
        .bind(usage.map(|u| u.output_tokens))
        .bind(last.created_at)
        .bind(first.seq - 1)
        .bind(usage.map_or(0, |u| u.cache_read_tokens))
        .bind(usage.map_or(0, |u| u.cache_write_tokens))
        .execute(&mut *tx)
        .await?;
    Ok(held.rows_affected() > 0)
}

/// Writes the step's row (after [`Self::advance_task`]).
pub(super) async fn insert_step(tx: &mut Tx, task: &TaskId, step: &Step) -> Result<()> {
    query(sql::INSERT_STEP).bind_all(step_args(task, step)?).execute(&mut *tx).await?;
    Ok(())
}

/// `INSERT_STEP`'s parameters, `$1` to `$20`.
pub(super) fn step_args<'q>(task: &'q TaskId, step: &'q Step) -> Result<Vec<Arg<'q>>> {
    Ok(vec![
        task.as_str().into(),
        step.seq.into(),
        step.kind.as_str().into(),
        (&step.tool).into(),
        (&step.call_id).into(),
        (&step.arguments).into(),
        (&step.output).into(),
        serde_json::to_string(&step.tool_calls).map_err(Error::internal)?.into(),
        (&step.error).into(),
        step.duration_ms.into(),
        step.usage.map(|u| u.input_tokens).into(),
        step.usage.map(|u| u.output_tokens).into(),
        step.created_at.into(),
        step.cost.as_ref().map(|c| c.model.as_str()).into(),
        step.cost.as_ref().map_or(0, |c| c.cost_micros).into(),
        step.cost.as_ref().is_some_and(|c| c.unpriced).into(),
        step.compacted_through.into(),
        step.usage.map_or(0, |u| u.cache_read_tokens).into(),
        step.usage.map_or(0, |u| u.cache_write_tokens).into(),
        serde_json::to_string(&step.tried).map_err(Error::internal)?.into(),
    ])
}

/// Applies a tool's effect inside its step's transaction: `Ok` is the result the
/// model is told, `Err` the tool error (nothing was changed).
async fn apply_effect(
    tx: &mut Tx,
    owner: &WorkspaceId,
    own: &AgentId,
    task: &TaskId,
    effect: &Effect,
    step: &Step,
) -> Result<ToolResult> {
    let at = step.created_at;
    match effect {
        Effect::Memory { replace, text } => {
            let current: String = query_scalar(&sql::memory(""))
                .bind(owner.as_str())
                .bind(own.as_str())
                .fetch_one(&mut *tx)
                .await?;
            let next = match write_memory(&current, *replace, text) {
                Ok(next) => next,
                Err(error) => return Ok(Err(ToolError::Failed(error))),
            };
            write_memory_in(tx, owner, own, &next, &said::memory_written(task)).await?;
            Ok(Ok(said::memory_saved(&next)))
        }
        Effect::Post(post) => {
            if queue_post(&mut *tx, owner.as_str(), own.as_str(), post, at).await? {
                Ok(Ok(said::POSTED.into()))
            } else {
                Ok(Err(said::no_channel()))
            }
        }
        Effect::CreateTask { agent, task: new } => {
            let creator: Task = {
                let row: crate::store::rows::TaskRow =
                    query_as(&crate::store::tasks::sql::select_task(""))
                        .bind(owner.as_str())
                        .bind(own.as_str())
                        .bind(task.as_str())
                        .fetch_one(&mut *tx)
                        .await?;
                row.try_into()?
            };
            let created: i64 =
                query_scalar(sql::CREATED_BY_TASK).bind(task.as_str()).fetch_one(&mut *tx).await?;
            if let Some(refused) = refuse_task(creator.depth, created) {
                return Ok(Err(refused));
            }
            match require_agent(&mut *tx, owner, agent, "").await {
                Ok(()) => {}
                Err(Error::NotFound { .. }) => {
                    return Ok(Err(ToolError::failed(said::no_such_agent(agent.as_str()))));
                }
                Err(error) => return Err(error),
            }
            let created = Task::delegated(agent, new.clone(), own.as_str(), &creator, at);
            write_task(tx, owner, &created, &said::task_created(&created, own)).await?;
            notify(tx, &AgentKey::new(owner.as_str(), agent.as_str()));
            Ok(Ok(said::task_queued(&created, agent)))
        }
    }
}

async fn write_memory_in(
    tx: &mut Tx,
    owner: &WorkspaceId,
    agent: &AgentId,
    memory: &str,
    details: &str,
) -> Result<()> {
    let at = crate::domain::now();
    query(sql::SET_MEMORY)
        .bind(owner.as_str())
        .bind(agent.as_str())
        .bind(memory)
        .execute(&mut *tx)
        .await?;
    let entry = NewActivity::new(Action::MemoryUpdated, details);
    insert_activity(&mut *tx, owner, agent, &entry, at).await
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) const TASK_EXISTS: &str =
        "SELECT 1 FROM tasks WHERE owner_id = $1 AND agent_id = $2 AND id = $3";
    pub(crate) const SELECT_STEPS: &str = "SELECT seq, kind, tool, call_id, arguments, output, \
        tool_calls, error, duration_ms, input_tokens, output_tokens, cache_read_tokens, \
        cache_write_tokens, model, cost_micros, unpriced, compacted_through, \
        COALESCE(tried, '[]') AS tried, created_at FROM task_steps WHERE task_id = $1 ORDER BY seq";
    pub(crate) const RECENT_TASKS: &str = "SELECT title, result FROM tasks \
        WHERE owner_id = $1 AND agent_id = $2 AND status = 'complete' AND result IS NOT NULL \
        ORDER BY completed_at DESC LIMIT $3";
    /// Counts steps on the task up to `$3`, only while `$2` holds it and has counted `$7` so
    /// far; tokens add up into the task's usage (the cache's, `$8` and `$9`, 0 when none).
    pub(crate) const ADVANCE_TASK: &str = "UPDATE tasks SET steps = $3, \
        input_tokens = CASE WHEN $4 IS NULL THEN input_tokens ELSE COALESCE(input_tokens, 0) + $4 END, \
        output_tokens = CASE WHEN $5 IS NULL THEN output_tokens ELSE COALESCE(output_tokens, 0) + $5 END, \
        cache_read_tokens = cache_read_tokens + $8, cache_write_tokens = cache_write_tokens + $9, \
        updated_at = $6 \
        WHERE id = $1 AND lease_owner = $2 AND status = 'in_progress' AND steps = $7";
    /// `INSERT_STEP` up to its values.
    macro_rules! insert_step_columns {
        () => {
            "INSERT INTO task_steps (task_id, seq, kind, tool, call_id, arguments, output, \
             tool_calls, error, duration_ms, input_tokens, output_tokens, created_at, model, \
             cost_micros, unpriced, compacted_through, cache_read_tokens, cache_write_tokens, \
             tried)"
        };
    }
    pub(crate) const INSERT_STEP_COLUMNS: &str = insert_step_columns!();
    pub(crate) const INSERT_STEP: &str = concat!(
        insert_step_columns!(),
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
         $18, $19, $20)"
    );
    /// How many tasks a task's run created so far.
    pub(crate) const CREATED_BY_TASK: &str =
        "SELECT COUNT(*) FROM tasks WHERE created_by_task = $1";
    pub(crate) fn memory(lock: &str) -> String {
        format!("SELECT memory FROM agents WHERE owner_id = $1 AND id = $2{lock}")
    }
    pub(crate) const SET_MEMORY: &str =
        "UPDATE agents SET memory = $3 WHERE owner_id = $1 AND id = $2";
}
