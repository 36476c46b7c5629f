//! The step a task in progress is running now, from what is stored: its number is one more
//! than the last stored step's, and it began when that step was stored (or when the task
//! started, before any). It is a tool call while the last model step's calls are not all
//! answered by the tool steps after it, else a model call. A stream's `step.started` says the
//! same live (`live.js`); this is what a page shows when loaded, or without JavaScript. A task
//! awaiting approval waits on that same next call, which its page shows above Approve and Deny.

use chrono::{DateTime, Utc};
use serde::Serialize;

use agentcore::domain::steps::{Step, StepCall, StepKind};
use agentcore::domain::task::{Task, TaskStatus};

/// The step running now, as the task page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Running {
    pub seq: i32,
    /// `model call`, or `tool <name>`.
    pub what: String,
    pub since: DateTime<Utc>,
}

/// The step `task` runs now, given its stored `steps` in order; `None` unless in progress.
pub(super) fn running(task: &Task, steps: &[Step]) -> Option<Running> {
    if task.status != TaskStatus::InProgress {
        return None;
    }
    let last = steps.last();
    let since = last.map(|step| step.created_at).or(task.started_at)?;
    let seq = last.map_or(1, |step| step.seq + 1);
    let what = match next_call(steps) {
        Some(call) => format!("tool {}", call.name),
        None => "model call".to_owned(),
    };
    Some(Running { seq, what, since })
}

/// The tool call a task awaiting approval waits on, given its stored `steps`: the first call
/// of its last model step that no tool step has answered yet. `None` unless it is waiting.
pub(super) fn awaiting<'a>(task: &Task, steps: &'a [Step]) -> Option<&'a StepCall> {
    if task.status != TaskStatus::AwaitingApproval {
        return None;
    }
    next_call(steps)
}

/// The first call of the last model step not yet answered by a tool step after it.
fn next_call(steps: &[Step]) -> Option<&StepCall> {
    let asked = steps.iter().rposition(|step| step.kind == StepKind::Model)?;
    let answered = steps[asked + 1..].iter().filter(|s| s.kind == StepKind::Tool).count();
    steps[asked].tool_calls.get(answered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(second: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 1, 1, 12, 0, second).unwrap()
    }

    fn task(status: TaskStatus) -> Task {
        let mut task: Task = serde_json::from_value(serde_json::json!({
            "id": "0194e3a0-0000-7000-8000-000000000000", "agent_id": "writer", "title": "T",
            "description": null, "priority": 0, "status": "in_progress", "result": null,
            "error": null, "attempts": 1, "created_at": at(0), "updated_at": at(1),
            "started_at": at(1), "completed_at": null, "usage": null, "steps": 0,
            "created_by": {"type": "user"}, "depth": 0,
        }))
        .unwrap();
        task.status = status;
        task
    }

    fn step(seq: i32, kind: StepKind, calls: &[&str], second: u32) -> Step {
        Step {
            seq,
            kind,
            tool: (kind == StepKind::Tool).then(|| "memory".to_owned()),
            call_id: None,
            arguments: None,
            output: None,
            tool_calls: calls
                .iter()
                .map(|name| StepCall {
                    id: format!("call-{name}"),
                    name: (*name).to_owned(),
                    arguments: "{}".into(),
                })
                .collect(),
            error: None,
            duration_ms: 800,
            usage: None,
            cost: None,
            compacted_through: None,
            tried: Vec::new(),
            created_at: at(second),
        }
    }

    #[test]
    fn before_any_step_the_first_model_call_runs_since_the_start() {
        let shown = running(&task(TaskStatus::InProgress), &[]).unwrap();
        assert_eq!(shown, Running { seq: 1, what: "model call".into(), since: at(1) });
    }

    #[test]
    fn the_calls_a_model_step_asked_for_run_in_order_then_the_model_again() {
        let task = task(TaskStatus::InProgress);
        let mut steps = vec![step(1, StepKind::Model, &["memory", "http_fetch"], 3)];
        let first = running(&task, &steps).unwrap();
        assert_eq!((first.seq, first.what.as_str(), first.since), (2, "tool memory", at(3)));
        steps.push(step(2, StepKind::Tool, &[], 4));
        let second = running(&task, &steps).unwrap();
        assert_eq!((second.seq, second.what.as_str(), second.since), (3, "tool http_fetch", at(4)));
        steps.push(step(3, StepKind::Tool, &[], 6));
        let third = running(&task, &steps).unwrap();
        assert_eq!((third.seq, third.what.as_str(), third.since), (4, "model call", at(6)));
    }

    #[test]
    fn a_task_awaiting_approval_waits_on_its_first_unanswered_call() {
        let waiting = task(TaskStatus::AwaitingApproval);
        let mut steps = vec![step(1, StepKind::Model, &["memory", "http_fetch"], 3)];
        assert_eq!(awaiting(&waiting, &steps).map(|c| c.name.as_str()), Some("memory"));
        steps.push(step(2, StepKind::Tool, &[], 4));
        assert_eq!(awaiting(&waiting, &steps).map(|c| c.name.as_str()), Some("http_fetch"));
        assert_eq!(awaiting(&task(TaskStatus::InProgress), &steps), None);
    }

    #[test]
    fn only_a_task_in_progress_runs_a_step() {
        let steps = [step(1, StepKind::Model, &["memory"], 3)];
        for status in [
            TaskStatus::Queued,
            TaskStatus::AwaitingApproval,
            TaskStatus::Complete,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ] {
            assert_eq!(running(&task(status), &steps), None, "{status:?}");
        }
    }
}
