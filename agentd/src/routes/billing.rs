//! `/api/billing`: the caller's plan, and Stripe's webhook.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::HeaderMap;

use agentcore::domain::billing::{Billing, WebhookReceipt};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, RawBody};

#[utoipa::path(get, path = "/api/billing", operation_id = "show_billing", tag = "billing", security(("bearer" = [])),
    responses((status = 200, description = "The caller's plan and its use.", body = Billing)))]
pub(super) async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<Billing>, ApiError> {
    Ok(Reply(state.core.billing(&who).await?))
}

/// Public: authenticated by the `Stripe-Signature` header over the raw body.
#[utoipa::path(post, path = "/api/billing/webhook", operation_id = "stripe_webhook", tag = "billing",
    params(("Stripe-Signature" = Option<String>, Header, description = "Stripe's signature over the raw body.")),
    request_body(content = serde_json::Value, description = "A Stripe event, exactly as Stripe sent it."),
    responses((status = 200, description = "Received; `handled` says whether the service acts on this kind.", body = WebhookReceipt)))]
pub(super) async fn webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Reply<WebhookReceipt>, ApiError> {
    // A header that is not visible ASCII cannot carry a valid signature: treat it as missing.
    let signature = headers.get("stripe-signature").and_then(|value| value.to_str().ok());
    Ok(Reply(state.core.stripe_webhook(signature, &body).await?))
}
