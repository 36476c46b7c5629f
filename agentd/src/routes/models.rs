//! `/api/models`: the language models this server can call.

use axum::Json as Reply;
use axum::extract::State;

use agentcore::api::ModelList;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::Caller;

#[utoipa::path(get, path = "/api/models", operation_id = "list_models", tag = "models", security(("bearer" = [])),
    responses((status = 200, description = "The default model, the models worth offering, the usable providers (`echo` first) and every configured provider with its kind, address and whether it has a key (never the key). Any member may read it, whatever their role.", body = ModelList)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<ModelList>, ApiError> {
    Ok(Reply(state.core.model_list(&who).await?))
}
