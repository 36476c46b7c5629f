//! The approval gate in front of a tool call named in the agent's `approval_tools`: the first
//! time the run reaches the call it parks the task (the approval and its Discord message
//! stored with it, in one transaction); when the task is claimed again after the decision,
//! the call runs if approved, or its result is the denial.

use crate::domain::approval::{Approval, ApprovalStatus, denied_result, request_post};
use crate::domain::runtime::ClaimedTask;
use crate::domain::steps::{Step, StepCall};
use crate::domain::tool_result::ToolError;
use crate::store::RunRef;
use opentelemetry::KeyValue;

use super::Node;

/// What to do with a call that needs approval.
pub(super) enum Gate {
    /// Approved: run it.
    Run,
    /// Denied (or unanswered in time): this is its result.
    Denied(ToolError),
    /// Asked for now: the task waits, the run ends.
    Parked,
    /// The lease is gone, or the store failed: the run ends, and resumes from its stored
    /// steps when the task is claimed again.
    Lost,
    /// The database stayed out of reach: the run stops and its task runs again
    /// ([`super::ReadFailed::Interrupted`]).
    Interrupted,
}

/// Looks up the call's approval, asking for one (and parking the task) the first time;
/// `asked` is the model step that made the call, stored with the approval if it is not yet.
pub(super) async fn gate(
    node: &Node,
    run: RunRef<'_>,
    claimed: &ClaimedTask,
    call: &StepCall,
    asked: &mut Option<Step>,
) -> Gate {
    let store = node.core.run_store();
    let read = || store.approval_of_call(run.task, &call.id);
    match super::read_for_run(node, run.task, "read a call's approval", read).await {
        Ok(Some(approval)) => {
            let status = KeyValue::new("agentd.approval.status", approval.status.as_str());
            super::trace::approval_event("agentd.approval.decided", vec![status]);
            decided(&approval, run)
        }
        Ok(None) => park(node, run, claimed, call, asked).await,
        Err(super::ReadFailed::Interrupted) => Gate::Interrupted,
        // Logged by the read: the run ends, and resumes when the task is claimed again.
        Err(super::ReadFailed::Failed(_)) => Gate::Lost,
    }
}

/// What a decided approval means for its call.
fn decided(approval: &Approval, run: RunRef<'_>) -> Gate {
    match approval.status {
        ApprovalStatus::Approved => Gate::Run,
        ApprovalStatus::Denied => Gate::Denied(denied_result(approval.decided_by.as_deref())),
        // Parking writes the approval and the task's status together and a decision
        // requeues it with its status: a pending approval of a claimed task cannot be.
        ApprovalStatus::Pending => {
            tracing::error!(task = %run.task, "a claimed task has a pending approval");
            Gate::Lost
        }
    }
}

async fn park(
    node: &Node,
    run: RunRef<'_>,
    claimed: &ClaimedTask,
    call: &StepCall,
    asked: &mut Option<Step>,
) -> Gate {
    let timeout = node.config.approval_timeout;
    let at = crate::domain::now();
    let approval = Approval {
        id: uuid::Uuid::now_v7().to_string(),
        task_id: run.task.as_str().to_owned(),
        agent_id: claimed.task.agent_id.clone(),
        tool: call.name.clone(),
        arguments: serde_json::from_str(&call.arguments)
            .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone())),
        status: ApprovalStatus::Pending,
        decided_by: None,
        decided_at: None,
        expires_at: at + chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX),
        created_at: at,
        call_id: call.id.clone(),
    };
    let post = request_post(&approval, &claimed.task.title, &call.arguments, &duration(timeout));
    let parked = node
        .core
        .run_store()
        .park_task(run, asked.as_ref(), &approval, timeout.as_secs_f64(), &post)
        .await;
    match parked {
        Ok(true) => {
            asked.take();
            let id = KeyValue::new("agentd.approval.id", approval.id.clone());
            super::trace::approval_event("agentd.approval.requested", vec![id]);
            tracing::info!(task = %run.task, tool = %call.name, "task waits for approval");
            node.core.wake_outbox();
            let owner =
                crate::domain::workspace::WorkspaceId::from_trusted(run.agent.owner_id.clone());
            node.core.ring_events(&owner);
            Gate::Parked
        }
        Ok(false) => Gate::Lost,
        Err(error) => {
            tracing::warn!(%error, task = %run.task, "cannot park a task for approval");
            Gate::Lost
        }
    }
}

/// `24 hours`, `30 minutes`, `45 seconds`.
fn duration(timeout: std::time::Duration) -> String {
    let seconds = timeout.as_secs();
    let (count, unit) = if seconds >= 3600 && seconds.is_multiple_of(3600) {
        (seconds / 3600, "hour")
    } else if seconds >= 60 && seconds.is_multiple_of(60) {
        (seconds / 60, "minute")
    } else {
        (seconds, "second")
    };
    format!("{count} {unit}{}", if count == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    #[test]
    fn timeouts_are_said_in_their_largest_whole_unit() {
        assert_eq!(super::duration(std::time::Duration::from_secs(86_400)), "24 hours");
        assert_eq!(super::duration(std::time::Duration::from_secs(60)), "1 minute");
        assert_eq!(super::duration(std::time::Duration::from_secs(90)), "90 seconds");
    }
}
