//! `/api/webhooks`: a workspace's outbound webhook endpoints, their secrets, a test event,
//! their deliveries and redelivery.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::StatusCode;

use agentcore::api::{
    CreateWebhookRequest, Deleted, DeliveryPage, DeliveryParams, UpdateWebhookRequest, WebhookList,
};
use agentcore::domain::webhook::{
    CreatedWebhook, Delivery, DeliveryId, RotatedSecret, Webhook, WebhookId,
};
use agentcore::{Error, Resource};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Params, Path};

#[utoipa::path(post, path = "/api/webhooks", operation_id = "create_webhook", tag = "webhooks", security(("bearer" = [])),
    request_body = CreateWebhookRequest,
    responses((status = 201, description = "The endpoint, with its signing secret (`whsec_...`), shown only here. A URL that is not http(s), carries user info, is longer than 2,000 characters or leads to a non-public address the operator did not allow is `validation_failed` on `url`; an unknown event type on `events`. Owners and admins only (403).", body = CreatedWebhook),
        (status = 429, description = "`quota_exceeded`: the workspace has 20 endpoints (`webhooks_per_workspace`).", body = crate::error::ErrorBody)))]
pub(super) async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<CreateWebhookRequest>,
) -> Result<(StatusCode, Reply<CreatedWebhook>), ApiError> {
    let created = state.core.create_webhook(&who, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(created)))
}

#[utoipa::path(get, path = "/api/webhooks", operation_id = "list_webhooks", tag = "webhooks", security(("bearer" = [])),
    responses((status = 200, description = "The workspace's endpoints, oldest first (never their secrets).", body = WebhookList)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<WebhookList>, ApiError> {
    Ok(Reply(state.core.webhooks(&who).await?))
}

#[utoipa::path(get, path = "/api/webhooks/{id}", operation_id = "show_webhook", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "The endpoint's id.")),
    responses((status = 200, description = "The endpoint.", body = Webhook)))]
pub(super) async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<Webhook>, ApiError> {
    Ok(Reply(state.core.webhook(&who, &webhook_id(&id)?).await?))
}

#[utoipa::path(patch, path = "/api/webhooks/{id}", operation_id = "update_webhook", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "The endpoint's id.")), request_body = UpdateWebhookRequest,
    responses((status = 200, description = "The endpoint as changed. `enabled: true` clears the failure run.", body = Webhook)))]
pub(super) async fn update(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    Json(request): Json<UpdateWebhookRequest>,
) -> Result<Reply<Webhook>, ApiError> {
    let id = webhook_id(&id)?;
    Ok(Reply(state.core.update_webhook(&who, &id, request.parse()?).await?))
}

#[utoipa::path(delete, path = "/api/webhooks/{id}", operation_id = "delete_webhook", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "The endpoint's id.")),
    responses((status = 200, description = "The endpoint and its deliveries are gone.", body = Deleted)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<Deleted>, ApiError> {
    let id = webhook_id(&id)?;
    state.core.delete_webhook(&who, &id).await?;
    Ok(Reply(Deleted { deleted: id.to_string() }))
}

#[utoipa::path(post, path = "/api/webhooks/{id}/rotate", operation_id = "rotate_webhook_secret", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "The endpoint's id.")),
    responses((status = 200, description = "The new secret, shown only here. For 24 hours deliveries carry a signature by each secret, the new one first.", body = RotatedSecret)))]
pub(super) async fn rotate(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<RotatedSecret>, ApiError> {
    Ok(Reply(state.core.rotate_webhook_secret(&who, &webhook_id(&id)?).await?))
}

#[utoipa::path(post, path = "/api/webhooks/{id}/test", operation_id = "test_webhook", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "The endpoint's id.")),
    responses((status = 202, description = "A `webhook.test` event, queued for the endpoint.", body = Delivery), (status = 429, description = "`quota_exceeded`: the endpoint has 1,000 deliveries pending (`pending_deliveries_per_webhook`).", body = crate::error::ErrorBody)))]
pub(super) async fn test(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Reply<Delivery>), ApiError> {
    let delivery = state.core.test_webhook(&who, &webhook_id(&id)?).await?;
    Ok((StatusCode::ACCEPTED, Reply(delivery)))
}

#[utoipa::path(get, path = "/api/webhooks/{id}/deliveries", operation_id = "list_webhook_deliveries", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "The endpoint's id."), DeliveryParams),
    responses((status = 200, description = "The endpoint's deliveries, newest first, each with its attempts' answers (the latest first).", body = DeliveryPage)))]
pub(super) async fn deliveries(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    Params(params): Params<DeliveryParams>,
) -> Result<Reply<DeliveryPage>, ApiError> {
    let id = webhook_id(&id)?;
    let (before, limit) = params.parse()?;
    Ok(Reply(state.core.webhook_deliveries(&who, &id, before, limit).await?))
}

#[utoipa::path(post, path = "/api/webhooks/{id}/deliveries/{delivery_id}/redeliver", operation_id = "redeliver_webhook", tag = "webhooks", security(("bearer" = [])),
    params(("id" = String, Path, description = "The endpoint's id."), ("delivery_id" = String, Path, description = "The delivery's id.")),
    responses((status = 202, description = "The same message (same `webhook-id` and body), queued again as a new delivery.", body = Delivery), (status = 429, description = "`quota_exceeded`: the endpoint has 1,000 deliveries pending (`pending_deliveries_per_webhook`).", body = crate::error::ErrorBody)))]
pub(super) async fn redeliver(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path((id, delivery)): Path<(String, String)>,
) -> Result<(StatusCode, Reply<Delivery>), ApiError> {
    let delivery = DeliveryId::parse(&delivery)
        .map_err(|_| ApiError::from(Error::not_found(Resource::WebhookDelivery, &delivery)))?;
    let queued = state.core.redeliver_webhook(&who, &webhook_id(&id)?, &delivery).await?;
    Ok((StatusCode::ACCEPTED, Reply(queued)))
}

/// An id that cannot be an endpoint's is an endpoint that does not exist.
fn webhook_id(raw: &str) -> Result<WebhookId, ApiError> {
    WebhookId::parse(raw).map_err(|_| Error::not_found(Resource::Webhook, raw).into())
}
