//! `/api/chat/interactions`: what Discord POSTs when someone uses a slash command or clicks a
//! button, for the service's application or for a user's own bot (`/{connection_id}`).

use axum::Json as Reply;
use axum::extract::State;
use axum::http::HeaderMap;

use agentcore::InteractionEndpoint;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Path, RawBody};

/// Public: authenticated by `X-Signature-Ed25519` over `X-Signature-Timestamp` and the raw body.
#[utoipa::path(post, path = "/api/chat/interactions", operation_id = "discord_interaction", tag = "chat",
    params(
        ("X-Signature-Ed25519" = Option<String>, Header, description = "Discord's Ed25519 signature (hex) over the timestamp and the raw body."),
        ("X-Signature-Timestamp" = Option<String>, Header, description = "Unix seconds; refused when more than five minutes away.")),
    request_body(content = serde_json::Value, description = "A Discord interaction, exactly as Discord sent it."),
    responses((status = 200, description = "Discord's interaction response (PONG, a message, deferred, choices).", body = serde_json::Value)))]
pub(super) async fn service(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Reply<serde_json::Value>, ApiError> {
    answer(&state, InteractionEndpoint::Service, &headers, &body).await
}

/// Public, for a connection made with the user's own bot (whose application key it carries).
#[utoipa::path(post, path = "/api/chat/interactions/{connection_id}", operation_id = "discord_connection_interaction", tag = "chat",
    params(
        ("connection_id" = String, Path, description = "The connection's id, as `GET /api/chat/connections` shows it."),
        ("X-Signature-Ed25519" = Option<String>, Header, description = "Discord's Ed25519 signature (hex) over the timestamp and the raw body."),
        ("X-Signature-Timestamp" = Option<String>, Header, description = "Unix seconds; refused when more than five minutes away.")),
    request_body(content = serde_json::Value, description = "A Discord interaction, exactly as Discord sent it."),
    responses((status = 200, description = "Discord's interaction response (PONG, a message, deferred, choices).", body = serde_json::Value)))]
pub(super) async fn connection(
    State(state): State<AppState>,
    Path(connection): Path<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Reply<serde_json::Value>, ApiError> {
    answer(&state, InteractionEndpoint::Connection(&connection), &headers, &body).await
}

async fn answer(
    state: &AppState,
    endpoint: InteractionEndpoint<'_>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Reply<serde_json::Value>, ApiError> {
    // A header that is not visible ASCII cannot carry a valid signature: treat it as missing.
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let signature = header("x-signature-ed25519");
    let timestamp = header("x-signature-timestamp");
    let reply = state.core.interaction(endpoint, signature, timestamp, body).await?;
    Ok(Reply(agentcore::discord::interaction::wire(&reply)))
}
