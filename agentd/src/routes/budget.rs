//! `/api/budget` and `/api/usage`: what model calls may cost, and what they did.

use axum::Json as Reply;
use axum::extract::State;

use agentcore::api::{BudgetRequest, UsageParams};
use agentcore::domain::usage::{BudgetView, UsageReport};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Params};

#[utoipa::path(get, path = "/api/budget", operation_id = "show_budget", tag = "usage", security(("bearer" = [])),
    responses((status = 200, description = "The caller's monthly budget (null: none) and what all their agents spent this calendar month (UTC).", body = BudgetView)))]
pub(super) async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<BudgetView>, ApiError> {
    Ok(Reply(state.core.budget(&who).await?))
}

#[utoipa::path(put, path = "/api/budget", operation_id = "set_budget", tag = "usage", security(("bearer" = [])),
    request_body = BudgetRequest,
    responses((status = 200, description = "The budget as set. From the next model call on, no call that could take this month's spend past it is sent: the task fails `budget_exhausted` and its agent goes to `error`.", body = BudgetView)))]
pub(super) async fn set(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<BudgetRequest>,
) -> Result<Reply<BudgetView>, ApiError> {
    Ok(Reply(state.core.set_budget(&who, request.parse()?).await?))
}

#[utoipa::path(get, path = "/api/usage", operation_id = "usage", tag = "usage", security(("bearer" = [])),
    params(("from" = Option<String>, Query, description = "Start of the period, included: a date (2026-11-01, midnight UTC) or an RFC 3339 time. Default: the start of this month (UTC)."),
           ("to" = Option<String>, Query, description = "End of the period, excluded. Default: the start of next month (UTC)."),
           ("agent_id" = Option<String>, Query, description = "Only this agent's model calls."),
           ("group_by" = Option<String>, Query, description = "`agent`, `model` or `day` (UTC): one row per group. Without it, only the total.")),
    responses((status = 200, description = "Tokens, cost, tasks and model calls in the period, summed from the steps' recorded costs.", body = UsageReport)))]
pub(super) async fn usage(
    State(state): State<AppState>,
    Caller(who): Caller,
    Params(params): Params<UsageParams>,
) -> Result<Reply<UsageReport>, ApiError> {
    Ok(Reply(state.core.usage(&who, &params).await?))
}
