//! Operational routes: liveness, readiness and the OpenAPI document.

use std::sync::LazyLock;

use axum::Json as Reply;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::OpenApi;

use agentcore::api::StatusResponse;

use crate::AppState;
use crate::error::ApiError;

/// The process is up and serving.
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ok\"}`.", body = StatusResponse)))]
pub(super) async fn healthz() -> Reply<StatusResponse> {
    Reply(StatusResponse { status: "ok".into() })
}

/// The process can do its work: the database answers and writes to it work.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ready\"}`; 503 `not_ready`, the message saying why, when the database does not answer or refused the last write (a full disk, a lost connection) and none has succeeded since.", body = StatusResponse)))]
pub(super) async fn readyz(
    State(state): State<AppState>,
) -> Result<Reply<StatusResponse>, ApiError> {
    match state.core.ready().await {
        Ok(()) => Ok(Reply(StatusResponse { status: "ready".into() })),
        Err(error) => {
            let why = match &error {
                agentcore::Error::Storage { cause, .. } => cause.clone(),
                _ => "the database does not answer".to_owned(),
            };
            tracing::warn!(%error, "readiness check failed");
            Err(ApiError::NotReady(why))
        }
    }
}

pub(super) async fn route_not_found() -> ApiError {
    ApiError::RouteNotFound
}

pub(super) async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// The OpenAPI document for the current route table.
pub(crate) fn document() -> OpenApi {
    let (_, mut openapi) = super::api().split_for_parts();
    crate::openapi::add_error_responses(&mut openapi);
    openapi
}

#[allow(
    clippy::expect_used,
    reason = "a derived OpenAPI document has only string keys: serialising it cannot fail"
)]
static DOCUMENT: LazyLock<Bytes> = LazyLock::new(|| {
    Bytes::from(serde_json::to_vec(&document()).expect("the OpenAPI document serialises"))
});

/// `GET /openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/openapi.json", operation_id = "openapi",
    tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document of this service.",
               content_type = "application/json", body = serde_json::Value))
)]
pub(super) async fn openapi_json() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT.clone()).into_response()
}
