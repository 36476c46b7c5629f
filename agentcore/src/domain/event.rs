//! Events: what a stream of an owner's agents tells as it happens (`GET /api/events`).
//!
//! Nearly every event is made from data the service keeps anyway: an activity entry (a task
//! added, started, finished or cancelled, an approval asked for or given, a status change) or
//! a stored step of a run. Each has an `id`, its number among its owner's events, in the order
//! they were committed: a client that reconnects with the last id it saw gets what followed,
//! each event once. Two kinds are live only, told to the streams open at the moment and never
//! stored: a step starting, and `resync`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::activity::{Action, ActivityEntry};
use super::agent::AgentId;
use super::runtime::cut;
use super::steps::{Step, StepKind};
use super::task::TaskId;

/// The most characters of a step's arguments, output or error an event carries (the whole
/// step is at `GET .../backlog/{task_id}/steps`).
pub const EVENT_TEXT_CHARS: usize = 2_000;

/// How long events are kept for clients that reconnect: older ones are pruned, and a client
/// whose last event is gone gets one `resync`.
pub const EVENT_WINDOW: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// The most events a reconnecting client is sent to catch up; more missed than this is a
/// `resync`.
pub const MOST_REPLAYED: i64 = 1_000;

/// What an event tells. The words are part of the API (docs/api.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EventType {
    #[serde(rename = "task.added")]
    TaskAdded,
    /// A failed task was queued again.
    #[serde(rename = "task.requeued")]
    TaskRequeued,
    #[serde(rename = "task.started")]
    TaskStarted,
    /// Live only: a model or tool call began.
    #[serde(rename = "step.started")]
    StepStarted,
    /// A model or tool call ended and was stored.
    #[serde(rename = "step.finished")]
    StepFinished,
    /// A model call failed for now and is tried again.
    #[serde(rename = "task.retrying")]
    TaskRetrying,
    #[serde(rename = "approval.requested")]
    ApprovalRequested,
    #[serde(rename = "approval.approved")]
    ApprovalApproved,
    #[serde(rename = "approval.denied")]
    ApprovalDenied,
    #[serde(rename = "task.completed")]
    TaskCompleted,
    #[serde(rename = "task.failed")]
    TaskFailed,
    #[serde(rename = "task.cancelled")]
    TaskCancelled,
    /// The agent's status changed (started, stopped, vacation, error).
    #[serde(rename = "agent.status")]
    AgentStatus,
    /// A budget reached its warning share this month.
    #[serde(rename = "budget.warning")]
    BudgetWarning,
    /// A run stopped before a model call that could cross a budget.
    #[serde(rename = "budget.exhausted")]
    BudgetExhausted,
    /// A schedule's fire time passed while nothing could queue its task.
    #[serde(rename = "schedule.missed")]
    ScheduleMissed,
    /// Any other activity entry.
    #[serde(rename = "activity")]
    Activity,
    /// Events were missed beyond what is kept: reload, then follow from this event's id.
    #[serde(rename = "resync")]
    Resync,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::TaskAdded => "task.added",
            EventType::TaskRequeued => "task.requeued",
            EventType::TaskStarted => "task.started",
            EventType::StepStarted => "step.started",
            EventType::StepFinished => "step.finished",
            EventType::TaskRetrying => "task.retrying",
            EventType::ApprovalRequested => "approval.requested",
            EventType::ApprovalApproved => "approval.approved",
            EventType::ApprovalDenied => "approval.denied",
            EventType::TaskCompleted => "task.completed",
            EventType::TaskFailed => "task.failed",
            EventType::TaskCancelled => "task.cancelled",
            EventType::AgentStatus => "agent.status",
            EventType::BudgetWarning => "budget.warning",
            EventType::BudgetExhausted => "budget.exhausted",
            EventType::ScheduleMissed => "schedule.missed",
            EventType::Activity => "activity",
            EventType::Resync => "resync",
        }
    }

    /// The event an activity entry of `action` is.
    pub fn of_action(action: Action) -> Self {
        match action {
            Action::TaskAdded => EventType::TaskAdded,
            Action::TaskRetried => EventType::TaskRequeued,
            Action::TaskStarted => EventType::TaskStarted,
            Action::TaskCompleted => EventType::TaskCompleted,
            Action::TaskFailed => EventType::TaskFailed,
            Action::TaskCancelled => EventType::TaskCancelled,
            Action::ApprovalRequested => EventType::ApprovalRequested,
            Action::ToolApproved => EventType::ApprovalApproved,
            Action::ToolDenied => EventType::ApprovalDenied,
            Action::AgentStarted
            | Action::AgentStopped
            | Action::VacationStarted
            | Action::VacationEnded
            | Action::StatusChanged
            | Action::AgentError => EventType::AgentStatus,
            Action::BudgetWarning => EventType::BudgetWarning,
            Action::BudgetExhausted => EventType::BudgetExhausted,
            Action::ScheduleMissed => EventType::ScheduleMissed,
            _ => EventType::Activity,
        }
    }

    /// Whether this event ends its task (the CLI's `--watch` stops there).
    pub fn ends_task(self) -> bool {
        matches!(self, EventType::TaskCompleted | EventType::TaskFailed | EventType::TaskCancelled)
    }
}

/// One event, as a stream sends it (the SSE `data`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Event {
    /// Its number among the owner's events (the SSE `id`); `null` for a live-only event.
    pub id: Option<i64>,
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The agent it concerns (`null` for `resync`).
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub at: DateTime<Utc>,
    /// The activity entry, for every event made from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<ActivityEntry>,
    /// `step.finished`: the stored step, its texts cut at 2,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    /// `step.started`: which call began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<StepStarted>,
    /// `task.retrying`: why, and when the next attempt is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

/// A model or tool call that began (live only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepStarted {
    /// The number the step will have when stored.
    pub seq: i32,
    pub kind: StepKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// A model call that failed for now and will be tried again, or that waits for a slot of its
/// provider's shared rate limit (`rate_limited`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Retry {
    /// The attempt that failed: 1 for the first; for a rate-limit wait, the attempts made so
    /// far (0 before the first), as a wait is no attempt.
    pub attempt: u32,
    /// True when the call waits for a slot of the shared rate limit (`models.rate_limits`)
    /// or for the provider's own `Retry-After`, for every agent at once: no attempt failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rate_limited: bool,
    /// The provider's HTTP status, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What went wrong, as the provider said it (keys taken out).
    pub reason: String,
    pub next_attempt_at: DateTime<Utc>,
}

/// Which of an owner's events a stream follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub agent: Option<AgentId>,
    pub task: Option<TaskId>,
}

impl EventFilter {
    pub fn admits(&self, event: &Event) -> bool {
        let agent_ok =
            self.agent.as_ref().is_none_or(|a| event.agent_id.as_deref() == Some(a.as_str()));
        let task_ok =
            self.task.as_ref().is_none_or(|t| event.task_id.as_deref() == Some(t.as_str()));
        agent_ok && task_ok
    }
}

impl Event {
    /// An event made from an activity entry.
    pub fn of_activity(id: i64, agent: String, entry: ActivityEntry) -> Self {
        Self {
            id: Some(id),
            kind: EventType::of_action(entry.action),
            agent_id: Some(agent),
            task_id: entry.task_id.clone(),
            at: entry.timestamp,
            activity: Some(entry),
            step: None,
            started: None,
            retry: None,
        }
    }

    /// A stored step's event, its texts cut to [`EVENT_TEXT_CHARS`].
    pub fn of_step(id: i64, agent: String, task: String, mut step: Step) -> Self {
        let shorten = |text: &mut Option<String>| {
            if let Some(text) = text {
                *text = cut(text, EVENT_TEXT_CHARS);
            }
        };
        shorten(&mut step.arguments);
        shorten(&mut step.output);
        shorten(&mut step.error);
        for call in &mut step.tool_calls {
            call.arguments = cut(&call.arguments, EVENT_TEXT_CHARS);
        }
        Self {
            id: Some(id),
            kind: EventType::StepFinished,
            agent_id: Some(agent),
            task_id: Some(task),
            at: step.created_at,
            activity: None,
            step: Some(step),
            started: None,
            retry: None,
        }
    }

    /// A model call's retry.
    pub fn of_retry(id: i64, agent: String, task: String, at: DateTime<Utc>, retry: Retry) -> Self {
        Self {
            id: Some(id),
            kind: EventType::TaskRetrying,
            agent_id: Some(agent),
            task_id: Some(task),
            at,
            activity: None,
            step: None,
            started: None,
            retry: Some(retry),
        }
    }

    /// A call that began (live only).
    pub fn step_started(agent: &str, task: &str, started: StepStarted) -> Self {
        Self {
            id: None,
            kind: EventType::StepStarted,
            agent_id: Some(agent.to_owned()),
            task_id: Some(task.to_owned()),
            at: super::now(),
            activity: None,
            step: None,
            started: Some(started),
            retry: None,
        }
    }

    /// Events were missed beyond what is kept: the client reloads and follows from `latest`.
    pub fn resync(latest: i64) -> Self {
        Self {
            id: Some(latest),
            kind: EventType::Resync,
            agent_id: None,
            task_id: None,
            at: super::now(),
            activity: None,
            step: None,
            started: None,
            retry: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_ending_action_ends_the_task_and_the_words_match_serde() {
        for action in Action::ALL {
            let kind = EventType::of_action(action);
            let ends = matches!(
                action,
                Action::TaskCompleted | Action::TaskFailed | Action::TaskCancelled
            );
            assert_eq!(kind.ends_task(), ends, "{action}");
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str(), "{action}");
        }
    }

    #[test]
    fn a_steps_texts_are_cut_for_its_event() {
        let long = "x".repeat(EVENT_TEXT_CHARS * 3);
        let step = Step {
            seq: 1,
            kind: StepKind::Tool,
            tool: Some("http_fetch".into()),
            call_id: Some("c1".into()),
            arguments: Some(long.clone()),
            output: Some(long.clone()),
            tool_calls: Vec::new(),
            error: None,
            duration_ms: 3,
            usage: None,
            cost: None,
            compacted_through: None,
            tried: Vec::new(),
            created_at: crate::domain::now(),
        };
        let event = Event::of_step(7, "writer".into(), "t".into(), step);
        let step = event.step.unwrap();
        assert_eq!(step.arguments.unwrap().chars().count(), EVENT_TEXT_CHARS);
        assert_eq!(step.output.unwrap().chars().count(), EVENT_TEXT_CHARS);
        assert_eq!(event.id, Some(7));
    }
}
