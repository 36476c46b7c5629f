//! An agent's triggers, as the Triggers section of its page (`#triggers`): what starts this
//! agent from outside, where a person looks for it. Every member reads them; members and
//! above (`Need::Work`, as the facade asks) get the forms: create (a task template: title,
//! description, priority), enable or disable, rotate the secret, delete (confirmed first).
//!
//! A secret is shown once, on the page that answers the form that made it, with a `curl`
//! command that signs a call with it: the three Standard Webhooks headers made in the shell.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::header::HeaderValue;
use minijinja::{Value, context};

use agentcore::api::{CreateTriggerRequest, UpdateTriggerRequest};
use agentcore::domain::agent::AgentId;
use agentcore::domain::trigger::TriggerId;
use agentcore::{Error, Principal, Resource};

use crate::AppState;
use crate::error::ApiError;
use crate::ui::form::Fields;
use crate::ui::render::FormErrors;
use crate::ui::session::{self, Csrf, Viewer};

use super::agents::agent_page;
use super::confirm::{Ask, ask};
use super::{Failed, Shown, agent_id, agent_url, done, fail, refused, see};

/// `POST /agents/{id}/triggers`: a new trigger on the agent; the answer shows its secret and
/// a signed `curl` call.
pub(crate) async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(id): Path<String>,
    fields: Fields,
) -> Shown {
    let id = agent_id(&id)?;
    let mut errors = agentcore::ValidationErrors::new();
    let request = CreateTriggerRequest {
        agent: Some(id.to_string()),
        name: fields.text("name"),
        title: fields.get("title"),
        description: fields.text("description"),
        priority: fields.number("priority", &mut errors),
        enabled: Some(true),
    };
    let created = async {
        errors.into_result()?;
        Ok::<_, ApiError>(state.core.add_trigger(&who, request.parse()?).await?)
    };
    match created.await {
        Ok(created) => {
            let url = absolute(&state, &headers, &created.trigger.url);
            let curl = curl_example(&url, &created.secret);
            let made = context! { trigger => created.trigger, secret => created.secret, url, curl };
            let page = agent_page(&state, &who, &csrf, &id, None, Value::UNDEFINED, made).await;
            pushed(page, &id)
        }
        Err(error) => {
            let form = context! {
                which => "trigger", values => fields.values(), errors => FormErrors::of(&error),
            };
            let page = agent_page(&state, &who, &csrf, &id, None, form, Value::UNDEFINED).await?;
            refused(pushed(Ok(page), &id)?, &error)
        }
    }
}

/// `POST /agents/{id}/triggers/{trigger_id}/{command}`: `enable`, `disable`, `rotate` (the
/// answer shows the new secret) or `delete`.
pub(crate) async fn command(
    State(state): State<AppState>,
    headers: HeaderMap,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((id, trigger, command)): Path<(String, String, String)>,
) -> Shown {
    let (id, trigger) = (agent_id(&id)?, trigger_id(&trigger)?);
    let back = format!("{}#triggers", agent_url(&id));
    let core = &state.core;
    // The trigger must be this agent's: another agent's id in the address is a missing one.
    let current = own_trigger(&state, &who, &id, &trigger).await?;
    match command.as_str() {
        "enable" | "disable" => {
            let enabled = command == "enable";
            let request = UpdateTriggerRequest { enabled: Some(enabled), ..Default::default() };
            core.update_trigger(&who, &trigger, request.parse().map_err(fail)?)
                .await
                .map_err(fail)?;
            let state_words = if enabled { "enabled" } else { "disabled: its calls are refused" };
            done(&back, format!("The trigger {} is {state_words}.", label(&current)))
        }
        "rotate" => {
            let rotated = core.rotate_trigger_secret(&who, &trigger).await.map_err(fail)?;
            let url = absolute(&state, &headers, &current.url);
            let curl = curl_example(&url, &rotated.secret);
            let made = context! {
                trigger => current, secret => rotated.secret, url, curl,
                previous_valid_until => rotated.previous_valid_until,
            };
            let page = agent_page(&state, &who, &csrf, &id, None, Value::UNDEFINED, made).await;
            pushed(page, &id)
        }
        "delete" => {
            core.delete_trigger(&who, &trigger).await.map_err(fail)?;
            done(
                &back,
                format!("The trigger {} was deleted: its URL answers 404.", label(&current)),
            )
        }
        _ => Err(fail(ApiError::RouteNotFound)),
    }
}

/// `GET /agents/{id}/triggers/{trigger_id}/{command}`: deleting asks first; the other commands
/// go to the agent's triggers.
pub(crate) async fn confirm(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((id, trigger, command)): Path<(String, String, String)>,
) -> Shown {
    let (id, trigger) = (agent_id(&id)?, trigger_id(&trigger)?);
    let back = format!("{}#triggers", agent_url(&id));
    match command.as_str() {
        "delete" => {}
        "enable" | "disable" | "rotate" => return see(&back),
        _ => return Err(fail(ApiError::RouteNotFound)),
    }
    let current = own_trigger(&state, &who, &id, &trigger).await?;
    let page = Ask {
        title: format!("Delete the trigger {}?", label(&current)),
        intro: format!(
            "Calls to {} are refused from now on (404). The tasks it queued stay.",
            current.url
        ),
        action: format!("{}/triggers/{trigger}/delete", agent_url(&id)),
        button: "Delete the trigger".into(),
        back,
        ..Ask::default()
    };
    ask(&state, &who, &csrf, "agents", page).await
}

/// A `curl` command that calls `url` signed with `secret`: the message id, the timestamp and
/// the signature (`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the
/// secret's bytes after `whsec_`) are made in the shell with `openssl`.
pub(super) fn curl_example(url: &str, secret: &str) -> String {
    format!(
        r#"secret='{secret}'
body='{{"text": "Hello from curl"}}'
id="msg_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
ts="$(date +%s)"
key="$(printf '%s' "${{secret#whsec_}}" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
sig="$(printf '%s' "$id.$ts.$body" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | base64)"
curl -sS '{url}' \
  -H 'content-type: application/json' \
  -H "webhook-id: $id" \
  -H "webhook-timestamp: $ts" \
  -H "webhook-signature: v1,$sig" \
  --data "$body""#
    )
}

/// The trigger, when it is this agent's; else `trigger_not_found`.
async fn own_trigger(
    state: &AppState,
    who: &Principal,
    agent: &AgentId,
    id: &TriggerId,
) -> Result<agentcore::domain::trigger::Trigger, Failed> {
    let trigger = state.core.trigger(who, id).await.map_err(fail)?;
    if &trigger.agent != agent {
        return Err(fail(Error::not_found(Resource::Trigger, id.as_str())));
    }
    Ok(trigger)
}

fn label(trigger: &agentcore::domain::trigger::Trigger) -> String {
    if trigger.name.is_empty() { trigger.id.to_string() } else { trigger.name.clone() }
}

/// The trigger's URL as a caller outside uses it: `/hooks/…` under the address this page was
/// asked at, when the service does not know its public one.
fn absolute(state: &AppState, headers: &HeaderMap, url: &str) -> String {
    if url.starts_with('/') {
        format!("{}{url}", session::origin(state, headers))
    } else {
        url.into()
    }
}

fn trigger_id(raw: &str) -> Result<TriggerId, Failed> {
    TriggerId::parse(raw).map_err(|_| fail(Error::not_found(Resource::Trigger, raw)))
}

/// The agent page answering a trigger's form, at the agent's address (a reload shows the
/// page without the secret).
fn pushed(page: Shown, agent: &AgentId) -> Shown {
    let mut page = page?;
    if let Ok(to) = HeaderValue::from_str(&agent_url(agent)) {
        page.headers_mut().insert("hx-push-url", to);
    }
    Ok(page)
}
