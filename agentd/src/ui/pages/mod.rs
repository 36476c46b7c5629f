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
pub(super) mod usage;

use axum::response::{IntoResponse, Redirect, Response};

use agentcore::domain::agent::AgentId;
use agentcore::domain::task::TaskId;

use crate::error::ApiError;

use super::render::error_page;

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
