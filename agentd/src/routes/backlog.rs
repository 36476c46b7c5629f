//! `/api/agents/{id}/backlog`: an agent's tasks.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use agentcore::ValidationErrors;
use agentcore::api::{CreateTaskRequest, Deleted, TaskList, UpdateTaskRequest};
use agentcore::domain::task::Task;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Params, Path, agent_id, task_id};

pub async fn add(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
    Json(request): Json<CreateTaskRequest>,
) -> Result<(StatusCode, Reply<Task>), ApiError> {
    let agent = agent_id(&agent)?;
    let task = state.core.add_task(&who, &agent, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(task)))
}

#[derive(Debug, Deserialize)]
pub struct ListParams {
    status: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
    Params(params): Params<ListParams>,
) -> Result<Reply<TaskList>, ApiError> {
    let agent = agent_id(&agent)?;
    let mut errors = ValidationErrors::new();
    let status = params.status.and_then(|s| errors.check("status", s.parse()));
    errors.into_result()?;
    Ok(Reply(TaskList { tasks: state.core.tasks(&who, &agent, status).await? }))
}

pub async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<Task>, ApiError> {
    Ok(Reply(state.core.task(&who, &agent_id(&agent)?, &task_id(&task)?).await?))
}

pub async fn update(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
    Json(request): Json<UpdateTaskRequest>,
) -> Result<Reply<Task>, ApiError> {
    let (agent, task) = (agent_id(&agent)?, task_id(&task)?);
    Ok(Reply(state.core.update_task(&who, &agent, &task, request.parse()?).await?))
}

pub async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<Deleted>, ApiError> {
    let (agent, task) = (agent_id(&agent)?, task_id(&task)?);
    state.core.delete_task(&who, &agent, &task).await?;
    Ok(Reply(Deleted { deleted: task.to_string() }))
}

pub async fn retry(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<Task>, ApiError> {
    Ok(Reply(state.core.retry_task(&who, &agent_id(&agent)?, &task_id(&task)?).await?))
}
