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

pub async fn register(
    State(state): State<AppState>,
    Json(request): Json<RegisterRequest>,
) -> Result<(StatusCode, Reply<Session>), ApiError> {
    let session = state.core.register(request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(session)))
}

pub async fn login(
    State(state): State<AppState>,
    Json(request): Json<LoginRequest>,
) -> Result<Reply<Session>, ApiError> {
    Ok(Reply(state.core.login(request.parse()?).await?))
}

pub async fn me(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<User>, ApiError> {
    Ok(Reply(state.core.me(&who).await?))
}

pub async fn logout(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<StatusResponse>, ApiError> {
    state.core.logout(&who).await?;
    Ok(Reply(StatusResponse { status: "logged_out".into() }))
}
