//! `/api/agents` and `/api/agents/{id}`: agents, their status commands and activity.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use agentcore::ValidationErrors;
use agentcore::api::{
    ActivityList, AgentList, AgentStatusResponse, CreateAgentRequest, Deleted, UpdateAgentRequest,
    VacationRequest,
};
use agentcore::domain::activity::ActivityQuery;
use agentcore::domain::agent::{Agent, AgentDetail, AgentFilter};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, OptionalJson, Params, Path, agent_id};

#[derive(Debug, Deserialize)]
pub struct ListParams {
    workspace: Option<String>,
    status: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    Params(params): Params<ListParams>,
) -> Result<Reply<AgentList>, ApiError> {
    let mut errors = ValidationErrors::new();
    let filter = AgentFilter {
        workspace: params.workspace,
        status: params.status.and_then(|s| errors.check("status", s.parse())),
    };
    errors.into_result()?;
    Ok(Reply(AgentList { agents: state.core.list_agents(&who, &filter).await? }))
}

pub async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<CreateAgentRequest>,
) -> Result<(StatusCode, Reply<Agent>), ApiError> {
    let agent = state.core.create_agent(&who, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(agent)))
}

pub async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<AgentDetail>, ApiError> {
    Ok(Reply(state.core.agent(&who, &agent_id(&id)?).await?))
}

pub async fn update(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    Json(request): Json<UpdateAgentRequest>,
) -> Result<Reply<Agent>, ApiError> {
    let id = agent_id(&id)?;
    Ok(Reply(state.core.update_agent(&who, &id, request.parse()?).await?))
}

pub async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<Deleted>, ApiError> {
    let id = agent_id(&id)?;
    state.core.delete_agent(&who, &id).await?;
    Ok(Reply(Deleted { deleted: id.to_string() }))
}

pub async fn start(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<AgentStatusResponse>, ApiError> {
    let agent = state.core.start_agent(&who, &agent_id(&id)?).await?;
    Ok(status_reply("started", &agent))
}

pub async fn stop(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<AgentStatusResponse>, ApiError> {
    let agent = state.core.stop_agent(&who, &agent_id(&id)?).await?;
    Ok(status_reply("stopped", &agent))
}

/// Toggles, or sets with `{"enabled": bool}`; answers with the status after the call.
pub async fn vacation(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    OptionalJson(request): OptionalJson<VacationRequest>,
) -> Result<Reply<AgentStatusResponse>, ApiError> {
    let agent = state.core.set_vacation(&who, &agent_id(&id)?, request.enabled).await?;
    Ok(status_reply(agent.status.as_str(), &agent))
}

#[derive(Debug, Deserialize)]
pub struct ActivityParams {
    limit: Option<String>,
    before: Option<String>,
}

pub async fn activity(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    Params(params): Params<ActivityParams>,
) -> Result<Reply<ActivityList>, ApiError> {
    let id = agent_id(&id)?;
    let mut errors = ValidationErrors::new();
    let limit = params.limit.map(|raw| {
        errors.check(
            "limit",
            raw.parse::<i64>()
                .map_err(|_| "must be an integer".into())
                .and_then(ActivityQuery::limit),
        )
    });
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
    };
    Ok(Reply(ActivityList { entries: state.core.activity(&who, &id, &query).await? }))
}

fn status_reply(status: &str, agent: &Agent) -> Reply<AgentStatusResponse> {
    Reply(AgentStatusResponse { status: status.to_owned(), agent_id: agent.id.to_string() })
}
