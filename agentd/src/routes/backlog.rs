//! `/api/agents/{id}/backlog`: an agent's tasks.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use agentcore::ValidationErrors;
use agentcore::api::{ApprovalDecided, CreateTaskRequest, Deleted, TaskList, UpdateTaskRequest};
use agentcore::domain::approval::Decision;
use agentcore::domain::paging::{TaskCursor, TaskOrder, TaskPage, TaskSearch, parse_limit};
use agentcore::domain::task::{Task, TaskStatus};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Params, Path, agent_id, task_id};

#[utoipa::path(post, path = "/api/agents/{id}/backlog", operation_id = "add_task", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")), request_body = CreateTaskRequest,
    responses((status = 201, description = "The queued task.", body = Task),
        (status = 429, description = "`quota_exceeded`: the agent's or the user's queue is full (`queued_tasks_per_agent`, `queued_tasks_per_user`) (`error.details` names the `quota` and its `limit`).", body = crate::error::ErrorBody)))]
pub(super) async fn add(
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
pub(super) struct ListParams {
    status: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
    search: Option<String>,
    order: Option<String>,
}

/// `?order=`: `oldest` (creation order, the default) or `newest` (the order the dashboard and
/// agentctl list tasks in).
fn parse_order(raw: &str) -> Result<TaskOrder, String> {
    match raw {
        "oldest" => Ok(TaskOrder::Created),
        "newest" => Ok(TaskOrder::Newest),
        _ => Err(format!("'{raw}' is not an order: oldest or newest")),
    }
}

/// How many a page holds when a request gives a cursor without a limit.
const DEFAULT_PAGE: u32 = 100;

/// `?limit=` and `?cursor=`, checked: `None` when neither is given (the whole list).
pub(super) fn page_params(
    limit: Option<String>,
    cursor: Option<String>,
    errors: &mut ValidationErrors,
) -> Option<(u32, Option<TaskCursor>)> {
    if limit.is_none() && cursor.is_none() {
        return None;
    }
    let limit = limit.map(|raw| errors.check("limit", parse_limit(&raw)));
    let cursor = cursor.map(|raw| errors.check("cursor", TaskCursor::parse(&raw)));
    Some((limit.flatten().unwrap_or(DEFAULT_PAGE), cursor.flatten()))
}

#[utoipa::path(get, path = "/api/agents/{id}/backlog", operation_id = "list_tasks", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("status" = Option<TaskStatus>, Query, description = "Only tasks with this status."),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "At most this many tasks, and `next_cursor` when there are more (default: all of them; 100 with a cursor)."),
           ("cursor" = Option<String>, Query, description = "The `next_cursor` of the previous page."),
           ("search" = Option<String>, Query, max_length = 100, description = "Only tasks whose title or description holds this text, letter case aside; a search is always paged (100 a page without a limit)."),
           ("order" = Option<String>, Query, description = "`oldest` (creation order, the default) or `newest` (the order the dashboard and agentctl list tasks in).")),
    responses((status = 200, description = "The backlog in creation order (oldest first), or newest first with `order=newest`.", body = TaskList)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
    Params(params): Params<ListParams>,
) -> Result<Reply<TaskList>, ApiError> {
    let agent = agent_id(&agent)?;
    let mut errors = ValidationErrors::new();
    let status = params.status.and_then(|s| errors.check("status", s.parse()));
    let search = params.search.and_then(|raw| errors.check("search", TaskSearch::parse(&raw)));
    let search = search.flatten();
    let order = params.order.map(|raw| errors.check("order", parse_order(&raw)));
    let order = order.flatten().unwrap_or(TaskOrder::Created);
    let page = page_params(params.limit, params.cursor, &mut errors);
    errors.into_result()?;
    let page = match (page, &search) {
        (Some(page), _) => page,
        (None, Some(_)) => (DEFAULT_PAGE, None),
        (None, None) => {
            let mut tasks = state.core.tasks(&who, &agent, status).await?;
            if order == TaskOrder::Newest {
                tasks.reverse();
            }
            return Ok(Reply(TaskList { tasks, next_cursor: None }));
        }
    };
    let (limit, after) = page;
    let page = TaskPage { order, status, limit, after, search };
    let page = state.core.task_page(&who, &agent, &page).await?;
    Ok(Reply(TaskList { tasks: page.tasks, next_cursor: page.next.map(|c| c.to_string()) }))
}

#[utoipa::path(get, path = "/api/agents/{id}/backlog/{task_id}", operation_id = "show_task", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("task_id" = String, Path, description = "The task's id.")),
    responses((status = 200, description = "The task.", body = Task)))]
pub(super) async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<Task>, ApiError> {
    Ok(Reply(state.core.task(&who, &agent_id(&agent)?, &task_id(&task)?).await?))
}

#[utoipa::path(patch, path = "/api/agents/{id}/backlog/{task_id}", operation_id = "update_task", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("task_id" = String, Path, description = "The task's id.")), request_body = UpdateTaskRequest,
    responses((status = 200, description = "The task after the change; only queued tasks can change.", body = Task)))]
pub(super) async fn update(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
    Json(request): Json<UpdateTaskRequest>,
) -> Result<Reply<Task>, ApiError> {
    let (agent, task) = (agent_id(&agent)?, task_id(&task)?);
    Ok(Reply(state.core.update_task(&who, &agent, &task, request.parse()?).await?))
}

#[utoipa::path(delete, path = "/api/agents/{id}/backlog/{task_id}", operation_id = "delete_task", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("task_id" = String, Path, description = "The task's id.")),
    responses((status = 200, description = "The task is gone.", body = Deleted)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<Deleted>, ApiError> {
    let (agent, task) = (agent_id(&agent)?, task_id(&task)?);
    state.core.delete_task(&who, &agent, &task).await?;
    Ok(Reply(Deleted { deleted: task.to_string() }))
}

#[utoipa::path(post, path = "/api/agents/{id}/backlog/{task_id}/retry", operation_id = "retry_task", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("task_id" = String, Path, description = "The task's id.")),
    responses((status = 200, description = "The failed task, queued again.", body = Task)))]
pub(super) async fn retry(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<Task>, ApiError> {
    Ok(Reply(state.core.retry_task(&who, &agent_id(&agent)?, &task_id(&task)?).await?))
}

#[utoipa::path(post, path = "/api/agents/{id}/backlog/{task_id}/cancel", operation_id = "cancel_task", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("task_id" = String, Path, description = "The task's id.")),
    responses((status = 200, description = "The task, `cancelled` (with `cancelled_by`). A running one stops at once, wherever it runs; what its tools did already stays done.", body = Task),
        (status = 409, description = "`task_finished`: the task is complete or failed; `task_already_cancelled`: it was cancelled already.", body = crate::error::ErrorBody)))]
pub(super) async fn cancel(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<Task>, ApiError> {
    Ok(Reply(state.core.cancel_task(&who, &agent_id(&agent)?, &task_id(&task)?).await?))
}

#[utoipa::path(post, path = "/api/agents/{id}/backlog/{task_id}/approve", operation_id = "approve_task", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("task_id" = String, Path, description = "The task's id.")),
    responses((status = 200, description = "The call the task waited on is approved; the task is queued and runs it.", body = ApprovalDecided)))]
pub(super) async fn approve(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<ApprovalDecided>, ApiError> {
    decide(&state, &who, &agent, &task, Decision::Approve).await
}

#[utoipa::path(post, path = "/api/agents/{id}/backlog/{task_id}/deny", operation_id = "deny_task", tag = "backlog", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("task_id" = String, Path, description = "The task's id.")),
    responses((status = 200, description = "The call the task waited on is denied; the task is queued and its model told so.", body = ApprovalDecided)))]
pub(super) async fn deny(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, task)): Path<(String, String)>,
) -> Result<Reply<ApprovalDecided>, ApiError> {
    decide(&state, &who, &agent, &task, Decision::Deny).await
}

async fn decide(
    state: &AppState,
    who: &agentcore::Principal,
    agent: &str,
    task: &str,
    decision: Decision,
) -> Result<Reply<ApprovalDecided>, ApiError> {
    let (agent, task) = (agent_id(agent)?, task_id(task)?);
    let approval = state.core.decide_task(who, &agent, &task, decision).await?;
    Ok(Reply(ApprovalDecided { status: approval.status.as_str().to_owned(), approval }))
}
