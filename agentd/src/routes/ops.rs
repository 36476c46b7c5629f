//! Operational routes: liveness and readiness.

use axum::Json as Reply;
use axum::extract::State;

use agentcore::api::StatusResponse;

use crate::AppState;
use crate::error::ApiError;

/// The process is up and serving.
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ok\"}`.", body = StatusResponse)))]
pub async fn healthz() -> Reply<StatusResponse> {
    Reply(StatusResponse { status: "ok".into() })
}

/// The process can do its work: the database answers.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ready\"}`; 503 `not_ready` when the database does not answer.", body = StatusResponse)))]
pub async fn readyz(State(state): State<AppState>) -> Result<Reply<StatusResponse>, ApiError> {
    match state.core.ready().await {
        Ok(()) => Ok(Reply(StatusResponse { status: "ready".into() })),
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
