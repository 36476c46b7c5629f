//! `/api/audit`: the workspace's audit log, a page at a time, exported whole as NDJSON, and
//! its chain checked (owners and admins).

use axum::Json as Reply;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use agentcore::api::AuditParams;
use agentcore::domain::audit::{AuditEntry, Verified};
use agentcore::{AuditPage, Core, Principal};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Params};

#[utoipa::path(get, path = "/api/audit", operation_id = "audit", tag = "workspaces", security(("bearer" = [])),
    params(AuditParams),
    responses((status = 200, description = "Entries of the workspace's audit log, newest first: who (`actor_*`) did what (`action`) to which object (`target_*`), from which `address`, with the `before` and `after` of what changed (secrets masked), each chained to the one before by `prev_hash` and `hash`. Owners and admins.", body = AuditPage)))]
pub(super) async fn page(
    State(state): State<AppState>,
    Caller(who): Caller,
    Params(params): Params<AuditParams>,
) -> Result<Reply<AuditPage>, ApiError> {
    Ok(Reply(state.core.audit(&who, params.parse()?).await?))
}

#[utoipa::path(get, path = "/api/audit/export", operation_id = "export_audit", tag = "workspaces", security(("bearer" = [])),
    responses((status = 200, description = "The whole audit log, oldest first, one JSON entry per line (NDJSON), read a thousand entries at a time: what `agentctl audit verify` checks.", content_type = "application/x-ndjson", body = AuditEntry)))]
pub(super) async fn export(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Response, ApiError> {
    // The first batch is read before answering, so a refusal is an error, not an empty file.
    let first = state.core.audit_export(&who, 0).await?;
    let lines = futures_util::stream::unfold(
        (state.core.clone(), who, Some(first)),
        |(core, who, batch): (Core, Principal, Option<Vec<AuditEntry>>)| async move {
            let batch = match batch {
                Some(batch) => batch,
                None => return None,
            };
            let last = batch.last()?.seq;
            let mut text = String::new();
            for entry in &batch {
                text.push_str(&serde_json::to_string(entry).unwrap_or_default());
                text.push('\n');
            }
            let next = if batch.len() < 1_000 {
                Some(Vec::new())
            } else {
                match core.audit_export(&who, last).await {
                    Ok(next) => Some(next),
                    Err(error) => {
                        tracing::warn!(%error, "audit export cut short");
                        None
                    }
                }
            };
            Some((Ok::<_, std::convert::Infallible>(text), (core, who, next)))
        },
    );
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(lines)).into_response())
}

#[utoipa::path(get, path = "/api/audit/verify", operation_id = "verify_audit", tag = "workspaces", security(("bearer" = [])),
    responses((status = 200, description = "The chain checked as stored: `intact`, the entries it covers and its `last_hash` (keep it: an entry removed from the end later shows as a different last hash), or the first entry where it breaks (`broken_at`, `reason`).", body = Verified)))]
pub(super) async fn verify(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<Verified>, ApiError> {
    Ok(Reply(state.core.verify_audit(&who).await?))
}
