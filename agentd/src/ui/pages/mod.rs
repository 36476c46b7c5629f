//! The dashboard's pages, one file per area, like the API's routes. A handler reads the form,
//! builds the API's own request type and calls the same `Core` method the API would, so every
//! rule and every error is the API's; a refused form is shown again with the errors beside
//! their fields, and an accepted one redirects (post, redirect, get).

pub(super) mod accounts;
pub(super) mod agents;
pub(super) mod backlog;
pub(super) mod chat;
pub(super) mod confirm;
pub(super) mod events;
mod lists;
pub(super) mod models;
pub(super) mod onboarding;
mod running;
pub(super) mod settings;
pub(super) mod team;
pub(super) mod triggers;
pub(super) mod usage;
pub(super) mod webhooks;
pub(super) mod workspaces;

use axum::response::{IntoResponse, Redirect, Response};
use minijinja::{Value, context};

use agentcore::Principal;
use agentcore::domain::agent::AgentId;
use agentcore::domain::task::TaskId;

use crate::AppState;
use crate::error::ApiError;

use super::render::{Page, error_page};

/// A page, or the error page.
pub(super) type Shown = Result<Response, Failed>;

/// What stopped a page: shown as a whole page with its status and words.
#[derive(Debug)]
pub(super) struct Failed(ApiError);

impl IntoResponse for Failed {
    fn into_response(self) -> Response {
        error_page(&self.0)
    }
}

pub(super) fn fail(error: impl Into<ApiError>) -> Failed {
    Failed(error.into())
}

/// A page of the signed-in dashboard: `values`, and for its header the viewer's workspaces
/// (`workspaces`), the one the page acts in (`workspace`, with the viewer's role there) and
/// who is signed in (`signed_in_as`, beside the sign-out button).
pub(super) async fn signed_in(
    state: &AppState,
    who: &Principal,
    template: &'static str,
    values: Value,
) -> Shown {
    let workspaces = state.core.workspaces(who).await.map_err(fail)?;
    let workspace = workspaces.iter().find(|w| w.id == who.workspace).cloned();
    let signed_in_as = state.core.me(who).await.map_err(fail)?;
    let values = context! { workspaces, workspace, signed_in_as, ..values };
    Ok(Page::new(template, values).into_response())
}

/// The workspace's agents against their limit, as `agent_limit.html` shows it.
#[derive(Debug, serde::Serialize)]
pub(super) struct AgentLimit {
    billing: agentcore::domain::billing::Billing,
    /// Billing is configured: the limit is a plan's, else it is this server's own.
    billed: bool,
    /// No room for another agent: forms that create one are not shown.
    at_limit: bool,
}

pub(super) async fn agent_limit(state: &AppState, who: &Principal) -> Result<AgentLimit, Failed> {
    let billing = state.core.billing(who).await.map_err(fail)?;
    let at_limit = billing.agent_limit.is_some_and(|limit| billing.agents_used >= i64::from(limit));
    Ok(AgentLimit { billing, billed: state.core.billing_configured(), at_limit })
}

/// After an accepted form: 303 to `to`.
pub(super) fn see(to: &str) -> Shown {
    Ok(Redirect::to(to).into_response())
}

/// After an accepted form: 303 to `to` (a page, or a section of one: `…#settings`), with
/// `message` shown once there.
pub(super) fn done(to: &str, message: impl Into<String>) -> Shown {
    Ok(super::flash::done(to, message))
}

/// A page shown again for a refused form, with the refusal's status.
pub(super) fn refused(mut page: Response, error: &ApiError) -> Shown {
    *page.status_mut() = error.status();
    Ok(page)
}

pub(super) fn agent_id(raw: &str) -> Result<AgentId, Failed> {
    crate::extract::agent_id(raw).map_err(Failed)
}

pub(super) fn task_id(raw: &str) -> Result<TaskId, Failed> {
    crate::extract::task_id(raw).map_err(Failed)
}

/// `/agents/{id}` for an agent.
pub(super) fn agent_url(id: &AgentId) -> String {
    format!("/agents/{id}")
}
