//! The service's operations as typed calls: each takes its request type from
//! [`agentcore::api`] and answers with the service's own response type, keeping the body as it
//! came (for `-o json`, which prints it unchanged). `agentctl` speaks the API through these,
//! and the integration tests check every one against a running server.

use axum::http::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use agentcore::Session;
use agentcore::api::{
    ActivityList, AddMcpServerRequest, AgentList, AgentStatusResponse, ApprovalDecided,
    BudgetRequest, CallbackRequest, ChannelList, ConnectRequest, ConnectionList, ConnectionTest,
    CreateAgentRequest, CreateScheduleRequest, CreateTaskRequest, Deleted, Disconnected,
    LoginRequest, MapRequest, Mapped, MappingList, McpServerList, RegisterRequest, RolesRequest,
    ScheduleList, SendRequest, SetMemoryRequest, SetupRequest, StatusResponse, StepList, TaskList,
    TemplateList, ToolList, Unmapped, UpdateAgentRequest, UpdateScheduleRequest, UpdateTaskRequest,
    UsageParams, VacationRequest,
};
use agentcore::domain::agent::{Agent, AgentDetail};
use agentcore::domain::billing::Billing;
use agentcore::domain::chat::Connection;
use agentcore::domain::mcp::{McpServer, McpServerTools};
use agentcore::domain::onboarding::Onboarded;
use agentcore::domain::schedule::Schedule;
use agentcore::domain::task::Task;
use agentcore::domain::tools::Memory;
use agentcore::domain::usage::{BudgetView, UsageReport};
use agentcore::domain::user::User;
use agentcore::{Connected, OauthUrl, Sent};

use crate::client::{Answer, Client, segment};
use crate::failure::Failure;

mod integrations;
mod teams;

/// A typed answer, and the body it was read from.
#[derive(Debug, Clone)]
pub struct Reply<T> {
    pub body: T,
    pub answer: Answer,
}

/// The filters of `GET /api/agents`.
#[derive(Debug, Clone, Default)]
pub struct AgentQuery {
    pub workspace: Option<String>,
    pub status: Option<String>,
}

/// The page of `GET /api/agents/{id}/activity`.
#[derive(Debug, Clone, Default)]
pub struct ActivityQuery {
    pub limit: Option<u32>,
    pub before: Option<String>,
}

fn agent_path(id: &str, rest: &str) -> String {
    format!("/api/agents/{}{rest}", segment(id))
}

fn schedule_path(agent: &str, schedule: &str) -> String {
    agent_path(agent, &format!("/schedules/{}", segment(schedule)))
}

fn task_path(agent: &str, task: &str, rest: &str) -> String {
    agent_path(agent, &format!("/backlog/{}{rest}", segment(task)))
}

/// `?a=1&b=2` of the given pairs, percent-encoded; empty when none is given.
pub(crate) fn query(pairs: &[(&str, Option<String>)]) -> String {
    let given: Vec<String> = pairs
        .iter()
        .filter_map(|(key, value)| value.as_ref().map(|v| format!("{key}={}", segment(v))))
        .collect();
    if given.is_empty() { String::new() } else { format!("?{}", given.join("&")) }
}

impl Client {
    async fn typed<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<Reply<T>, Failure> {
        let body = body.map(serde_json::to_value).transpose().map_err(Failure::internal)?;
        let answer = self.call(method, path, body).await?;
        let body = serde_json::from_value(answer.value.clone()).map_err(|e| {
            Failure::network(format!(
                "{} answered {path} with a body this agentctl does not understand ({e}); \
                 are both the same version?",
                self.transport.describe()
            ))
        })?;
        Ok(Reply { body, answer })
    }

    async fn get_as<T: DeserializeOwned>(&self, path: &str) -> Result<Reply<T>, Failure> {
        self.typed(Method::GET, path, None::<&()>).await
    }

    async fn post_as<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<Reply<T>, Failure> {
        self.typed(Method::POST, path, body).await
    }

    async fn delete_as<T: DeserializeOwned>(&self, path: &str) -> Result<Reply<T>, Failure> {
        self.typed(Method::DELETE, path, None::<&()>).await
    }

    // Accounts.

    pub async fn register(&self, request: &RegisterRequest) -> Result<Reply<Session>, Failure> {
        self.post_as("/auth/register", Some(request)).await
    }

    pub async fn login(&self, request: &LoginRequest) -> Result<Reply<Session>, Failure> {
        self.post_as("/auth/login", Some(request)).await
    }

    pub async fn me(&self) -> Result<Reply<User>, Failure> {
        self.get_as("/auth/me").await
    }

    pub async fn logout(&self) -> Result<Reply<StatusResponse>, Failure> {
        self.post_as("/auth/logout", None::<&()>).await
    }

    // Agents.

    pub async fn list_agents(&self, filter: &AgentQuery) -> Result<Reply<AgentList>, Failure> {
        let query =
            query(&[("workspace", filter.workspace.clone()), ("status", filter.status.clone())]);
        self.get_as(&format!("/api/agents{query}")).await
    }

    pub async fn create_agent(
        &self,
        request: &CreateAgentRequest,
    ) -> Result<Reply<Agent>, Failure> {
        self.post_as("/api/agents", Some(request)).await
    }

    pub async fn agent(&self, id: &str) -> Result<Reply<AgentDetail>, Failure> {
        self.get_as(&agent_path(id, "")).await
    }

    pub async fn update_agent(
        &self,
        id: &str,
        request: &UpdateAgentRequest,
    ) -> Result<Reply<Agent>, Failure> {
        self.typed(Method::PATCH, &agent_path(id, ""), Some(request)).await
    }

    pub async fn delete_agent(&self, id: &str) -> Result<Reply<Deleted>, Failure> {
        self.delete_as(&agent_path(id, "")).await
    }

    pub async fn start_agent(&self, id: &str) -> Result<Reply<AgentStatusResponse>, Failure> {
        self.post_as(&agent_path(id, "/start"), None::<&()>).await
    }

    pub async fn stop_agent(&self, id: &str) -> Result<Reply<AgentStatusResponse>, Failure> {
        self.post_as(&agent_path(id, "/stop"), None::<&()>).await
    }

    /// Sets vacation, or toggles it when `request` is `None`.
    pub async fn vacation(
        &self,
        id: &str,
        request: Option<&VacationRequest>,
    ) -> Result<Reply<AgentStatusResponse>, Failure> {
        self.post_as(&agent_path(id, "/vacation"), request).await
    }

    pub async fn activity(
        &self,
        id: &str,
        page: &ActivityQuery,
    ) -> Result<Reply<ActivityList>, Failure> {
        let query =
            query(&[("limit", page.limit.map(|l| l.to_string())), ("before", page.before.clone())]);
        self.get_as(&agent_path(id, &format!("/activity{query}"))).await
    }

    // Backlog.

    pub async fn add_task(
        &self,
        agent: &str,
        request: &CreateTaskRequest,
    ) -> Result<Reply<Task>, Failure> {
        self.post_as(&agent_path(agent, "/backlog"), Some(request)).await
    }

    pub async fn tasks(
        &self,
        agent: &str,
        status: Option<String>,
    ) -> Result<Reply<TaskList>, Failure> {
        let newest = Some("newest".to_owned());
        let query = query(&[("status", status), ("order", newest)]);
        self.get_as(&agent_path(agent, &format!("/backlog{query}"))).await
    }

    pub async fn task(&self, agent: &str, task: &str) -> Result<Reply<Task>, Failure> {
        self.get_as(&task_path(agent, task, "")).await
    }

    pub async fn update_task(
        &self,
        agent: &str,
        task: &str,
        request: &UpdateTaskRequest,
    ) -> Result<Reply<Task>, Failure> {
        self.typed(Method::PATCH, &task_path(agent, task, ""), Some(request)).await
    }

    pub async fn delete_task(&self, agent: &str, task: &str) -> Result<Reply<Deleted>, Failure> {
        self.delete_as(&task_path(agent, task, "")).await
    }

    pub async fn steps(&self, agent: &str, task: &str) -> Result<Reply<StepList>, Failure> {
        self.get_as(&task_path(agent, task, "/steps")).await
    }

    pub async fn memory(&self, agent: &str) -> Result<Reply<Memory>, Failure> {
        self.get_as(&agent_path(agent, "/memory")).await
    }

    pub async fn set_memory(
        &self,
        agent: &str,
        request: &SetMemoryRequest,
    ) -> Result<Reply<Memory>, Failure> {
        self.typed(Method::PUT, &agent_path(agent, "/memory"), Some(request)).await
    }

    pub async fn tools(&self) -> Result<Reply<ToolList>, Failure> {
        self.get_as("/api/tools").await
    }

    // Schedules.

    /// A page of the workspace's audit log; `query` as `query()` in this module makes it.
    pub async fn audit(&self, query: &str) -> Result<Reply<agentcore::AuditPage>, Failure> {
        self.get_as(&format!("/api/audit{query}")).await
    }

    pub async fn schedules(&self, agent: &str) -> Result<Reply<ScheduleList>, Failure> {
        self.get_as(&agent_path(agent, "/schedules")).await
    }

    pub async fn add_schedule(
        &self,
        agent: &str,
        request: &CreateScheduleRequest,
    ) -> Result<Reply<Schedule>, Failure> {
        self.post_as(&agent_path(agent, "/schedules"), Some(request)).await
    }

    pub async fn schedule(&self, agent: &str, id: &str) -> Result<Reply<Schedule>, Failure> {
        self.get_as(&schedule_path(agent, id)).await
    }

    pub async fn update_schedule(
        &self,
        agent: &str,
        id: &str,
        request: &UpdateScheduleRequest,
    ) -> Result<Reply<Schedule>, Failure> {
        self.typed(Method::PATCH, &schedule_path(agent, id), Some(request)).await
    }

    pub async fn delete_schedule(&self, agent: &str, id: &str) -> Result<Reply<Deleted>, Failure> {
        self.delete_as(&schedule_path(agent, id)).await
    }

    // MCP servers.

    pub async fn mcp_servers(&self) -> Result<Reply<McpServerList>, Failure> {
        self.get_as("/api/mcp/servers").await
    }

    pub async fn add_mcp_server(
        &self,
        request: &AddMcpServerRequest,
    ) -> Result<Reply<McpServer>, Failure> {
        self.post_as("/api/mcp/servers", Some(request)).await
    }

    pub async fn test_mcp_server(&self, name: &str) -> Result<Reply<McpServerTools>, Failure> {
        self.post_as(&format!("/api/mcp/servers/{}/test", segment(name)), None::<&()>).await
    }

    pub async fn delete_mcp_server(&self, name: &str) -> Result<Reply<Deleted>, Failure> {
        self.delete_as(&format!("/api/mcp/servers/{}", segment(name))).await
    }

    /// Stops a task: a queued one never runs, a running one stops where it is.
    pub async fn cancel_task(&self, agent: &str, task: &str) -> Result<Reply<Task>, Failure> {
        self.post_as(&task_path(agent, task, "/cancel"), None::<&()>).await
    }

    /// Opens the event stream of `agent` (all the user's agents without one), only `task`'s
    /// events when given, after `last_event_id` when given.
    pub async fn events(
        &self,
        agent: Option<&str>,
        task: Option<&str>,
        last_event_id: Option<i64>,
    ) -> Result<crate::client::Incoming, Failure> {
        let query = query(&[("task", task.map(str::to_owned))]);
        let path = match agent {
            Some(agent) => agent_path(agent, &format!("/events{query}")),
            None => format!("/api/events{query}"),
        };
        self.stream(&path, last_event_id).await
    }

    pub async fn retry_task(&self, agent: &str, task: &str) -> Result<Reply<Task>, Failure> {
        self.post_as(&task_path(agent, task, "/retry"), None::<&()>).await
    }

    /// Approves (`approve`) or denies (`deny`) the tool call the task waits on.
    pub async fn decide_task(
        &self,
        agent: &str,
        task: &str,
        decision: &str,
    ) -> Result<Reply<ApprovalDecided>, Failure> {
        self.post_as(&task_path(agent, task, &format!("/{decision}")), None::<&()>).await
    }

    // Chat.

    pub async fn oauth_url(&self) -> Result<Reply<OauthUrl>, Failure> {
        self.get_as("/api/chat/oauth-url").await
    }

    pub async fn callback(&self, request: &CallbackRequest) -> Result<Reply<Connected>, Failure> {
        self.post_as("/api/chat/callback", Some(request)).await
    }

    pub async fn connect(&self, request: &ConnectRequest) -> Result<Reply<Connected>, Failure> {
        self.post_as("/api/chat/connect", Some(request)).await
    }

    pub async fn connections(&self) -> Result<Reply<ConnectionList>, Failure> {
        self.get_as("/api/chat/connections").await
    }

    pub async fn test_connection(&self, guild: &str) -> Result<Reply<ConnectionTest>, Failure> {
        self.post_as(&format!("/api/chat/test/{}", segment(guild)), None::<&()>).await
    }

    pub async fn set_allowed_roles(
        &self,
        guild: &str,
        request: &RolesRequest,
    ) -> Result<Reply<Connection>, Failure> {
        let path = format!("/api/chat/connections/{}/roles", segment(guild));
        self.typed(Method::PUT, &path, Some(request)).await
    }

    pub async fn disconnect(&self, guild: &str) -> Result<Reply<Disconnected>, Failure> {
        self.delete_as(&format!("/api/chat/connections/{}", segment(guild))).await
    }

    pub async fn channels(&self, guild: &str) -> Result<Reply<ChannelList>, Failure> {
        self.get_as(&format!("/api/chat/connections/{}/channels", segment(guild))).await
    }

    pub async fn map(&self, guild: &str, request: &MapRequest) -> Result<Reply<Mapped>, Failure> {
        self.post_as(&format!("/api/chat/mappings/{}", segment(guild)), Some(request)).await
    }

    pub async fn unmap(&self, agent: &str) -> Result<Reply<Unmapped>, Failure> {
        self.delete_as(&format!("/api/chat/mappings/{}", segment(agent))).await
    }

    pub async fn mappings(&self) -> Result<Reply<MappingList>, Failure> {
        self.get_as("/api/chat/mappings").await
    }

    pub async fn send(&self, guild: &str, request: &SendRequest) -> Result<Reply<Sent>, Failure> {
        self.post_as(&format!("/api/chat/send/{}", segment(guild)), Some(request)).await
    }

    // Billing and onboarding.

    pub async fn billing(&self) -> Result<Reply<Billing>, Failure> {
        self.get_as("/api/billing").await
    }

    // Budgets and usage.

    pub async fn budget(&self) -> Result<Reply<BudgetView>, Failure> {
        self.get_as("/api/budget").await
    }

    pub async fn set_budget(&self, request: &BudgetRequest) -> Result<Reply<BudgetView>, Failure> {
        self.typed(Method::PUT, "/api/budget", Some(request)).await
    }

    pub async fn usage(&self, params: &UsageParams) -> Result<Reply<UsageReport>, Failure> {
        let query = query(&[
            ("from", params.from.clone()),
            ("to", params.to.clone()),
            ("agent_id", params.agent_id.clone()),
            ("group_by", params.group_by.clone()),
        ]);
        self.get_as(&format!("/api/usage{query}")).await
    }

    pub async fn templates(&self) -> Result<Reply<TemplateList>, Failure> {
        self.get_as("/api/onboarding/templates").await
    }

    pub async fn setup(&self, request: &SetupRequest) -> Result<Reply<Onboarded>, Failure> {
        self.post_as("/api/onboarding/setup", Some(request)).await
    }
}
