//! `GET /events`: the signed-in user's events as Server-Sent Events, which the live pages
//! follow (`assets/live.js`). The same stream as `GET /api/events` (query `agent=`, `task=`,
//! `last_event_id=`, header `Last-Event-ID`), opened with the session cookie instead of a bearer
//! token, and counted against the same per-user limit of open streams.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;

use crate::AppState;
use crate::sse::{EventsQuery, follow as open};
use crate::ui::session::Viewer;

use super::{Shown, agent_id, fail};

pub(crate) async fn follow(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    headers: HeaderMap,
    Query(query): Query<EventsQuery>,
) -> Shown {
    let (agent, query) = query.split();
    let agent = agent.as_deref().map(agent_id).transpose()?;
    let stream = open(&state, &who, agent, &headers, query).await.map_err(fail)?;
    Ok(stream.into_response())
}
