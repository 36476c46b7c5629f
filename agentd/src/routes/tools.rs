//! `/api/tools`, `/api/agents/{id}/memory` and a task's `/steps`: what agents act with, and what
//! they did.

use axum::Json as Reply;
use axum::extract::State;

use agentcore::api::{SetMemoryRequest, StepList, ToolList};
use agentcore::domain::tools::Memory;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Path, agent_id, task_id};

#[utoipa::path(get, path = "/api/tools", operation_id = "list_tools", tag = "tools", security(("bearer" = [])),
    responses((status = 200, description = "Every built-in tool, with its description and the JSON Schema of its arguments; then each MCP server the caller's agents may use (the operator's and the caller's own), with its tools or the error that kept them from being listed.", body = ToolList)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<ToolList>, ApiError> {
    Ok(Reply(state.core.tool_list(&who).await?))
}

#[utoipa::path(get, path = "/api/agents/{id}/memory", operation_id = "show_memory", tag = "agents", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")),
    responses((status = 200, description = "The agent's memory block, shown to it at the start of every task.", body = Memory)))]
pub(super) async fn show_memory(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
) -> Result<Reply<Memory>, ApiError> {
    Ok(Reply(state.core.memory(&who, &agent_id(&agent)?).await?))
}

#[utoipa::path(put, path = "/api/agents/{id}/memory", operation_id = "set_memory", tag = "agents", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")), request_body = SetMemoryRequest,
    responses((status = 200, description = "The memory block as written.", body = Memory)))]
pub(super) async fn set_memory(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
    Json(request): Json<SetMemoryRequest>,
) -> Result<Reply<Memory>, ApiError> {
    let agent = agent_id(&agent)?;
    Ok(Reply(state.core.set_memory(&who, &agent, &request.parse()?).await?))
}

#[utoipa::path(get, path = "/api/agents/{id}/backlog/{task_id}/steps", operation_id = "list_steps", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("task_id" = String, Path, description = "The task's id.")),
    responses((status = 200, description = "The task's run: each model call and tool call, oldest first.", body = StepList)))]
pub(super) async fn steps(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<StepList>, ApiError> {
    let steps = state.core.steps(&who, &agent_id(&agent)?, &task_id(&task)?).await?;
    Ok(Reply(StepList { steps }))
}
