//! `/api/agents/{id}/schedules`: an agent's recurring tasks.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::StatusCode;

use agentcore::api::{CreateScheduleRequest, Deleted, ScheduleList, UpdateScheduleRequest};
use agentcore::domain::schedule::Schedule;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Path, agent_id, schedule_id};

#[utoipa::path(post, path = "/api/agents/{id}/schedules", operation_id = "add_schedule", tag = "schedules", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")), request_body = CreateScheduleRequest,
    responses((status = 201, description = "The schedule, with its next five fire times in UTC and in its zone. A bad expression or zone is `validation_failed` naming `cron` or `timezone`.", body = Schedule),
        (status = 429, description = "`quota_exceeded`: `schedules_per_agent` or `schedules_per_user` reached, or an `enqueue` schedule firing more often than `min_enqueue_period_seconds` (`error.details` names the `quota` and its `limit`).", body = crate::error::ErrorBody)))]
pub(super) async fn add(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
    Json(request): Json<CreateScheduleRequest>,
) -> Result<(StatusCode, Reply<Schedule>), ApiError> {
    let agent = agent_id(&agent)?;
    let schedule = state.core.add_schedule(&who, &agent, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(schedule)))
}

#[utoipa::path(get, path = "/api/agents/{id}/schedules", operation_id = "list_schedules", tag = "schedules", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id.")),
    responses((status = 200, description = "The agent's schedules, oldest first.", body = ScheduleList)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
) -> Result<Reply<ScheduleList>, ApiError> {
    Ok(Reply(state.core.schedules(&who, &agent_id(&agent)?).await?))
}

#[utoipa::path(get, path = "/api/agents/{id}/schedules/{schedule_id}", operation_id = "show_schedule", tag = "schedules", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("schedule_id" = String, Path, description = "The schedule's id.")),
    responses((status = 200, description = "The schedule.", body = Schedule)))]
pub(super) async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, schedule)): Path<(String, String)>,
) -> Result<Reply<Schedule>, ApiError> {
    Ok(Reply(state.core.schedule(&who, &agent_id(&agent)?, &schedule_id(&schedule)?).await?))
}

#[utoipa::path(patch, path = "/api/agents/{id}/schedules/{schedule_id}", operation_id = "update_schedule", tag = "schedules", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("schedule_id" = String, Path, description = "The schedule's id.")), request_body = UpdateScheduleRequest,
    responses((status = 200, description = "The schedule after the change. A new `cron` or `timezone`, or `enabled` set again, makes it next fire at its first fire time from now.", body = Schedule),
        (status = 429, description = "`quota_exceeded`: an `enqueue` schedule firing more often than `min_enqueue_period_seconds` (`error.details` names the `quota` and its `limit`).", body = crate::error::ErrorBody)))]
pub(super) async fn update(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, schedule)): Path<(String, String)>,
    Json(request): Json<UpdateScheduleRequest>,
) -> Result<Reply<Schedule>, ApiError> {
    let (agent, schedule) = (agent_id(&agent)?, schedule_id(&schedule)?);
    Ok(Reply(state.core.update_schedule(&who, &agent, &schedule, request.parse()?).await?))
}

#[utoipa::path(delete, path = "/api/agents/{id}/schedules/{schedule_id}", operation_id = "delete_schedule", tag = "schedules", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), ("schedule_id" = String, Path, description = "The schedule's id.")),
    responses((status = 200, description = "The schedule is gone; tasks it queued stay in the backlog.", body = Deleted)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((agent, schedule)): Path<(String, String)>,
) -> Result<Reply<Deleted>, ApiError> {
    let (agent, schedule) = (agent_id(&agent)?, schedule_id(&schedule)?);
    state.core.delete_schedule(&who, &agent, &schedule).await?;
    Ok(Reply(Deleted { deleted: schedule.to_string() }))
}
