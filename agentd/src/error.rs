//! The one place where errors become HTTP responses.
//!
//! Every error, whatever produced it (the facade, a malformed body, an unknown route), leaves
//! as `{"error": {"code", "message", "request_id", "details"?}}` with the status docs/api.md
//! gives its code. Causes of 5xx responses are logged here and never sent.

use std::collections::BTreeMap;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use agentcore::{Error, Refusal, StorageFault};

use crate::request_id;

/// Errors of the HTTP layer, around the facade's own.
#[derive(Debug)]
pub enum ApiError {
    Core(Error),
    /// The body is not JSON at all.
    InvalidJson(String),
    /// The body is JSON but a field has the wrong type; field path to problem.
    WrongTypes(BTreeMap<String, String>),
    PayloadTooLarge,
    RouteNotFound,
    MethodNotAllowed,
    /// Why the node cannot do its work now, in words for the operator.
    NotReady(String),
    /// Over an abuse limit; the wait before the next attempt is allowed.
    RateLimited(std::time::Duration),
    /// The request took longer than `http.request_timeout_seconds`.
    Timeout,
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        ApiError::Core(error)
    }
}

impl From<agentcore::ValidationErrors> for ApiError {
    fn from(errors: agentcore::ValidationErrors) -> Self {
        ApiError::Core(Error::Validation(errors))
    }
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Core(error) => match error {
                Error::Refused {
                    kind: Refusal::InvalidInteractionSignature | Refusal::InvalidHookSignature,
                    ..
                } => StatusCode::UNAUTHORIZED,
                Error::Validation(_) | Error::Refused { .. } => StatusCode::BAD_REQUEST,
                Error::Unauthorized => StatusCode::UNAUTHORIZED,
                Error::Forbidden(_) => StatusCode::FORBIDDEN,
                Error::NotFound { .. } => StatusCode::NOT_FOUND,
                Error::Conflict { .. } => StatusCode::CONFLICT,
                Error::PlanLimitReached { .. } => StatusCode::PAYMENT_REQUIRED,
                Error::QuotaExceeded { .. } => StatusCode::TOO_MANY_REQUESTS,
                Error::NotConfigured(_) => StatusCode::SERVICE_UNAVAILABLE,
                Error::Upstream(_) => StatusCode::BAD_GATEWAY,
                Error::Storage { fault: StorageFault::Full, .. } => {
                    StatusCode::INSUFFICIENT_STORAGE
                }
                Error::Storage { fault: StorageFault::Unavailable, .. } => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            },
            ApiError::InvalidJson(_) | ApiError::WrongTypes(_) => StatusCode::BAD_REQUEST,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RouteNotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::NotReady(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Timeout => StatusCode::REQUEST_TIMEOUT,
        }
    }

    pub fn code(&self) -> String {
        match self {
            ApiError::Core(error) => error.code(),
            ApiError::InvalidJson(_) => "invalid_json".into(),
            ApiError::WrongTypes(_) => "validation_failed".into(),
            ApiError::PayloadTooLarge => "payload_too_large".into(),
            ApiError::RouteNotFound => "route_not_found".into(),
            ApiError::MethodNotAllowed => "method_not_allowed".into(),
            ApiError::NotReady(_) => "not_ready".into(),
            ApiError::RateLimited(_) => "rate_limited".into(),
            ApiError::Timeout => "request_timeout".into(),
        }
    }

    fn message(&self) -> String {
        match self {
            ApiError::Core(error) => error.public_message(),
            ApiError::InvalidJson(problem) => {
                format!("The request body is not valid JSON: {problem}.")
            }
            ApiError::WrongTypes(_) => "The request has fields of the wrong type.".into(),
            ApiError::PayloadTooLarge => {
                "The request body is larger than this server accepts.".into()
            }
            ApiError::RouteNotFound => "No such route.".into(),
            ApiError::MethodNotAllowed => "This route does not take that method.".into(),
            ApiError::NotReady(why) => format!("Not ready: {why}."),
            ApiError::RateLimited(wait) => {
                format!("Too many requests; try again in {} s.", retry_after_seconds(*wait))
            }
            ApiError::Timeout => "The request took too long and was abandoned.".into(),
        }
    }

    fn details(&self) -> Option<BTreeMap<String, String>> {
        match self {
            ApiError::Core(Error::Validation(errors)) => Some(errors.fields().clone()),
            ApiError::WrongTypes(fields) => Some(fields.clone()),
            ApiError::Core(Error::QuotaExceeded { quota, limit }) => Some(BTreeMap::from([
                ("quota".to_owned(), quota.as_str().to_owned()),
                ("limit".to_owned(), limit.to_string()),
            ])),
            _ => None,
        }
    }

    /// Logs the cause of a server-side failure (never sent to the client).
    pub(crate) fn log(&self) {
        if let ApiError::Core(Error::Internal(cause)) = self {
            tracing::error!(error = %cause, "request failed");
        } else if self.status().is_server_error() {
            tracing::warn!(code = %self.code(), "request failed");
        }
    }

    /// The body, carrying `request_id`.
    pub fn body(&self, request_id: &str) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message: self.message(),
                request_id: request_id.to_owned(),
                details: self.details(),
            },
        }
    }
}

/// The service's error body: `{"error": {"code", "message", "request_id", "details"?}}`.
/// The OpenAPI document describes every error response with this type.
#[derive(Debug, Serialize, ToSchema)]
#[schema(title = "Error")]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable snake_case code, such as `agent_not_found` or `validation_failed`.
    pub code: String,
    /// One sentence for a person.
    pub message: String,
    /// The `X-Request-Id` of the request, for the logs.
    pub request_id: String,
    /// For `validation_failed`: each bad field and what is wrong with it.
    #[schema(nullable = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<BTreeMap<String, String>>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        self.log();
        let request_id = request_id::current().unwrap_or_default();
        let mut response = (status, Json(self.body(&request_id))).into_response();
        if let ApiError::RateLimited(wait) = &self {
            response.headers_mut().insert("retry-after", retry_after_seconds(*wait).into());
        }
        if let ApiError::PayloadTooLarge = &self {
            // The rest of the body is left unread, so the connection cannot carry another
            // request: say so, or a client that reuses it finds it closed under its next one.
            response
                .headers_mut()
                .insert("connection", axum::http::HeaderValue::from_static("close"));
        }
        // Only a missing or refused token asks for one: a signed call (a trigger's, Discord's)
        // is refused for its signature, which no bearer token would mend.
        if let ApiError::Core(Error::Unauthorized) = &self {
            response
                .headers_mut()
                .insert("www-authenticate", axum::http::HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Seconds for `Retry-After`: rounded up, at least one.
pub(crate) fn retry_after_seconds(wait: std::time::Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0).max(u64::from(wait.is_zero()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentcore::{Conflict, Refusal, Resource, ValidationErrors};
    use http_body_util::BodyExt;
    use serde_json::Value;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_seconds(std::time::Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(std::time::Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(std::time::Duration::from_secs(6)), 6);
        assert_eq!(retry_after_seconds(std::time::Duration::from_millis(6001)), 7);
    }

    async fn rendered(error: ApiError) -> (StatusCode, Value) {
        let response = error.into_response();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn each_error_has_its_documented_status_and_code() {
        let cases: Vec<(ApiError, u16, &str)> = vec![
            (ValidationErrors::single("name", "is required").into(), 400, "validation_failed"),
            (ApiError::InvalidJson("eof".into()), 400, "invalid_json"),
            (Error::refused(Refusal::InvalidBotToken, "bad").into(), 400, "invalid_bot_token"),
            (Error::refused(Refusal::GuildNotAccessible, "no").into(), 400, "guild_not_accessible"),
            (Error::Unauthorized.into(), 401, "unauthorized"),
            (
                Error::refused(Refusal::InvalidInteractionSignature, "no").into(),
                401,
                "invalid_interaction_signature",
            ),
            (Error::refused(Refusal::InvalidHookSignature, "no").into(), 401, "invalid_signature"),
            (Error::not_found(Resource::Trigger, "t").into(), 404, "trigger_not_found"),
            (Error::conflict(Conflict::TriggerDisabled, "x").into(), 409, "trigger_disabled"),
            (
                Error::PlanLimitReached { plan: "free".into(), limit: 3 }.into(),
                402,
                "plan_limit_reached",
            ),
            (Error::Forbidden("no".into()).into(), 403, "forbidden"),
            (Error::not_found(Resource::Agent, "a").into(), 404, "agent_not_found"),
            (Error::not_found(Resource::Task, "t").into(), 404, "task_not_found"),
            (Error::conflict(Conflict::AgentExists, "x").into(), 409, "agent_exists"),
            (Error::conflict(Conflict::TaskNotEditable, "x").into(), 409, "task_not_editable"),
            (Error::conflict(Conflict::AgentNotMapped, "x").into(), 409, "agent_not_mapped"),
            (
                Error::conflict(Conflict::NotAwaitingApproval, "x").into(),
                409,
                "not_awaiting_approval",
            ),
            (Error::not_found(Resource::Approval, "p").into(), 404, "approval_not_found"),
            (Error::not_found(Resource::Connection, "g").into(), 404, "connection_not_found"),
            (Error::not_found(Resource::Mapping, "a").into(), 404, "mapping_not_found"),
            (ApiError::PayloadTooLarge, 413, "payload_too_large"),
            (ApiError::Timeout, 408, "request_timeout"),
            (ApiError::RateLimited(std::time::Duration::from_secs(3)), 429, "rate_limited"),
            (Error::internal("boom").into(), 500, "internal"),
            (Error::Upstream("Discord failed".into()).into(), 502, "upstream_error"),
            (
                Error::NotConfigured("discord.client_id is not set".into()).into(),
                503,
                "not_configured",
            ),
            (
                Error::Storage { fault: StorageFault::Full, cause: "disk".into() }.into(),
                507,
                "storage_full",
            ),
            (
                Error::Storage { fault: StorageFault::Unavailable, cause: "gone".into() }.into(),
                503,
                "storage_unavailable",
            ),
            (ApiError::NotReady("the disk is full".into()), 503, "not_ready"),
        ];
        for (error, status, code) in cases {
            let (got_status, body) = rendered(error).await;
            assert_eq!(got_status.as_u16(), status, "{code}");
            assert_eq!(body["error"]["code"], code);
            assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
            assert!(body["error"]["request_id"].is_string());
        }
    }

    #[test]
    fn a_body_left_unread_closes_the_connection() {
        let response = ApiError::PayloadTooLarge.into_response();
        assert_eq!(response.headers()["connection"], "close");
        let response = ApiError::InvalidJson("eof".into()).into_response();
        assert!(response.headers().get("connection").is_none());
    }

    #[tokio::test]
    async fn validation_details_name_each_field_and_internals_stay_hidden() {
        let (_, body) =
            rendered(ValidationErrors::single("email", "must be a valid e-mail address").into())
                .await;
        assert_eq!(body["error"]["details"]["email"], "must be a valid e-mail address");

        let (_, body) =
            rendered(Error::internal("pool timed out: postgres://u:secret@db").into()).await;
        assert!(!body.to_string().contains("secret"));
        assert!(body["error"].get("details").is_none());

        let cause = "error returned from database: (code: 13) database or disk is full".into();
        let (_, body) = rendered(Error::Storage { fault: StorageFault::Full, cause }.into()).await;
        assert!(!body.to_string().contains("code: 13"), "the cause is for the log only");
        assert!(body["error"]["message"].as_str().unwrap().contains("disk is full"));
    }
}
