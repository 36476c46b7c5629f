//! The route table: every path of the contract, and the handler behind it.

mod accounts;
mod agents;
mod backlog;
mod ops;

use axum::Router;
use axum::routing::{get, post};

use crate::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/auth/register", post(accounts::register))
        .route("/auth/login", post(accounts::login))
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
        .fallback(ops::route_not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
}
