//! The route table: every path of the API (docs/api.md), and the handler behind it. Each handler
//! carries its `#[utoipa::path]` description and is registered through `routes!`, which reads
//! the method and path from that description: the OpenAPI document and the router cannot
//! disagree.

mod accounts;
mod agents;
mod audit;
mod backlog;
mod billing;
mod budget;
mod chat;
mod events;
mod interactions;
mod mcp;
mod models;
mod onboarding;
mod ops;
mod schedules;
mod tools;
mod triggers;
mod webhooks;
mod workspaces;

use axum::Router;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::openapi;

pub(crate) use ops::document;

/// Every route with its description.
pub(crate) fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::Frame::openapi())
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(crate::metrics::show))
        .routes(routes!(ops::openapi_json))
        .routes(routes!(accounts::register))
        .routes(routes!(accounts::login))
        .routes(routes!(accounts::me))
        .routes(routes!(accounts::logout))
        .routes(routes!(workspaces::list, workspaces::create))
        .routes(routes!(workspaces::show, workspaces::rename))
        .routes(routes!(workspaces::members))
        .routes(routes!(workspaces::set_role, workspaces::remove))
        .routes(routes!(workspaces::invites, workspaces::invite))
        .routes(routes!(workspaces::withdraw))
        .routes(routes!(workspaces::accept))
        .routes(routes!(workspaces::keys, workspaces::create_key))
        .routes(routes!(workspaces::revoke_key))
        .routes(routes!(audit::page))
        .routes(routes!(audit::export))
        .routes(routes!(audit::verify))
        .routes(routes!(agents::list, agents::create))
        .routes(routes!(agents::show, agents::update, agents::delete))
        .routes(routes!(agents::start))
        .routes(routes!(agents::stop))
        .routes(routes!(agents::vacation))
        .routes(routes!(agents::activity))
        .routes(routes!(backlog::list, backlog::add))
        .routes(routes!(backlog::show, backlog::update, backlog::delete))
        .routes(routes!(backlog::retry))
        .routes(routes!(backlog::cancel))
        .routes(routes!(events::all))
        .routes(routes!(events::agent))
        .routes(routes!(backlog::approve))
        .routes(routes!(backlog::deny))
        .routes(routes!(schedules::list, schedules::add))
        .routes(routes!(schedules::show, schedules::update, schedules::delete))
        .routes(routes!(triggers::list, triggers::add))
        .routes(routes!(triggers::show, triggers::update, triggers::delete))
        .routes(routes!(triggers::rotate))
        .routes(routes!(triggers::call))
        .routes(routes!(tools::steps))
        .routes(routes!(tools::show_memory, tools::set_memory))
        .routes(routes!(tools::list))
        .routes(routes!(mcp::list, mcp::add))
        .routes(routes!(mcp::delete))
        .routes(routes!(mcp::test))
        .routes(routes!(webhooks::list, webhooks::create))
        .routes(routes!(webhooks::show, webhooks::update, webhooks::delete))
        .routes(routes!(webhooks::rotate))
        .routes(routes!(webhooks::test))
        .routes(routes!(webhooks::deliveries))
        .routes(routes!(webhooks::redeliver))
        .routes(routes!(models::list))
        .routes(routes!(budget::show, budget::set))
        .routes(routes!(budget::usage))
        .routes(routes!(billing::show))
        .routes(routes!(billing::webhook))
        .routes(routes!(onboarding::templates))
        .routes(routes!(onboarding::setup))
        .routes(routes!(chat::oauth_url))
        .routes(routes!(chat::callback))
        .routes(routes!(chat::connect))
        .routes(routes!(chat::connections))
        .routes(routes!(chat::disconnect))
        .routes(routes!(chat::channels))
        .routes(routes!(chat::test))
        .routes(routes!(chat::mappings))
        .routes(routes!(chat::map, chat::unmap))
        .routes(routes!(chat::send))
        .routes(routes!(chat::roles))
        .routes(routes!(interactions::service))
        .routes(routes!(interactions::connection))
}

/// The router: [`api`], the dashboard (`crate::ui`) unless `http.ui` is off, and the API's
/// answers for unknown routes and methods.
pub(crate) fn routes(state: &AppState) -> Router<AppState> {
    let (router, _) = api().split_for_parts();
    let router =
        if state.http.config.ui { router.merge(crate::ui::routes(state.clone())) } else { router };
    router.fallback(ops::route_not_found).method_not_allowed_fallback(ops::method_not_allowed)
}
