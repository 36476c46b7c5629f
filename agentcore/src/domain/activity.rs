//! The activity log: what happened to an agent, newest first.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The kinds of entry. The words are part of the API (docs/api.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Action {
    AgentCreated,
    AgentUpdated,
    AgentStarted,
    AgentStopped,
    VacationStarted,
    VacationEnded,
    StatusChanged,
    TaskAdded,
    TaskUpdated,
    TaskDeleted,
    TaskRetried,
    TaskStarted,
    TaskCompleted,
    TaskFailed,
    /// A person cancelled the task (who, in the details).
    TaskCancelled,
    AgentError,
    MessageSent,
    PostFailed,
    MemoryUpdated,
    ScheduleFired,
    ScheduleSkipped,
    ScheduleMissed,
    /// A budget reached its warning share this month.
    BudgetWarning,
    /// A run stopped before a model call that could cross a budget.
    BudgetExhausted,
    /// A run stopped at a tool call that needs a person's approval.
    ApprovalRequested,
    /// The call was approved (by whom, in the details).
    ToolApproved,
    /// The call was denied, or nobody answered in time.
    ToolDenied,
    /// Someone used a slash command in Discord.
    CommandUsed,
    /// A signed call to one of the agent's triggers (`POST /hooks/{trigger_id}`) arrived.
    TriggerCalled,
}

impl Action {
    pub const ALL: [Action; 29] = [
        Action::AgentCreated,
        Action::AgentUpdated,
        Action::AgentStarted,
        Action::AgentStopped,
        Action::VacationStarted,
        Action::VacationEnded,
        Action::StatusChanged,
        Action::TaskAdded,
        Action::TaskUpdated,
        Action::TaskDeleted,
        Action::TaskRetried,
        Action::TaskStarted,
        Action::TaskCompleted,
        Action::TaskFailed,
        Action::TaskCancelled,
        Action::AgentError,
        Action::MessageSent,
        Action::PostFailed,
        Action::MemoryUpdated,
        Action::ScheduleFired,
        Action::ScheduleSkipped,
        Action::ScheduleMissed,
        Action::BudgetWarning,
        Action::BudgetExhausted,
        Action::ApprovalRequested,
        Action::ToolApproved,
        Action::ToolDenied,
        Action::CommandUsed,
        Action::TriggerCalled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::AgentCreated => "agent_created",
            Action::AgentUpdated => "agent_updated",
            Action::AgentStarted => "agent_started",
            Action::AgentStopped => "agent_stopped",
            Action::VacationStarted => "vacation_started",
            Action::VacationEnded => "vacation_ended",
            Action::StatusChanged => "status_changed",
            Action::TaskAdded => "task_added",
            Action::TaskUpdated => "task_updated",
            Action::TaskDeleted => "task_deleted",
            Action::TaskRetried => "task_retried",
            Action::TaskStarted => "task_started",
            Action::TaskCompleted => "task_completed",
            Action::TaskFailed => "task_failed",
            Action::TaskCancelled => "task_cancelled",
            Action::AgentError => "agent_error",
            Action::MessageSent => "message_sent",
            Action::PostFailed => "post_failed",
            Action::MemoryUpdated => "memory_updated",
            Action::ScheduleFired => "schedule_fired",
            Action::ScheduleSkipped => "schedule_skipped",
            Action::ScheduleMissed => "schedule_missed",
            Action::BudgetWarning => "budget_warning",
            Action::BudgetExhausted => "budget_exhausted",
            Action::ApprovalRequested => "approval_requested",
            Action::ToolApproved => "tool_approved",
            Action::ToolDenied => "tool_denied",
            Action::CommandUsed => "command_used",
            Action::TriggerCalled => "trigger_called",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Action {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        Action::ALL
            .into_iter()
            .find(|action| action.as_str() == value)
            .ok_or_else(|| format!("unknown activity action '{value}'"))
    }
}

/// An entry to write: what happened, in a sentence, and the task it concerns if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewActivity {
    pub action: Action,
    pub details: String,
    pub task_id: Option<String>,
}

impl NewActivity {
    pub fn new(action: Action, details: impl Into<String>) -> Self {
        Self { action, details: details.into(), task_id: None }
    }

    pub fn for_task(action: Action, task_id: &str, details: impl Into<String>) -> Self {
        Self { action, details: details.into(), task_id: Some(task_id.to_owned()) }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ActivityEntry {
    pub timestamp: DateTime<Utc>,
    pub action: Action,
    pub details: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// Which page of the log to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityQuery {
    pub limit: u32,
    /// Only entries older than this: the page below one that ended here.
    pub before: Option<DateTime<Utc>>,
    /// Only entries newer than this, the `limit` nearest to it: the page above one that
    /// started here. Either way a page is newest first.
    pub after: Option<DateTime<Utc>>,
}

impl ActivityQuery {
    pub const DEFAULT_LIMIT: u32 = 30;
    /// Read a request's `limit` with [`super::paging::parse_limit`].
    pub const MAX_LIMIT: u32 = super::paging::MAX_LIMIT;
}

impl Default for ActivityQuery {
    fn default() -> Self {
        Self { limit: Self::DEFAULT_LIMIT, before: None, after: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_reads_back_from_its_word() {
        for action in Action::ALL {
            assert_eq!(action.as_str().parse::<Action>().unwrap(), action);
            assert_eq!(serde_json::to_value(action).unwrap(), action.as_str());
        }
    }
}
