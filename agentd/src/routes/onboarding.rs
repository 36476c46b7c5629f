//! `/api/onboarding`: templates, and a ready agent from one.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::StatusCode;

use agentcore::api::{SetupRequest, TemplateList};
use agentcore::domain::onboarding::Onboarded;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json};

/// Public, so a sign-up page can show them before there is an account.
#[utoipa::path(get, path = "/api/onboarding/templates", operation_id = "list_templates", tag = "onboarding",
    responses((status = 200, description = "The role templates.", body = TemplateList)))]
pub(super) async fn templates(State(state): State<AppState>) -> Reply<TemplateList> {
    Reply(TemplateList { templates: state.core.onboarding_templates().to_vec() })
}

#[utoipa::path(post, path = "/api/onboarding/setup", operation_id = "onboard", tag = "onboarding", security(("bearer" = [])),
    request_body = SetupRequest,
    responses((status = 201, description = "A ready agent and its first task.", body = Onboarded),
        (status = 429, description = "`quota_exceeded`: without billing, the operator's `quotas.agents_per_user` allows no more agents (`error.details` names the `quota` and its `limit`).", body = crate::error::ErrorBody)))]
pub(super) async fn setup(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<SetupRequest>,
) -> Result<(StatusCode, Reply<Onboarded>), ApiError> {
    let (company, template) = request.parse()?;
    let onboarded = state.core.onboard(&who, &company, &template).await?;
    Ok((StatusCode::CREATED, Reply(onboarded)))
}
