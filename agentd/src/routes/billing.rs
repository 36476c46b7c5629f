//! `/api/billing`: the caller's plan.

use axum::Json as Reply;
use axum::extract::State;

use agentcore::domain::billing::Billing;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::Caller;

pub async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<Billing>, ApiError> {
    Ok(Reply(state.core.billing(&who).await?))
}
