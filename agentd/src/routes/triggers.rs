//! `/api/triggers`: the workspace's inbound triggers; and `/hooks/{trigger_id}`, the signed
//! call that queues a task (outside `/api`: it carries no token).

use axum::Json as Reply;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;

use agentcore::ValidationErrors;
use agentcore::api::{CreateTriggerRequest, Deleted, TriggerList, UpdateTriggerRequest};
use agentcore::domain::agent::AgentId;
use agentcore::domain::trigger::{CreatedTrigger, HookAccepted, RotatedSecret, Trigger};
use agentcore::standard_webhooks::Received;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, HookBody, Json, Params, Path, trigger_id};

#[utoipa::path(post, path = "/api/triggers", operation_id = "add_trigger", tag = "triggers", security(("bearer" = [])),
    request_body = CreateTriggerRequest,
    responses((status = 201, description = "The trigger with its signing `secret`, shown only now, and the `url` to call. A bad template is `validation_failed` naming `title` or `description`; an unknown agent is `agent_not_found`.", body = CreatedTrigger),
        (status = 429, description = "`quota_exceeded`: the workspace has 100 triggers (`triggers_per_workspace`).", body = crate::error::ErrorBody)))]
pub(super) async fn add(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<CreateTriggerRequest>,
) -> Result<(StatusCode, Reply<CreatedTrigger>), ApiError> {
    let created = state.core.add_trigger(&who, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(created)))
}

#[derive(Debug, Deserialize)]
pub(super) struct ListParams {
    agent: Option<String>,
}

#[utoipa::path(get, path = "/api/triggers", operation_id = "list_triggers", tag = "triggers", security(("bearer" = [])),
    params(("agent" = Option<String>, Query, description = "Only this agent's triggers.")),
    responses((status = 200, description = "The workspace's triggers, oldest first: all of them, as a workspace has at most 100.", body = TriggerList)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    Params(params): Params<ListParams>,
) -> Result<Reply<TriggerList>, ApiError> {
    let mut errors = ValidationErrors::new();
    let agent = params.agent.and_then(|a| errors.check("agent", AgentId::parse(&a)));
    errors.into_result()?;
    Ok(Reply(state.core.triggers(&who, agent.as_ref()).await?))
}

#[utoipa::path(get, path = "/api/triggers/{id}", operation_id = "show_trigger", tag = "triggers", security(("bearer" = [])),
    params(("id" = String, Path, description = "The trigger's id.")),
    responses((status = 200, description = "The trigger (never its secret).", body = Trigger)))]
pub(super) async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<Trigger>, ApiError> {
    Ok(Reply(state.core.trigger(&who, &trigger_id(&id)?).await?))
}

#[utoipa::path(patch, path = "/api/triggers/{id}", operation_id = "update_trigger", tag = "triggers", security(("bearer" = [])),
    params(("id" = String, Path, description = "The trigger's id.")), request_body = UpdateTriggerRequest,
    responses((status = 200, description = "The trigger after the change.", body = Trigger)))]
pub(super) async fn update(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    Json(request): Json<UpdateTriggerRequest>,
) -> Result<Reply<Trigger>, ApiError> {
    let id = trigger_id(&id)?;
    Ok(Reply(state.core.update_trigger(&who, &id, request.parse()?).await?))
}

#[utoipa::path(delete, path = "/api/triggers/{id}", operation_id = "delete_trigger", tag = "triggers", security(("bearer" = [])),
    params(("id" = String, Path, description = "The trigger's id.")),
    responses((status = 200, description = "The trigger is gone: its URL answers 404; tasks it queued stay.", body = Deleted)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<Deleted>, ApiError> {
    let id = trigger_id(&id)?;
    state.core.delete_trigger(&who, &id).await?;
    Ok(Reply(Deleted { deleted: id.to_string() }))
}

#[utoipa::path(post, path = "/api/triggers/{id}/rotate", operation_id = "rotate_trigger_secret", tag = "triggers", security(("bearer" = [])),
    params(("id" = String, Path, description = "The trigger's id.")),
    responses((status = 200, description = "The new secret, shown only now. The previous one stays valid until `previous_valid_until` (24 hours); one replaced before that is no longer valid.", body = RotatedSecret)))]
pub(super) async fn rotate(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<RotatedSecret>, ApiError> {
    Ok(Reply(state.core.rotate_trigger_secret(&who, &trigger_id(&id)?).await?))
}

/// Public: authenticated by the Standard Webhooks signature over the exact body.
#[utoipa::path(post, path = "/hooks/{trigger_id}", operation_id = "call_trigger", tag = "triggers",
    params(("trigger_id" = String, Path, description = "The trigger's id (its `url`'s last segment)."),
        ("webhook-id" = String, Header, description = "The message's id: the same on every retry; a second call with it gets the first one's task (at most 256 visible ASCII characters)."),
        ("webhook-timestamp" = String, Header, description = "Unix seconds when the call was signed: within 300 seconds of the server's clock, either way."),
        ("webhook-signature" = String, Header, description = "`v1,<base64 HMAC-SHA256 of \"id.timestamp.body\" with the secret>`; several, space-separated, are allowed.")),
    request_body(content = serde_json::Value, description = "A JSON object of at most 65,536 bytes; the templates' placeholders are filled from it."),
    responses((status = 202, description = "Accepted: a task was queued (`duplicate: false`).", body = HookAccepted),
        (status = 200, description = "This `webhook-id` was accepted before: its task, and nothing new written (`duplicate: true`).", body = HookAccepted),
        (status = 400, description = "`validation_failed` (field `body`): the body is not a JSON object.", body = crate::error::ErrorBody),
        (status = 401, description = "`invalid_signature`: a header missing, no signature matching, or a timestamp outside the window. Nothing is written.", body = crate::error::ErrorBody),
        (status = 404, description = "`trigger_not_found`.", body = crate::error::ErrorBody),
        (status = 409, description = "`trigger_disabled`: the signature is good but the trigger is disabled. Nothing is written.", body = crate::error::ErrorBody),
        (status = 413, description = "`payload_too_large`: over 65,536 bytes; refused before the rest is read.", body = crate::error::ErrorBody),
        (status = 429, description = "`quota_exceeded`: 60 calls to this trigger in the last minute (`trigger_calls_per_minute`), or the backlog's queue quotas.", body = crate::error::ErrorBody)))]
pub(super) async fn call(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    HookBody(body): HookBody,
) -> Result<(StatusCode, Reply<HookAccepted>), ApiError> {
    // A header that is not visible ASCII cannot carry a valid signature: treat it as missing.
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let received = Received {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
    };
    let accepted = state.core.call_trigger(&id, received, &body).await?;
    let status = if accepted.duplicate { StatusCode::OK } else { StatusCode::ACCEPTED };
    Ok((status, Reply(accepted)))
}
