//! The models this server can call: each configured provider, whether it has a key, and how
//! the operator adds one. Nobody changes server settings from the dashboard, so the page tells
//! the operator what to set rather than offering a form.

use axum::extract::State;
use minijinja::context;

use crate::AppState;
use crate::ui::session::{Csrf, Viewer};

use super::{Shown, signed_in};

/// `GET /models`: what `GET /api/models` answers, as a page.
pub(crate) async fn page(State(state): State<AppState>, Viewer(who): Viewer, csrf: Csrf) -> Shown {
    let models = state.core.model_list(&who).await.map_err(super::fail)?;
    signed_in(&state, &who, "models.html", context! { csrf => csrf.0, nav => "models", models })
        .await
}
