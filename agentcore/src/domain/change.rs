//! What a command changes, decided from the current row: the store locks the row, hands it to
//! one of these rules and writes what comes back, with its activity and posts.

use chrono::{DateTime, Utc};

use super::activity::{Action, NewActivity};
use super::agent::{Agent, AgentPatch};
use super::chat::NewPost;
use super::runtime::status_post;
use super::status::{StatusCommand, transition};
use super::task::Task;

/// What an agent becomes after a command, what to log about it, and what to post to its
/// channel (queued only when the agent is mapped).
#[derive(Debug, Clone)]
pub struct AgentChange {
    pub agent: Agent,
    pub activity: Vec<NewActivity>,
    pub post: Option<NewPost>,
}

/// What happens to a task after a command.
#[derive(Debug, Clone)]
pub enum TaskWrite {
    Update(Box<Task>),
    Delete,
}

/// A task's change, the activity that tells of it, and what to post to the agent's channel
/// (queued only when the agent is mapped).
#[derive(Debug, Clone)]
pub struct TaskChange {
    pub write: TaskWrite,
    pub activity: Vec<NewActivity>,
    pub post: Option<NewPost>,
}

/// The agent after `patch`, with an `agent_updated` entry naming the changed fields and a
/// `status_changed` entry (and a post to its channel) when the status moved; `None` when
/// nothing changes.
pub fn patch_agent(current: &Agent, patch: &AgentPatch, at: DateTime<Utc>) -> Option<AgentChange> {
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
    if let Some(tools) = &patch.tools {
        set("tools", tools.tools() != next.tools);
        next.tools = tools.tools().to_vec();
    }
    if let Some(servers) = &patch.mcp_servers {
        set("mcp_servers", servers.servers() != next.mcp_servers);
        next.mcp_servers = servers.servers().to_vec();
    }
    if let Some(tools) = &patch.approval_tools {
        set("approval_tools", tools.names() != next.approval_tools);
        next.approval_tools = tools.names().to_vec();
    }
    if let Some(fallbacks) = &patch.fallback_models {
        let fallbacks = fallbacks.as_ref().map(super::fallback::FallbackModels::names);
        set("fallback_models", fallbacks != next.fallback_models);
        next.fallback_models = fallbacks;
    }
    if let Some(budget) = &patch.budget {
        let budget = budget.map(|b| super::budget::usd(b.micros()));
        set("budget_monthly_usd", budget != next.budget_monthly_usd);
        next.budget_monthly_usd = budget;
    }
    if let Some(max_steps) = patch.max_steps {
        set("max_steps", max_steps.get() != next.max_steps);
        next.max_steps = max_steps.get();
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
    next.updated_at = at;
    Some(AgentChange { agent: next, activity, post })
}

fn owned<T: AsRef<str>>(value: &Option<T>) -> Option<String> {
    value.as_ref().map(|v| v.as_ref().to_owned())
}
