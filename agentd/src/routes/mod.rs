//! The route table: every path of the contract, and the handler behind it.

mod accounts;
mod agents;
mod backlog;
mod billing;
mod chat;
mod onboarding;
mod ops;

use axum::Router;
use axum::routing::{delete, get, post};

use crate::AppState;

pub fn routes(state: &AppState) -> Router<AppState> {
    let sign_ins = Router::new()
        .route("/auth/register", post(accounts::register))
        .route("/auth/login", post(accounts::login))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), crate::limits::sign_ins));
    Router::new()
        .merge(sign_ins)
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(crate::metrics::show))
        .route("/auth/me", get(accounts::me))
        .route("/auth/logout", post(accounts::logout))
        .route("/api/agents", get(agents::list).post(agents::create))
        .route("/api/agents/{id}", get(agents::show).patch(agents::update).delete(agents::delete))
        .route("/api/agents/{id}/start", post(agents::start))
        .route("/api/agents/{id}/stop", post(agents::stop))
        .route("/api/agents/{id}/vacation", post(agents::vacation))
        .route("/api/agents/{id}/activity", get(agents::activity))
        .route("/api/agents/{id}/backlog", get(backlog::list).post(backlog::add))
        .route(
            "/api/agents/{id}/backlog/{task_id}",
            get(backlog::show).patch(backlog::update).delete(backlog::delete),
        )
        .route("/api/agents/{id}/backlog/{task_id}/retry", post(backlog::retry))
        .route("/api/billing", get(billing::show))
        .route("/api/billing/webhook", post(billing::webhook))
        .route("/api/onboarding/templates", get(onboarding::templates))
        .route("/api/onboarding/setup", post(onboarding::setup))
        .route("/api/chat/oauth-url", get(chat::oauth_url))
        .route("/api/chat/callback", post(chat::callback))
        .route("/api/chat/connect", post(chat::connect))
        .route("/api/chat/connections", get(chat::connections))
        .route("/api/chat/connections/{guild_id}", delete(chat::disconnect))
        .route("/api/chat/connections/{guild_id}/channels", get(chat::channels))
        .route("/api/chat/test/{guild_id}", post(chat::test))
        .route("/api/chat/mappings", get(chat::mappings))
        .route("/api/chat/mappings/{id}", post(chat::map).delete(chat::unmap))
        .route("/api/chat/send/{guild_id}", post(chat::send))
        .fallback(ops::route_not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
}
