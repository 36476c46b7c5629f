//! Agents: creating, reading, changing and removing them, and moving them between statuses.

use std::sync::Mutex;

use serde_json::json;

use super::{Core, Principal};
use crate::domain::activity::{Action, NewActivity};
use crate::domain::agent::{
    Agent, AgentDetail, AgentFilter, AgentId, AgentPatch, AgentSummary, ModelName, NewAgent,
};
use crate::domain::change::{AgentChange, patch_agent};
use crate::domain::fallback::FallbackModels;
use crate::domain::now;
use crate::domain::paging::{TaskCursor, TaskOrder, TaskPage, TasksPage};
use crate::domain::runtime::status_post;
use crate::domain::status::{StatusCommand, transition};
use crate::domain::task::{TaskStatus, sort_backlog};
use crate::domain::workspace::Need;
use crate::error::{Result, ValidationErrors};

impl Core {
    /// Creates an agent in `idle`. Another agent of the caller with this id is `agent_exists`;
    /// one more than the caller's plan allows is `plan_limit_reached`.
    pub async fn create_agent(&self, who: &Principal, agent: NewAgent) -> Result<Agent> {
        who.require(Need::Work)?;
        self.check_model(agent.model.as_ref())?;
        self.check_fallbacks(agent.fallback_models.as_ref())?;
        self.check_mcp_servers(&who.workspace, Some(&agent.mcp_servers)).await?;
        let activity =
            NewActivity::new(Action::AgentCreated, format!("Agent '{}' created.", agent.name));
        let created = self
            .store()
            .insert_agent(&who.workspace, &agent, now(), &activity, self.agent_limit())
            .await?;
        self.record(who, "agent.created", ("agent", created.id.as_str()), None, settings(&created))
            .await;
        Ok(created)
    }

    /// The caller's agents, oldest first.
    pub async fn list_agents(
        &self,
        who: &Principal,
        filter: &AgentFilter,
    ) -> Result<Vec<AgentSummary>> {
        let agents = self.store().list_agents(&who.workspace, filter).await?;
        Ok(agents.into_iter().map(AgentSummary::from).collect())
    }

    /// One agent with its whole backlog.
    pub async fn agent(&self, who: &Principal, id: &AgentId) -> Result<AgentDetail> {
        let (agent, mut backlog) = self.store().agent_with_tasks(&who.workspace, id, None).await?;
        sort_backlog(&mut backlog);
        Ok(AgentDetail { agent, backlog, next_cursor: None })
    }

    /// One agent with every unfinished task and the first `limit` finished ones (most recently
    /// finished first) after `after`: what it reads grows with what it returns, not with the
    /// agent's history.
    pub async fn agent_page(
        &self,
        who: &Principal,
        id: &AgentId,
        limit: u32,
        after: Option<TaskCursor>,
    ) -> Result<AgentDetail> {
        // One more finished task than asked for says whether there is a next page.
        let fetch = limit.saturating_add(1);
        let (agent, tasks) = self
            .store()
            .agent_with_tasks(&who.workspace, id, Some((fetch, after.as_ref())))
            .await?;
        let (fetched, mut backlog): (Vec<_>, Vec<_>) = tasks
            .into_iter()
            .partition(|task| matches!(task.status, TaskStatus::Complete | TaskStatus::Failed));
        sort_backlog(&mut backlog);
        let page =
            TaskPage { order: TaskOrder::Finished, status: None, limit, after, search: None };
        let finished = TasksPage::from_fetched(fetched, &page);
        backlog.extend(finished.tasks);
        Ok(AgentDetail { agent, backlog, next_cursor: finished.next.map(|c| c.to_string()) })
    }

    /// Changes the supplied fields. A `status` has the effects of the matching command.
    pub async fn update_agent(
        &self,
        who: &Principal,
        id: &AgentId,
        patch: AgentPatch,
    ) -> Result<Agent> {
        who.require(Need::Work)?;
        self.check_model(patch.model.as_ref().and_then(Option::as_ref))?;
        self.check_fallbacks(patch.fallback_models.as_ref().and_then(Option::as_ref))?;
        self.check_mcp_servers(&who.workspace, patch.mcp_servers.as_ref()).await?;
        let before = Mutex::new(None);
        let agent = self
            .store()
            .update_agent(&who.workspace, id, &|current| {
                *crate::sync::lock(&before) = Some(current.clone());
                Ok(patch_agent(current, &patch, now()))
            })
            .await?;
        self.after_agent_change(&who.workspace, id);
        let before = before.into_inner().ok().flatten();
        if before.as_ref() != Some(&agent) {
            let was = before.as_ref().and_then(settings);
            self.record(who, "agent.updated", ("agent", id.as_str()), was, settings(&agent)).await;
        }
        Ok(agent)
    }

    /// A model a request names must be `echo` or name a configured provider that can be
    /// called (it has its key, or needs none); one stored earlier whose provider was removed
    /// fails its tasks when they run.
    fn check_model(&self, model: Option<&ModelName>) -> Result<()> {
        match model.map(|model| self.models().check_usable(model)) {
            Some(Err(problem)) => Err(ValidationErrors::single("model", problem).into()),
            _ => Ok(()),
        }
    }

    /// Each fallback model must name a provider that can be called, as its model must.
    fn check_fallbacks(&self, fallbacks: Option<&FallbackModels>) -> Result<()> {
        let models = fallbacks.map(FallbackModels::models).unwrap_or_default();
        match models.iter().find_map(|model| self.models().check_usable(model).err()) {
            Some(problem) => Err(ValidationErrors::single("fallback_models", problem).into()),
            None => Ok(()),
        }
    }

    /// Removes the agent, its backlog, activity and mapping. A task in progress is abandoned.
    pub async fn delete_agent(&self, who: &Principal, id: &AgentId) -> Result<()> {
        who.require(Need::Work)?;
        let before = self.store().agent(&who.workspace, id).await?;
        self.store().delete_agent(&who.workspace, id).await?;
        self.wake_agent(&who.workspace, id);
        tracing::info!(workspace = %who.workspace, agent_id = %id, "agent deleted");
        self.record(who, "agent.deleted", ("agent", id.as_str()), settings(&before), None).await;
        Ok(())
    }

    /// `active` from any status. Idempotent.
    pub async fn start_agent(&self, who: &Principal, id: &AgentId) -> Result<Agent> {
        who.require(Need::Work)?;
        self.command(who, id, StatusCommand::Start).await
    }

    /// `idle`; the task in progress finishes. Idempotent.
    pub async fn stop_agent(&self, who: &Principal, id: &AgentId) -> Result<Agent> {
        who.require(Need::Work)?;
        self.command(who, id, StatusCommand::Stop).await
    }

    /// Toggles vacation (`None`) or sets it; ending it restores `active`, else `idle`.
    pub async fn set_vacation(
        &self,
        who: &Principal,
        id: &AgentId,
        enabled: Option<bool>,
    ) -> Result<Agent> {
        who.require(Need::Work)?;
        self.command(who, id, StatusCommand::Vacation(enabled)).await
    }

    async fn command(
        &self,
        who: &Principal,
        id: &AgentId,
        command: StatusCommand,
    ) -> Result<Agent> {
        let before = Mutex::new(None);
        let agent = self
            .store()
            .update_agent(&who.workspace, id, &|current| {
                *crate::sync::lock(&before) = Some(current.status);
                let next = transition(current.status, current.status_before_vacation, command);
                Ok(next.activity.map(|entry| {
                    let mut agent = current.clone();
                    agent.status = next.status;
                    agent.status_before_vacation = next.status_before_vacation;
                    agent.updated_at = now();
                    let post = Some(status_post(&agent.name, agent.status, &entry.details));
                    AgentChange { agent, activity: vec![entry], post }
                }))
            })
            .await?;
        self.after_agent_change(&who.workspace, id);
        let action = match command {
            StatusCommand::Start => "agent.started",
            StatusCommand::Stop => "agent.stopped",
            StatusCommand::Vacation(_) => "agent.vacation",
            StatusCommand::Set(_) => "agent.status_set",
        };
        let was = before.into_inner().ok().flatten().map(|status| json!({"status": status}));
        let is = Some(json!({"status": agent.status}));
        self.record(who, action, ("agent", id.as_str()), was, is).await;
        Ok(agent)
    }
}

/// An agent's settings as the audit log keeps them (everything but its counts and runtime
/// state).
fn settings(agent: &Agent) -> Option<serde_json::Value> {
    let mut value = serde_json::to_value(agent).ok()?;
    if let Some(fields) = value.as_object_mut() {
        for runtime in ["backlog_summary", "updated_at", "created_at"] {
            fields.remove(runtime);
        }
    }
    Some(value)
}
