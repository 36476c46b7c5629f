//! `/api/billing`: the caller's plan, and Stripe's webhook.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::HeaderMap;

use agentcore::domain::billing::{Billing, WebhookReceipt};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, RawBody};

pub async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<Billing>, ApiError> {
    Ok(Reply(state.core.billing(&who).await?))
}

/// Public: authenticated by the `Stripe-Signature` header over the raw body.
pub async fn webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Reply<WebhookReceipt>, ApiError> {
    // A header that is not visible ASCII cannot carry a valid signature: treat it as missing.
    let signature = headers.get("stripe-signature").and_then(|value| value.to_str().ok());
    Ok(Reply(state.core.stripe_webhook(signature, &body).await?))
}
