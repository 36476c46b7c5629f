//! Rows as both backends return them, and their conversion into domain types.

use chrono::{DateTime, Utc};

use crate::domain::activity::ActivityEntry;
use crate::domain::agent::{Agent, AgentId, AgentStatus, AgentSummary};
use crate::domain::mcp::McpServerSet;
use crate::domain::steps::{Step, StepKind};
use crate::domain::task::{BacklogSummary, CreatedBy, Task, TaskId, TaskStatus, Usage};
use crate::domain::tools::ToolSet;
use crate::domain::trace::TraceContext;
use crate::domain::user::UserId;
use crate::error::{Error, Result};

use super::UserRecord;
use crate::domain::runtime::{AgentKey, AgentRun};

mod chat;

pub(super) use chat::{ConnectionRow, MappingRow, OutboxLaneRow, OutboxRow, post_body};

#[derive(Debug, sqlx::FromRow)]
pub(super) struct UserRow {
    id: String,
    email: String,
    email_key: String,
    name: String,
    password_hash: String,
    token_version: i64,
    created_at: DateTime<Utc>,
}

impl From<UserRow> for UserRecord {
    fn from(row: UserRow) -> Self {
        UserRecord {
            id: UserId::from_trusted(row.id),
            email: row.email,
            email_key: row.email_key,
            name: row.name,
            password_hash: row.password_hash,
            token_version: row.token_version,
            created_at: row.created_at,
        }
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct AgentRow {
    id: String,
    name: String,
    status: String,
    status_before_vacation: Option<String>,
    channel: String,
    role_prompt: String,
    throttle_seconds: f64,
    workspace: Option<String>,
    model: Option<String>,
    tools: String,
    max_steps: i32,
    mcp_servers: String,
    budget_micros: Option<i64>,
    approval_tools: String,
    fallback_models: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    queued: i64,
    in_progress: i64,
    awaiting_approval: i64,
    complete: i64,
    failed: i64,
    cancelled: i64,
}

impl TryFrom<AgentRow> for Agent {
    type Error = Error;

    fn try_from(row: AgentRow) -> Result<Self> {
        let summary = AgentSummary {
            id: AgentId::parse(&row.id).map_err(corrupt("agents.id"))?,
            name: row.name,
            status: row.status.parse().map_err(corrupt("agents.status"))?,
            channel: row.channel,
            throttle_seconds: row.throttle_seconds,
            workspace: row.workspace,
            model: row.model,
            tools: ToolSet::from_json(&row.tools).tools().to_vec(),
            max_steps: row.max_steps,
            mcp_servers: McpServerSet::from_json(&row.mcp_servers).servers().to_vec(),
            budget_monthly_usd: row.budget_micros.map(crate::domain::budget::usd),
            approval_tools: crate::domain::approval::ApprovalTools::from_json(&row.approval_tools)
                .names()
                .to_vec(),
            fallback_models: fallbacks_from_json(row.fallback_models.as_deref())?,
            created_at: row.created_at,
            updated_at: row.updated_at,
            backlog_summary: BacklogSummary {
                queued: row.queued,
                in_progress: row.in_progress,
                awaiting_approval: row.awaiting_approval,
                complete: row.complete,
                failed: row.failed,
                cancelled: row.cancelled,
            },
        };
        let status_before_vacation = row
            .status_before_vacation
            .map(|s| s.parse::<AgentStatus>())
            .transpose()
            .map_err(corrupt("agents.status_before_vacation"))?;
        Ok(Agent { summary, role_prompt: row.role_prompt, status_before_vacation })
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct TaskRow {
    id: String,
    agent_id: String,
    title: String,
    description: Option<String>,
    priority: i32,
    status: String,
    result: Option<String>,
    error: Option<String>,
    attempts: i32,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cache_read_tokens: i64,
    cache_write_tokens: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    completed_at: Option<DateTime<Utc>>,
    steps: i32,
    depth: i32,
    created_by_agent: Option<String>,
    created_by_task: Option<String>,
    cancelled_by: Option<String>,
    trace_id: Option<String>,
    parent_span_id: Option<String>,
}

impl TryFrom<TaskRow> for Task {
    type Error = Error;

    fn try_from(row: TaskRow) -> Result<Self> {
        let usage = usage(
            row.input_tokens,
            row.output_tokens,
            row.cache_read_tokens,
            row.cache_write_tokens,
        );
        Ok(Task {
            id: TaskId::parse(&row.id).map_err(corrupt("tasks.id"))?,
            agent_id: AgentId::parse(&row.agent_id).map_err(corrupt("tasks.agent_id"))?,
            title: row.title,
            description: row.description,
            priority: row.priority,
            status: row.status.parse::<TaskStatus>().map_err(corrupt("tasks.status"))?,
            result: row.result,
            error: row.error,
            attempts: row.attempts,
            created_at: row.created_at,
            updated_at: row.updated_at,
            started_at: row.started_at,
            completed_at: row.completed_at,
            usage,
            steps: row.steps,
            created_by: match (row.created_by_agent, row.created_by_task) {
                (Some(agent_id), Some(task_id)) => CreatedBy::Agent { agent_id, task_id },
                _ => CreatedBy::User,
            },
            depth: row.depth,
            cancelled_by: row.cancelled_by,
            trace: match (row.trace_id, row.parent_span_id) {
                (Some(trace), Some(span)) => TraceContext::parse(&trace, &span),
                _ => None,
            },
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct ActivityRow {
    action: String,
    details: String,
    task_id: Option<String>,
    created_at: DateTime<Utc>,
}

impl TryFrom<ActivityRow> for ActivityEntry {
    type Error = Error;

    fn try_from(row: ActivityRow) -> Result<Self> {
        Ok(ActivityEntry {
            timestamp: row.created_at,
            action: row.action.parse().map_err(corrupt("activity.action"))?,
            details: row.details,
            task_id: row.task_id,
        })
    }
}

/// Converts every row, failing on the first one the domain refuses.
pub(super) fn convert<R, T>(rows: Vec<R>) -> Result<Vec<T>>
where
    T: TryFrom<R, Error = Error>,
{
    rows.into_iter().map(T::try_from).collect()
}

/// A value the schema should have prevented: the database was changed behind our back.
/// A task's columns beside its agent's in the agent view (`t_` before each name; all null
/// for the one row of an agent without tasks).
#[derive(Debug, sqlx::FromRow)]
pub(super) struct ViewTaskRow {
    #[sqlx(rename = "t_id")]
    id: Option<String>,
    #[sqlx(rename = "t_title")]
    title: Option<String>,
    #[sqlx(rename = "t_description")]
    description: Option<String>,
    #[sqlx(rename = "t_priority")]
    priority: Option<i32>,
    #[sqlx(rename = "t_status")]
    status: Option<String>,
    #[sqlx(rename = "t_result")]
    result: Option<String>,
    #[sqlx(rename = "t_error")]
    error: Option<String>,
    #[sqlx(rename = "t_attempts")]
    attempts: Option<i32>,
    #[sqlx(rename = "t_input_tokens")]
    input_tokens: Option<i64>,
    #[sqlx(rename = "t_output_tokens")]
    output_tokens: Option<i64>,
    #[sqlx(rename = "t_cache_read_tokens")]
    cache_read_tokens: Option<i64>,
    #[sqlx(rename = "t_cache_write_tokens")]
    cache_write_tokens: Option<i64>,
    #[sqlx(rename = "t_created_at")]
    created_at: Option<DateTime<Utc>>,
    #[sqlx(rename = "t_updated_at")]
    updated_at: Option<DateTime<Utc>>,
    #[sqlx(rename = "t_started_at")]
    started_at: Option<DateTime<Utc>>,
    #[sqlx(rename = "t_completed_at")]
    completed_at: Option<DateTime<Utc>>,
    #[sqlx(rename = "t_steps")]
    steps: Option<i32>,
    #[sqlx(rename = "t_depth")]
    depth: Option<i32>,
    #[sqlx(rename = "t_created_by_agent")]
    created_by_agent: Option<String>,
    #[sqlx(rename = "t_created_by_task")]
    created_by_task: Option<String>,
    #[sqlx(rename = "t_cancelled_by")]
    cancelled_by: Option<String>,
}

impl ViewTaskRow {
    /// The task of agent `agent_id` on this row, if the row has one.
    pub(super) fn task(self, agent_id: &AgentId) -> Result<Option<Task>> {
        let Some(id) = self.id else { return Ok(None) };
        let missing = |column| move || corrupt(column)("null".into());
        Task::try_from(TaskRow {
            id,
            agent_id: agent_id.to_string(),
            title: self.title.ok_or_else(missing("tasks.title"))?,
            description: self.description,
            priority: self.priority.ok_or_else(missing("tasks.priority"))?,
            status: self.status.ok_or_else(missing("tasks.status"))?,
            result: self.result,
            error: self.error,
            attempts: self.attempts.ok_or_else(missing("tasks.attempts"))?,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_tokens.unwrap_or(0),
            cache_write_tokens: self.cache_write_tokens.unwrap_or(0),
            created_at: self.created_at.ok_or_else(missing("tasks.created_at"))?,
            updated_at: self.updated_at.ok_or_else(missing("tasks.updated_at"))?,
            started_at: self.started_at,
            completed_at: self.completed_at,
            steps: self.steps.ok_or_else(missing("tasks.steps"))?,
            depth: self.depth.ok_or_else(missing("tasks.depth"))?,
            created_by_agent: self.created_by_agent,
            created_by_task: self.created_by_task,
            cancelled_by: self.cancelled_by,
            trace_id: None,
            parent_span_id: None,
        })
        .map(Some)
    }
}

/// `agents.fallback_models`: a JSON array of model names, or null.
fn fallbacks_from_json(stored: Option<&str>) -> Result<Option<Vec<String>>> {
    stored
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| corrupt("agents.fallback_models")(e.to_string()))
}

pub(super) fn corrupt(column: &'static str) -> impl Fn(String) -> Error {
    move |problem| Error::internal(format!("unexpected value in {column}: {problem}"))
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct AgentRunRow {
    name: String,
    /// Aliased: a row of a join with the task (`RunAndTaskRow`) has the task's status too.
    #[sqlx(rename = "agent_status")]
    status: String,
    status_before_vacation: Option<String>,
    role_prompt: String,
    model: Option<String>,
    throttle_seconds: f64,
    lease_owner: Option<String>,
    next_run_at: Option<DateTime<Utc>>,
    failure_streak: i32,
    tools: String,
    max_steps: i32,
    mcp_servers: String,
    approval_tools: String,
    fallback_models: Option<String>,
    memory: String,
    /// The database's clock, read with the lock (one round trip fewer per task).
    pub(super) db_now: DateTime<Utc>,
}

/// An agent's run state and one of its tasks, read under the agent's lock (PostgreSQL's row
/// locks, SQLite's write lock): how a finish starts (`store/runtime/finish/`).
#[derive(Debug, sqlx::FromRow)]
pub(super) struct RunAndTaskRow {
    #[sqlx(flatten)]
    pub(super) run: AgentRunRow,
    #[sqlx(flatten)]
    pub(super) task: TaskRow,
    /// The node holding the task's lease.
    pub(super) task_lease_owner: Option<String>,
}

/// The agent's next queued task, with how many of its other tasks are in progress.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct NextTaskRow {
    #[sqlx(flatten)]
    pub(super) task: TaskRow,
    pub(super) running: i64,
}

impl TryFrom<AgentRunRow> for AgentRun {
    type Error = Error;

    fn try_from(row: AgentRunRow) -> Result<Self> {
        Ok(AgentRun {
            name: row.name,
            status: row.status.parse().map_err(corrupt("agents.status"))?,
            status_before_vacation: row
                .status_before_vacation
                .map(|s| s.parse())
                .transpose()
                .map_err(corrupt("agents.status_before_vacation"))?,
            role_prompt: row.role_prompt,
            model: row.model,
            throttle_seconds: row.throttle_seconds,
            lease_owner: row.lease_owner,
            next_run_at: row.next_run_at,
            failure_streak: row.failure_streak,
            tools: ToolSet::from_json(&row.tools).tools().to_vec(),
            max_steps: row.max_steps,
            mcp_servers: McpServerSet::from_json(&row.mcp_servers).servers().to_vec(),
            approval_tools: crate::domain::approval::ApprovalTools::from_json(&row.approval_tools)
                .names()
                .to_vec(),
            fallback_models: fallbacks_from_json(row.fallback_models.as_deref())?,
            memory: row.memory,
        })
    }
}

/// An agent named across users, as leases and wake-ups select it.
#[derive(sqlx::FromRow)]
pub(super) struct AgentKeyRow {
    owner_id: String,
    agent_id: String,
}

impl From<AgentKeyRow> for AgentKey {
    fn from(row: AgentKeyRow) -> Self {
        AgentKey::new(row.owner_id, row.agent_id)
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct StepRow {
    seq: i32,
    kind: String,
    tool: Option<String>,
    call_id: Option<String>,
    arguments: Option<String>,
    output: Option<String>,
    tool_calls: String,
    error: Option<String>,
    duration_ms: i64,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cache_read_tokens: i64,
    cache_write_tokens: i64,
    model: Option<String>,
    cost_micros: i64,
    unpriced: bool,
    compacted_through: Option<i32>,
    tried: String,
    created_at: DateTime<Utc>,
}

impl TryFrom<StepRow> for Step {
    type Error = Error;

    fn try_from(row: StepRow) -> Result<Self> {
        let kind = match row.kind.as_str() {
            "model" => StepKind::Model,
            "tool" => StepKind::Tool,
            "summary" => StepKind::Summary,
            "compaction" => StepKind::Compaction,
            other => return Err(corrupt("task_steps.kind")(format!("unknown kind '{other}'"))),
        };
        Ok(Step {
            seq: row.seq,
            kind,
            tool: row.tool,
            call_id: row.call_id,
            arguments: row.arguments,
            output: row.output,
            tool_calls: serde_json::from_str(&row.tool_calls)
                .map_err(|e| corrupt("task_steps.tool_calls")(e.to_string()))?,
            error: row.error,
            duration_ms: row.duration_ms,
            usage: usage(
                row.input_tokens,
                row.output_tokens,
                row.cache_read_tokens,
                row.cache_write_tokens,
            ),
            cost: row.model.map(|model| crate::domain::budget::StepCost {
                model,
                cost_micros: row.cost_micros,
                unpriced: row.unpriced,
            }),
            compacted_through: row.compacted_through,
            tried: serde_json::from_str(&row.tried)
                .map_err(|e| corrupt("task_steps.tried")(e.to_string()))?,
            created_at: row.created_at,
        })
    }
}

/// A step's or task's tokens: none until the provider reported some.
fn usage(
    input: Option<i64>,
    output: Option<i64>,
    cache_read: i64,
    cache_write: i64,
) -> Option<Usage> {
    let (input_tokens, output_tokens) = (input?, output?);
    Some(Usage {
        input_tokens,
        output_tokens,
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
    })
}
