//! `/api/events` and `/api/agents/{id}/events`: a user's events as Server-Sent Events
//! (built by `crate::sse`).

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{self, Sse};
use futures_util::Stream;

use agentcore::domain::event::Event;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Params, Path, agent_id};
use crate::sse::{AgentEventsQuery, EventsQuery, follow};

#[utoipa::path(get, path = "/api/events", operation_id = "events", tag = "events", security(("bearer" = [])),
    params(EventsQuery, ("Last-Event-ID" = Option<i64>, Header, description = "The last event id the client saw: the events after it come first.")),
    responses((status = 200, description = "The caller's events as Server-Sent Events: each message's `event` is the type, `id` the event's id (none for live-only events), `data` the event as JSON. A comment line every 15 s keeps it open.", content_type = "text/event-stream", body = Event),
        (status = 429, description = "`quota_exceeded`: the user has `streams_per_user` streams open on this server.", body = crate::error::ErrorBody)))]
pub(super) async fn all(
    State(state): State<AppState>,
    Caller(who): Caller,
    headers: HeaderMap,
    Params(query): Params<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<sse::Event, Infallible>>>, ApiError> {
    let (agent, query) = query.split();
    let agent = agent.as_deref().map(agent_id).transpose()?;
    follow(&state, &who, agent, &headers, query).await
}

#[utoipa::path(get, path = "/api/agents/{id}/events", operation_id = "agent_events", tag = "events", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent's id."), AgentEventsQuery,
        ("Last-Event-ID" = Option<i64>, Header, description = "The last event id the client saw: the events after it come first.")),
    responses((status = 200, description = "The agent's events as Server-Sent Events (see `GET /api/events`).", content_type = "text/event-stream", body = Event),
        (status = 429, description = "`quota_exceeded`: the user has `streams_per_user` streams open on this server.", body = crate::error::ErrorBody)))]
pub(super) async fn agent(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
    headers: HeaderMap,
    Params(query): Params<AgentEventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<sse::Event, Infallible>>>, ApiError> {
    let agent = agent_id(&agent)?;
    follow(&state, &who, Some(agent), &headers, query).await
}
