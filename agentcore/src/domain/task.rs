//! The backlog: tasks an agent works through one at a time.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::agent::AgentId;
use super::text;

generated_id!(
    /// A task's id: a UUID v7 in its hyphenated text form.
    TaskId
);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Queued,
    InProgress,
    /// Stopped at a tool call until a person approves or denies it.
    AwaitingApproval,
    Complete,
    Failed,
    /// A person stopped it before it ended (`cancelled_by` says who).
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::AwaitingApproval => "awaiting_approval",
            TaskStatus::Complete => "complete",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the task ended (complete, failed or cancelled): nothing more happens to it.
    pub fn is_finished(self) -> bool {
        matches!(self, TaskStatus::Complete | TaskStatus::Failed | TaskStatus::Cancelled)
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for TaskStatus {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "queued" => Ok(TaskStatus::Queued),
            "in_progress" => Ok(TaskStatus::InProgress),
            "awaiting_approval" => Ok(TaskStatus::AwaitingApproval),
            "complete" => Ok(TaskStatus::Complete),
            "failed" => Ok(TaskStatus::Failed),
            "cancelled" => Ok(TaskStatus::Cancelled),
            _ => Err(
                "must be one of queued, in_progress, awaiting_approval, complete, failed, cancelled"
                    .into(),
            ),
        }
    }
}

text::text_newtype!(
    /// 1 to 200 characters on one line.
    TaskTitle,
    |v| text::non_blank_line(v, 200)
);

text::text_newtype!(
    /// Up to 20,000 characters, line breaks allowed.
    TaskDescription,
    |v| text::text(v, 0, 20_000)
);

/// A 32-bit integer; higher runs first, ties in creation order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Priority(i32);

impl Priority {
    pub fn parse(value: i64) -> Result<Self, String> {
        i32::try_from(value)
            .map(Self)
            .map_err(|_| "must be an integer from -2147483648 to 2147483647".into())
    }

    pub fn get(self) -> i32 {
        self.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    pub title: TaskTitle,
    pub description: Option<TaskDescription>,
    pub priority: Priority,
}

/// A partial update of a queued task. `description: Some(None)` clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskPatch {
    pub title: Option<TaskTitle>,
    pub description: Option<Option<TaskDescription>>,
    pub priority: Option<Priority>,
}

/// Token counts reported by the model provider for a step or a task. The four counts never
/// overlap: `input_tokens` are the prompt's tokens read neither from nor into the provider's
/// prompt cache, so the prompt was `input_tokens + cache_read_tokens + cache_write_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    /// Prompt tokens priced at the model's input rate.
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Prompt tokens read from the provider's cache (Anthropic's `cache_read_input_tokens`,
    /// OpenAI's `cached_tokens`), priced at the cache-read rate.
    #[serde(default)]
    pub cache_read_tokens: i64,
    /// Prompt tokens written into the provider's cache (Anthropic's
    /// `cache_creation_input_tokens`), priced at the cache-write rate.
    #[serde(default)]
    pub cache_write_tokens: i64,
}

impl Usage {
    /// Tokens without any cache reported.
    pub fn new(input_tokens: i64, output_tokens: i64) -> Self {
        Self { input_tokens, output_tokens, ..Self::default() }
    }

    /// Both counts added, each saturating.
    pub fn plus(self, more: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(more.input_tokens),
            output_tokens: self.output_tokens.saturating_add(more.output_tokens),
            cache_read_tokens: self.cache_read_tokens.saturating_add(more.cache_read_tokens),
            cache_write_tokens: self.cache_write_tokens.saturating_add(more.cache_write_tokens),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Task {
    pub id: TaskId,
    pub agent_id: AgentId,
    pub title: String,
    pub description: Option<String>,
    pub priority: i32,
    pub status: TaskStatus,
    pub result: Option<String>,
    pub error: Option<String>,
    pub attempts: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub usage: Option<Usage>,
    /// Model and tool calls of its run so far.
    pub steps: i32,
    pub created_by: CreatedBy,
    /// 0 for a person's task; one more than its creator's for a task an agent created.
    pub depth: i32,
    /// Who cancelled it: a person's email, or `discord:<user>` for a Discord button.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
    /// The trace its runs continue: the span that added it (a request, a schedule's look, a
    /// run that delegated it), when tracing was on. Not part of the API.
    #[serde(skip)]
    pub trace: Option<super::trace::TraceContext>,
}

/// Who added a task: a person, or an agent while it ran one of its tasks (delegation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CreatedBy {
    User,
    Agent { agent_id: String, task_id: String },
}

/// The deepest chain of delegation: a task an agent created at this depth may not create more.
pub const MAX_DEPTH: i32 = 3;

impl Task {
    /// A task just added to `agent`'s backlog: queued, never run.
    pub fn queued(agent: &AgentId, task: NewTask, at: DateTime<Utc>) -> Self {
        Self {
            id: TaskId::generate(),
            agent_id: agent.clone(),
            title: task.title.into_inner(),
            description: task.description.map(TaskDescription::into_inner),
            priority: task.priority.get(),
            status: TaskStatus::Queued,
            result: None,
            error: None,
            attempts: 0,
            created_at: at,
            updated_at: at,
            started_at: None,
            completed_at: None,
            usage: None,
            steps: 0,
            created_by: CreatedBy::User,
            depth: 0,
            cancelled_by: None,
            trace: None,
        }
    }

    /// A task an agent created while running `by` (of agent `by_agent`): one level deeper.
    pub fn delegated(
        agent: &AgentId,
        task: NewTask,
        by_agent: &str,
        by: &Task,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            created_by: CreatedBy::Agent {
                agent_id: by_agent.to_owned(),
                task_id: by.id.as_str().to_owned(),
            },
            depth: by.depth.saturating_add(1),
            ..Self::queued(agent, task, at)
        }
    }
}

/// How many tasks of an agent are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BacklogSummary {
    pub queued: i64,
    pub in_progress: i64,
    /// Waiting for a person to approve or deny a tool call.
    pub awaiting_approval: i64,
    pub complete: i64,
    pub failed: i64,
    pub cancelled: i64,
}

/// In progress first, then those awaiting approval (oldest first), then queued in run order
/// (priority, then age), then finished ones newest first.
pub fn sort_backlog(tasks: &mut [Task]) {
    let rank = |task: &Task| match task.status {
        TaskStatus::InProgress => 0,
        TaskStatus::AwaitingApproval => 1,
        TaskStatus::Queued => 2,
        TaskStatus::Complete | TaskStatus::Failed | TaskStatus::Cancelled => 3,
    };
    tasks.sort_by(|a, b| {
        rank(a).cmp(&rank(b)).then_with(|| match a.status {
            TaskStatus::InProgress | TaskStatus::AwaitingApproval => {
                a.started_at.cmp(&b.started_at).then_with(|| a.id.cmp(&b.id))
            }
            TaskStatus::Queued => b
                .priority
                .cmp(&a.priority)
                .then(a.created_at.cmp(&b.created_at))
                .then_with(|| a.id.cmp(&b.id)),
            TaskStatus::Complete | TaskStatus::Failed | TaskStatus::Cancelled => {
                b.completed_at.cmp(&a.completed_at).then(b.created_at.cmp(&a.created_at))
            }
        })
    });
}

/// When a task is created: at `requested`, unless the agent's latest task was created at or
/// after it; then one millisecond after that one (to the millisecond, rounded), so an agent's
/// tasks are in creation order by time and paging by it never splits a burst.
///
/// Milliseconds because SQLite computes the same rule inside the script that adds a task
/// (`store::tasks::sql::created_at`), and its date arithmetic has millisecond precision.
pub fn creation_time(requested: DateTime<Utc>, latest: Option<DateTime<Utc>>) -> DateTime<Utc> {
    match latest {
        Some(latest) if latest >= requested => {
            let millis = (latest.timestamp_micros() + 500).div_euclid(1000) + 1;
            DateTime::from_timestamp_millis(millis).unwrap_or(latest)
        }
        _ => requested,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn a_task_is_created_when_asked_unless_the_latest_is_not_before() {
        let asked = at("2026-11-27T08:00:00.250Z");
        assert_eq!(creation_time(asked, None), asked);
        assert_eq!(creation_time(asked, Some(at("2026-11-27T08:00:00.249Z"))), asked);
        assert_eq!(
            creation_time(asked, Some(asked)),
            at("2026-11-27T08:00:00.251Z"),
            "the same instant moves on a millisecond"
        );
        assert_eq!(
            creation_time(asked, Some(at("2026-11-27T08:00:00.999700Z"))),
            at("2026-11-27T08:00:01.001Z"),
            "a later latest, rounded to its millisecond, then one more"
        );
        for latest in ["2026-11-27T08:00:00.250400Z", "2026-11-27T08:00:00.250600Z"] {
            assert!(creation_time(asked, Some(at(latest))) > at(latest), "after {latest}");
        }
    }
}
