//! `/api/agents` and `/api/agents/{id}`: agents, their status commands and activity.

use axum::Json as Reply;
use axum::extract::{OriginalUri, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use agentcore::ValidationErrors;
use agentcore::api::{
    ActivityList, AgentList, AgentStatusResponse, CreateAgentRequest, Deleted, UpdateAgentRequest,
    VacationRequest,
};
use agentcore::domain::activity::ActivityQuery;
use agentcore::domain::agent::{Agent, AgentDetail, AgentFilter, AgentStatus, Workspace};
use agentcore::domain::paging::parse_limit;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, OptionalJson, Params, Path, agent_id};
use crate::read_cache;

#[derive(Debug, Deserialize)]
pub(super) struct ListParams {
    workspace: Option<String>,
    status: Option<String>,
}

#[utoipa::path(get, path = "/api/agents", operation_id = "list_agents", tag = "agents", security(("bearer" = [])),
    params(("workspace" = Option<String>, Query, description = "Only agents in this workspace."),
           ("status" = Option<AgentStatus>, Query, description = "Only agents with this status.")),
    responses((status = 200, description = "The caller's agents, without role prompts.", body = AgentList)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    OriginalUri(uri): OriginalUri,
    Params(params): Params<ListParams>,
) -> Result<Response, ApiError> {
    let mut errors = ValidationErrors::new();
    let filter = AgentFilter {
        workspace: params.workspace.and_then(|w| errors.check("workspace", Workspace::parse(&w))),
        status: params.status.and_then(|s| errors.check("status", s.parse())),
    };
    errors.into_result()?;
    read_cache::answer(&state, &who, &uri, async {
        Ok(AgentList { agents: state.core.list_agents(&who, &filter).await? })
    })
    .await
}

#[utoipa::path(post, path = "/api/agents", operation_id = "create_agent", tag = "agents", security(("bearer" = [])),
    request_body = CreateAgentRequest,
    responses((status = 201, description = "The new agent, idle.", body = Agent),
        (status = 429, description = "`quota_exceeded`: without billing, the operator's `quotas.agents_per_user` allows no more agents (`error.details` names the `quota` and its `limit`).", body = crate::error::ErrorBody)))]
pub(super) async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<CreateAgentRequest>,
) -> Result<(StatusCode, Reply<Agent>), ApiError> {
    let agent = state.core.create_agent(&who, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(agent)))
}

#[utoipa::path(get, path = "/api/agents/{id}", operation_id = "show_agent", tag = "agents", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "Every unfinished task, and at most this many finished ones, with `next_cursor` when there are more (default: the whole backlog)."),
           ("cursor" = Option<String>, Query, description = "The `next_cursor` of the previous page.")),
    responses((status = 200, description = "The agent and its whole backlog.", body = AgentDetail)))]
pub(super) async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
    OriginalUri(uri): OriginalUri,
    Path(id): Path<String>,
    Params(params): Params<PageParams>,
) -> Result<Response, ApiError> {
    let id = agent_id(&id)?;
    let mut errors = ValidationErrors::new();
    let page = super::backlog::page_params(params.limit, params.cursor, &mut errors);
    errors.into_result()?;
    read_cache::answer(&state, &who, &uri, async {
        Ok(match page {
            None => state.core.agent(&who, &id).await?,
            Some((limit, after)) => state.core.agent_page(&who, &id, limit, after).await?,
        })
    })
    .await
}

#[derive(Debug, Deserialize)]
pub(super) struct PageParams {
    limit: Option<String>,
    cursor: Option<String>,
}

#[utoipa::path(patch, path = "/api/agents/{id}", operation_id = "update_agent", tag = "agents", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")), request_body = UpdateAgentRequest,
    responses((status = 200, description = "The agent after the change; `null` clears `workspace` or `model`.", body = Agent)))]
pub(super) async fn update(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    Json(request): Json<UpdateAgentRequest>,
) -> Result<Reply<Agent>, ApiError> {
    let id = agent_id(&id)?;
    Ok(Reply(state.core.update_agent(&who, &id, request.parse()?).await?))
}

#[utoipa::path(delete, path = "/api/agents/{id}", operation_id = "delete_agent", tag = "agents", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")),
    responses((status = 200, description = "The agent, its backlog, activity and mapping are gone.", body = Deleted)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<Deleted>, ApiError> {
    let id = agent_id(&id)?;
    state.core.delete_agent(&who, &id).await?;
    Ok(Reply(Deleted { deleted: id.to_string() }))
}

#[utoipa::path(post, path = "/api/agents/{id}/start", operation_id = "start_agent", tag = "agents", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")),
    responses((status = 200, description = "`started`: the agent works its backlog.", body = AgentStatusResponse)))]
pub(super) async fn start(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<AgentStatusResponse>, ApiError> {
    let agent = state.core.start_agent(&who, &agent_id(&id)?).await?;
    Ok(status_reply("started", &agent))
}

#[utoipa::path(post, path = "/api/agents/{id}/stop", operation_id = "stop_agent", tag = "agents", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")),
    responses((status = 200, description = "`stopped`: the agent is idle after its current task.", body = AgentStatusResponse)))]
pub(super) async fn stop(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<AgentStatusResponse>, ApiError> {
    let agent = state.core.stop_agent(&who, &agent_id(&id)?).await?;
    Ok(status_reply("stopped", &agent))
}

/// Toggles, or sets with `{"enabled": bool}`; answers with the status after the call.
#[utoipa::path(post, path = "/api/agents/{id}/vacation", operation_id = "set_vacation", tag = "agents", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")),
    request_body(content = Option<VacationRequest>, description = "Empty toggles; `enabled` sets."),
    responses((status = 200, description = "The status after the call.", body = AgentStatusResponse)))]
pub(super) async fn vacation(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    OptionalJson(request): OptionalJson<VacationRequest>,
) -> Result<Reply<AgentStatusResponse>, ApiError> {
    let agent = state.core.set_vacation(&who, &agent_id(&id)?, request.enabled).await?;
    Ok(status_reply(agent.status.as_str(), &agent))
}

#[derive(Debug, Deserialize)]
pub(super) struct ActivityParams {
    limit: Option<String>,
    before: Option<String>,
}

#[utoipa::path(get, path = "/api/agents/{id}/activity", operation_id = "agent_activity", tag = "agents", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "At most this many entries (default 30)."),
           ("before" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "Only entries older than this RFC 3339 time.")),
    responses((status = 200, description = "The agent's log, newest first.", body = ActivityList)))]
pub(super) async fn activity(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    Params(params): Params<ActivityParams>,
) -> Result<Reply<ActivityList>, ApiError> {
    let id = agent_id(&id)?;
    let mut errors = ValidationErrors::new();
    let limit = params.limit.map(|raw| errors.check("limit", parse_limit(&raw)));
    let before = params.before.map(|raw| {
        errors.check(
            "before",
            chrono::DateTime::parse_from_rfc3339(&raw)
                .map(|t| t.to_utc())
                .map_err(|_| "must be an RFC 3339 timestamp such as 2026-03-28T10:00:00Z".into()),
        )
    });
    errors.into_result()?;
    let query = ActivityQuery {
        limit: limit.flatten().unwrap_or(ActivityQuery::DEFAULT_LIMIT),
        before: before.flatten(),
        after: None,
    };
    Ok(Reply(ActivityList { entries: state.core.activity(&who, &id, &query).await? }))
}

fn status_reply(status: &str, agent: &Agent) -> Reply<AgentStatusResponse> {
    Reply(AgentStatusResponse { status: status.to_owned(), agent_id: agent.id.to_string() })
}
