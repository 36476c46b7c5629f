//! The webhooks page (`/webhooks`): the workspace's outbound endpoints, and one endpoint's page
//! (`/webhooks/{id}`) with its last deliveries and what each attempt got. Every member reads
//! them; owners and admins (`Need::Manage`, as the facade asks) get the forms: create, enable
//! or disable, rotate the secret, send a test event, redeliver, delete (confirmed first).
//!
//! A secret is shown once, on the page that answers the form that made it (creating or
//! rotating), and never again: the store keeps it sealed, and no page reads it back.

use axum::extract::{Path, State};
use axum::http::header::HeaderValue;
use axum::response::Response;
use minijinja::{Value, context};

use agentcore::api::{CreateWebhookRequest, UpdateWebhookRequest};
use agentcore::domain::webhook::{DEFAULT_PAGE, DeliveryId, SUBSCRIBABLE, WebhookId};
use agentcore::domain::workspace::Need;
use agentcore::{Error, Principal, Resource};

use crate::AppState;
use crate::error::ApiError;
use crate::ui::form::Fields;
use crate::ui::render::FormErrors;
use crate::ui::session::{Csrf, Viewer};

use super::confirm::{Ask, ask};
use super::{Failed, Shown, done, fail, refused, see, signed_in};

/// `GET /webhooks`.
pub(crate) async fn page(State(state): State<AppState>, Viewer(who): Viewer, csrf: Csrf) -> Shown {
    list_page(&state, &who, &csrf, Value::UNDEFINED, Value::UNDEFINED).await
}

/// The list of endpoints. `form`: the create form when it was refused (its `values`, ticked
/// `lists` and `errors`); `made`: a new endpoint and its secret, shown this once.
async fn list_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    form: Value,
    made: Value,
) -> Shown {
    let webhooks = state.core.webhooks(who).await.map_err(fail)?.webhooks;
    let events: Vec<&str> = SUBSCRIBABLE.iter().map(|kind| kind.as_str()).collect();
    let manage = who.role.allows(Need::Manage);
    signed_in(
        state,
        who,
        "webhooks.html",
        context! { csrf => csrf.0, nav => "webhooks", webhooks, events, manage, form, made },
    )
    .await
}

/// `POST /webhooks`: a new endpoint (URL, event checkboxes, description); the answer shows its
/// secret.
pub(crate) async fn create(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    fields: Fields,
) -> Shown {
    let request = CreateWebhookRequest {
        url: fields.get("url"),
        events: Some(fields.all("events")),
        description: fields.text("description"),
    };
    let created =
        async { Ok::<_, ApiError>(state.core.create_webhook(&who, request.parse()?).await?) };
    match created.await {
        Ok(created) => {
            let made = context! { webhook => created.webhook, secret => created.secret };
            shown_once(list_page(&state, &who, &csrf, Value::UNDEFINED, made).await, "/webhooks")
        }
        Err(error) => {
            let form = context! {
                values => fields.values(), lists => fields.lists(), errors => FormErrors::of(&error),
            };
            let page = list_page(&state, &who, &csrf, form, Value::UNDEFINED).await?;
            refused(shown_once(Ok(page), "/webhooks")?, &error)
        }
    }
}

/// `GET /webhooks/{id}`: the endpoint, its actions and its last deliveries.
pub(crate) async fn show(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(id): Path<String>,
) -> Shown {
    let id = webhook_id(&id)?;
    endpoint_page(&state, &who, &csrf, &id, Value::UNDEFINED).await
}

/// One endpoint's page; `rotated`: its new secret, shown this once.
async fn endpoint_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    id: &WebhookId,
    rotated: Value,
) -> Shown {
    let webhook = state.core.webhook(who, id).await.map_err(fail)?;
    let deliveries =
        state.core.webhook_deliveries(who, id, None, DEFAULT_PAGE).await.map_err(fail)?;
    let manage = who.role.allows(Need::Manage);
    signed_in(
        state,
        who,
        "webhook.html",
        context! {
            csrf => csrf.0, nav => "webhooks", webhook, manage, rotated,
            deliveries => deliveries.deliveries, page_size => DEFAULT_PAGE,
        },
    )
    .await
}

/// `POST /webhooks/{id}/{command}`: `enable`, `disable`, `rotate` (the answer shows the new
/// secret), `test` (queues a `webhook.test` event) or `delete`.
pub(crate) async fn command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((id, command)): Path<(String, String)>,
) -> Shown {
    let id = webhook_id(&id)?;
    let here = format!("/webhooks/{id}");
    let core = &state.core;
    match command.as_str() {
        "enable" | "disable" => {
            let enabled = command == "enable";
            let request = UpdateWebhookRequest { enabled: Some(enabled), ..Default::default() };
            let patch = request.parse().map_err(fail)?;
            core.update_webhook(&who, &id, patch).await.map_err(fail)?;
            let message = if enabled {
                "The endpoint is enabled: what waited is sent now."
            } else {
                "The endpoint is disabled: its deliveries wait until it is enabled."
            };
            done(&here, message)
        }
        "rotate" => {
            let rotated = core.rotate_webhook_secret(&who, &id).await.map_err(fail)?;
            let page =
                endpoint_page(&state, &who, &csrf, &id, Value::from_serialize(&rotated)).await;
            shown_once(page, &here)
        }
        "test" => {
            let queued = core.test_webhook(&who, &id).await.map_err(fail)?;
            done(&here, format!("A test event ({}) was queued.", queued.webhook_id))
        }
        "delete" => {
            core.delete_webhook(&who, &id).await.map_err(fail)?;
            done("/webhooks", "The endpoint was deleted, with its deliveries.")
        }
        _ => Err(fail(ApiError::RouteNotFound)),
    }
}

/// `GET /webhooks/{id}/{command}`: deleting asks first; the other commands go to the
/// endpoint's page.
pub(crate) async fn confirm(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((id, command)): Path<(String, String)>,
) -> Shown {
    let id = webhook_id(&id)?;
    let here = format!("/webhooks/{id}");
    match command.as_str() {
        "delete" => {}
        "enable" | "disable" | "rotate" | "test" => return see(&here),
        _ => return Err(fail(ApiError::RouteNotFound)),
    }
    let webhook = state.core.webhook(&who, &id).await.map_err(fail)?;
    let page = Ask {
        title: format!("Delete the endpoint {}?", webhook.url),
        intro: "This cannot be undone. Nothing more is sent to it, and it loses:".into(),
        lost: vec![
            "its deliveries and their answers, with those still waiting to be sent".into(),
            "its signing secret (a new endpoint gets a new one)".into(),
        ],
        action: format!("{here}/delete"),
        button: "Delete the endpoint".into(),
        back: here,
        ..Ask::default()
    };
    ask(&state, &who, &csrf, "webhooks", page).await
}

/// `POST /webhooks/{id}/deliveries/{delivery_id}/redeliver`: the same message again.
pub(crate) async fn redeliver(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    Path((id, delivery)): Path<(String, String)>,
) -> Shown {
    let id = webhook_id(&id)?;
    let delivery = DeliveryId::parse(&delivery)
        .map_err(|_| fail(Error::not_found(Resource::WebhookDelivery, &delivery)))?;
    let queued = state.core.redeliver_webhook(&who, &id, &delivery).await.map_err(fail)?;
    let message = format!("The message {} was queued again.", queued.webhook_id);
    done(&format!("/webhooks/{id}"), message)
}

/// `GET` on a redelivery's address: to the endpoint's page, sending nothing.
pub(crate) async fn to_endpoint(Path((id, _)): Path<(String, String)>) -> Shown {
    see(&format!("/webhooks/{}", webhook_id(&id)?))
}

/// An id that cannot be an endpoint's is an endpoint that does not exist.
fn webhook_id(raw: &str) -> Result<WebhookId, Failed> {
    WebhookId::parse(raw).map_err(|_| fail(Error::not_found(Resource::Webhook, raw)))
}

/// A page answering a form at `to`'s address, so that reloading it (htmx puts the address in
/// the history) shows that page and not the secret again.
fn shown_once(page: Shown, to: &str) -> Shown {
    let mut page: Response = page?;
    if let Ok(to) = HeaderValue::from_str(to) {
        page.headers_mut().insert("hx-push-url", to);
    }
    Ok(page)
}
