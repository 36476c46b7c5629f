//! The web dashboard: server-rendered pages over the same facade as the API, at `/`.
//!
//! Pages are templates compiled into the binary (`render.rs`, `templates/`); htmx, vendored
//! and served with the stylesheet and `live.js` under hashed names (`assets.rs`), submits
//! forms in place, and `live.js` follows the user's events (`GET /events`, the API's stream
//! with the session cookie) to refresh the live parts of a page (`data-live`) as things
//! happen; every page also works without JavaScript, by reloading. Signing in
//! gives the browser the API's own token in an `HttpOnly` cookie, and every POST is checked
//! for its CSRF token before a handler runs (`session.rs`). The pages act in the workspace the
//! header's switcher chose (a cookie, as `X-Workspace` is for the API). The pages are not part
//! of the API and not in its OpenAPI document; `http.ui = false` leaves them out.

mod assets;
mod errors;
mod flash;
mod form;
mod pages;
mod render;
mod session;
mod zone;

use axum::Router;
use axum::response::Redirect;
use axum::routing::{MethodRouter, get};

use crate::AppState;

pub(crate) use errors::as_pages as errors_as_pages;

use pages::{
    accounts, agents, backlog, chat, confirm, events, models, onboarding, settings, team, triggers,
    usage, webhooks, workspaces,
};

/// Every page and form of the dashboard, each behind the CSRF guard and the browser security
/// headers. A GET on a form's address never answers 405: a destructive action's address shows
/// its confirmation (`confirm.rs`), any other sends the browser to the page the form is on.
// The dashboard is not the API: it has no OpenAPI description, so it is routed directly.
#[allow(clippy::disallowed_methods)]
pub(crate) fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/", get(agents::overview))
        .route("/login", get(accounts::login_page).post(accounts::login))
        .route("/register", get(accounts::register_page).post(accounts::register))
        .route("/logout", back("/").post(accounts::logout))
        .route("/events", get(events::follow))
        .route("/agents", back("/").post(agents::create))
        .route("/agents/{id}", get(agents::show))
        .route("/agents/{id}/settings", get(agents::form_address).post(settings::update))
        .route("/agents/{id}/memory", get(agents::form_address).post(settings::memory))
        .route("/agents/{id}/schedules", get(agents::form_address).post(settings::add_schedule))
        .route(
            "/agents/{id}/schedules/{schedule_id}/{command}",
            get(confirm::schedule_command).post(settings::schedule_command),
        )
        .route("/agents/{id}/triggers", get(agents::form_address).post(triggers::create))
        .route(
            "/agents/{id}/triggers/{trigger_id}/{command}",
            get(triggers::confirm).post(triggers::command),
        )
        .route("/agents/{id}/tasks", get(agents::form_address).post(backlog::add))
        .route("/agents/{id}/tasks/{task_id}", get(backlog::show).post(backlog::update))
        .route(
            "/agents/{id}/tasks/{task_id}/{command}",
            get(confirm::task_command).post(backlog::command),
        )
        .route("/agents/{id}/do/{command}", get(confirm::agent_command).post(agents::command))
        .route("/discord", get(chat::page))
        .route("/discord/connect", back("/discord").post(chat::connect))
        .route("/discord/callback", get(chat::callback))
        .route("/discord/unmap", get(confirm::unmap).post(chat::unmap))
        .route("/discord/{guild_id}", get(chat::guild))
        .route("/discord/{guild_id}/{command}", get(confirm::guild_command).post(chat::command))
        .route("/onboarding", get(onboarding::page).post(onboarding::setup))
        .route("/models", get(models::page))
        .route("/usage", get(usage::page))
        .route("/usage/budget", back("/usage").post(usage::set_budget))
        .route("/workspace", back("/").post(workspaces::switch))
        .route("/workspaces", back("/team").post(workspaces::create))
        .route("/invite/{token}", get(workspaces::invite).post(workspaces::join))
        .route("/team", get(team::page))
        .route("/team/name", back("/team").post(team::rename))
        .route("/team/members/{user_id}/{command}", get(confirm::member_command).post(team::member))
        .route("/team/invites", back("/team").post(team::invite))
        .route("/team/invites/{id}/withdraw", get(confirm::withdraw_invite).post(team::withdraw))
        .route("/team/keys", back("/team").post(team::create_key))
        .route("/team/keys/{id}/revoke", get(confirm::revoke_key).post(team::revoke_key))
        .route("/webhooks", get(webhooks::page).post(webhooks::create))
        .route("/webhooks/{id}", get(webhooks::show))
        .route("/webhooks/{id}/{command}", get(webhooks::confirm).post(webhooks::command))
        .route(
            "/webhooks/{id}/deliveries/{delivery_id}/redeliver",
            get(webhooks::to_endpoint).post(webhooks::redeliver),
        )
        .layer(axum::middleware::from_fn_with_state(state.clone(), flash::carry))
        .layer(axum::middleware::from_fn_with_state(state, session::guard))
        .layer(axum::middleware::from_fn(zone::scope))
        .route("/assets/{file}", get(assets::serve))
}

/// A GET on the address of a form that changes nothing destructive: to the page it is on.
fn back(to: &'static str) -> MethodRouter<AppState> {
    get(move || async move { Redirect::to(to) })
}
