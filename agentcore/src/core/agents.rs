//! Agents: creating, reading, changing and removing them, and moving them between statuses.

use super::{Core, Principal};
use crate::domain::activity::{Action, NewActivity};
use crate::domain::agent::{
    Agent, AgentDetail, AgentFilter, AgentId, AgentPatch, AgentSummary, NewAgent,
};
use crate::domain::now;
use crate::domain::runtime::status_post;
use crate::domain::status::{StatusCommand, transition};
use crate::domain::task::{Task, TaskStatus};
use crate::error::Result;
use crate::store::AgentChange;

impl Core {
    /// Creates an agent in `idle`. Another agent of the caller with this id is `agent_exists`;
    /// one more than the caller's plan allows is `plan_limit_reached`.
    pub async fn create_agent(&self, who: &Principal, agent: NewAgent) -> Result<Agent> {
        let activity =
            NewActivity::new(Action::AgentCreated, format!("Agent '{}' created.", agent.name));
        self.store().insert_agent(&who.user_id, &agent, now(), &activity, self.plans()).await
    }

    /// The caller's agents, oldest first.
    pub async fn list_agents(
        &self,
        who: &Principal,
        filter: &AgentFilter,
    ) -> Result<Vec<AgentSummary>> {
        let agents = self.store().list_agents(&who.user_id, filter).await?;
        Ok(agents.into_iter().map(AgentSummary::from).collect())
    }

    /// One agent with its whole backlog.
    pub async fn agent(&self, who: &Principal, id: &AgentId) -> Result<AgentDetail> {
        let agent = self.store().agent(&who.user_id, id).await?;
        let mut backlog = self.store().tasks(&who.user_id, id, None).await?;
        sort_backlog(&mut backlog);
        Ok(AgentDetail { agent, backlog })
    }

    /// Changes the supplied fields. A `status` has the effects of the matching command.
    pub async fn update_agent(
        &self,
        who: &Principal,
        id: &AgentId,
        patch: AgentPatch,
    ) -> Result<Agent> {
        let agent = self
            .store()
            .update_agent(&who.user_id, id, &|current| Ok(apply_patch(current, &patch)))
            .await?;
        self.after_agent_change(&who.user_id, id);
        Ok(agent)
    }

    /// Removes the agent, its backlog, activity and mapping. A task in progress is abandoned.
    pub async fn delete_agent(&self, who: &Principal, id: &AgentId) -> Result<()> {
        self.store().delete_agent(&who.user_id, id).await?;
        self.wake_agent(&who.user_id, id);
        tracing::info!(user_id = %who.user_id, agent_id = %id, "agent deleted");
        Ok(())
    }

    /// `active` from any status. Idempotent.
    pub async fn start_agent(&self, who: &Principal, id: &AgentId) -> Result<Agent> {
        self.command(who, id, StatusCommand::Start).await
    }

    /// `idle`; the task in progress finishes. Idempotent.
    pub async fn stop_agent(&self, who: &Principal, id: &AgentId) -> Result<Agent> {
        self.command(who, id, StatusCommand::Stop).await
    }

    /// Toggles vacation (`None`) or sets it; ending it restores `active`, else `idle`.
    pub async fn set_vacation(
        &self,
        who: &Principal,
        id: &AgentId,
        enabled: Option<bool>,
    ) -> Result<Agent> {
        self.command(who, id, StatusCommand::Vacation(enabled)).await
    }

    async fn command(
        &self,
        who: &Principal,
        id: &AgentId,
        command: StatusCommand,
    ) -> Result<Agent> {
        let agent = self
            .store()
            .update_agent(&who.user_id, id, &|current| {
                let next = transition(current.status, current.status_before_vacation, command);
                Ok(next.activity.map(|entry| {
                    let agent = Agent {
                        status: next.status,
                        status_before_vacation: next.status_before_vacation,
                        updated_at: now(),
                        ..current.clone()
                    };
                    let post = Some(status_post(&agent.name, agent.status, &entry.details));
                    AgentChange { agent, activity: vec![entry], post }
                }))
            })
            .await?;
        self.after_agent_change(&who.user_id, id);
        Ok(agent)
    }
}

/// The agent after `patch`, with an `agent_updated` entry naming the changed fields and a
/// `status_changed` entry when the status moved; `None` when nothing changes.
fn apply_patch(current: &Agent, patch: &AgentPatch) -> Option<AgentChange> {
    let mut next = current.clone();
    let mut changed = Vec::new();
    let mut set = |field: &'static str, differs: bool| {
        if differs {
            changed.push(field);
        }
    };
    if let Some(name) = &patch.name {
        set("name", name.as_str() != next.name);
        next.name = name.as_str().to_owned();
    }
    if let Some(role_prompt) = &patch.role_prompt {
        set("role_prompt", role_prompt.as_str() != next.role_prompt);
        next.role_prompt = role_prompt.as_str().to_owned();
    }
    if let Some(channel) = &patch.channel {
        set("channel", channel.as_str() != next.channel);
        next.channel = channel.as_str().to_owned();
    }
    if let Some(workspace) = &patch.workspace {
        let workspace = owned(workspace);
        set("workspace", workspace != next.workspace);
        next.workspace = workspace;
    }
    if let Some(throttle) = patch.throttle_seconds {
        set("throttle_seconds", throttle.get() != next.throttle_seconds);
        next.throttle_seconds = throttle.get();
    }
    if let Some(model) = &patch.model {
        let model = owned(model);
        set("model", model != next.model);
        next.model = model;
    }
    let mut activity = Vec::new();
    if !changed.is_empty() {
        activity.push(NewActivity::new(
            Action::AgentUpdated,
            format!("Updated {}.", changed.join(", ")),
        ));
    }
    let mut post = None;
    if let Some(status) = patch.status {
        let moved =
            transition(current.status, current.status_before_vacation, StatusCommand::Set(status));
        next.status = moved.status;
        next.status_before_vacation = moved.status_before_vacation;
        if let Some(entry) = moved.activity {
            post = Some(status_post(&next.name, next.status, &entry.details));
            activity.push(entry);
        }
    }
    if activity.is_empty() {
        return None;
    }
    next.updated_at = now();
    Some(AgentChange { agent: next, activity, post })
}

fn owned<T: AsRef<str>>(value: &Option<T>) -> Option<String> {
    value.as_ref().map(|v| v.as_ref().to_owned())
}

/// In progress first, then queued in run order (priority, then age), then finished ones
/// newest first.
fn sort_backlog(tasks: &mut [Task]) {
    let rank = |task: &Task| match task.status {
        TaskStatus::InProgress => 0,
        TaskStatus::Queued => 1,
        TaskStatus::Complete | TaskStatus::Failed => 2,
    };
    tasks.sort_by(|a, b| {
        rank(a).cmp(&rank(b)).then_with(|| match a.status {
            TaskStatus::InProgress => a.started_at.cmp(&b.started_at),
            TaskStatus::Queued => b
                .priority
                .cmp(&a.priority)
                .then(a.created_at.cmp(&b.created_at))
                .then_with(|| a.id.cmp(&b.id)),
            TaskStatus::Complete | TaskStatus::Failed => {
                b.completed_at.cmp(&a.completed_at).then(b.created_at.cmp(&a.created_at))
            }
        })
    });
}
