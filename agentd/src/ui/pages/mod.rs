//! The dashboard's pages, one file per area, like the API's routes. A handler reads the form,
//! builds the API's own request type and calls the same `Core` method the API would, so every
//! rule and every error is the API's; a refused form is shown again with the errors beside
//! their fields, and an accepted one redirects (post, redirect, get).

pub(super) mod accounts;
pub(super) mod agents;
pub(super) mod backlog;
pub(super) mod chat;
pub(super) mod events;
pub(super) mod onboarding;
mod running;
pub(super) mod settings;
pub(super) mod team;
pub(super) mod usage;
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
/// (`workspaces`) and the one the page acts in (`workspace`, with the viewer's role there).
pub(super) async fn signed_in(
    state: &AppState,
    who: &Principal,
    template: &'static str,
    values: Value,
) -> Shown {
    let workspaces = state.core.workspaces(who).await.map_err(fail)?;
    let workspace = workspaces.iter().find(|w| w.id == who.workspace).cloned();
    Ok(Page::new(template, context! { workspaces, workspace, ..values }).into_response())
}

/// After an accepted form: 303 to `to`.
pub(super) fn see(to: &str) -> Shown {
    Ok(Redirect::to(to).into_response())
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
