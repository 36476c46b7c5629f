//! `/auth/*`: registering, logging in and out, and who am I.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::StatusCode;

use agentcore::Session;
use agentcore::api::{LoginRequest, RegisterRequest, StatusResponse};
use agentcore::domain::user::User;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json};
use crate::limits::SignIn;

#[utoipa::path(post, path = "/auth/register", operation_id = "register", tag = "accounts",
    request_body = RegisterRequest,
    responses((status = 201, description = "The account and a token for it.", body = Session)))]
pub(super) async fn register(
    State(state): State<AppState>,
    _: SignIn,
    Json(request): Json<RegisterRequest>,
) -> Result<(StatusCode, Reply<Session>), ApiError> {
    let session = state.core.register(request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(session)))
}

#[utoipa::path(post, path = "/auth/login", operation_id = "login", tag = "accounts",
    request_body = LoginRequest,
    responses((status = 200, description = "A token; every failure is the same 401.", body = Session)))]
pub(super) async fn login(
    State(state): State<AppState>,
    _: SignIn,
    Json(request): Json<LoginRequest>,
) -> Result<Reply<Session>, ApiError> {
    let credentials = request.parse()?;
    state.http.limits.account(&credentials.email)?;
    Ok(Reply(state.core.login(credentials).await?))
}

#[utoipa::path(get, path = "/auth/me", operation_id = "me", tag = "accounts", security(("bearer" = [])),
    responses((status = 200, description = "The caller.", body = User)))]
pub(super) async fn me(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<User>, ApiError> {
    Ok(Reply(state.core.me(&who).await?))
}

#[utoipa::path(post, path = "/auth/logout", operation_id = "logout", tag = "accounts", security(("bearer" = [])),
    responses((status = 200, description = "Every token of the caller is revoked: `logged_out`.", body = StatusResponse)))]
pub(super) async fn logout(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<StatusResponse>, ApiError> {
    state.core.logout(&who).await?;
    Ok(Reply(StatusResponse { status: "logged_out".into() }))
}
