//! Operational routes: liveness and readiness.

use axum::Json as Reply;
use axum::extract::State;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ApiError;

/// The process is up and serving.
pub async fn healthz() -> Reply<Value> {
    Reply(json!({ "status": "ok" }))
}

/// The process can do its work: the database answers.
pub async fn readyz(State(state): State<AppState>) -> Result<Reply<Value>, ApiError> {
    match state.core.ready().await {
        Ok(()) => Ok(Reply(json!({ "status": "ready" }))),
        Err(error) => {
            tracing::warn!(%error, "readiness check failed");
            Err(ApiError::NotReady)
        }
    }
}

pub async fn route_not_found() -> ApiError {
    ApiError::RouteNotFound
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}
