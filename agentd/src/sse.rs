//! Server-Sent Events of a user's events, as both the API (`routes/events.rs`, the bearer
//! token) and the dashboard (`ui/pages/events.rs`, the session) serve them.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{self, KeepAlive, Sse};
use futures_util::{Stream, StreamExt as _};
use serde::Deserialize;

use agentcore::domain::agent::AgentId;
use agentcore::domain::event::EventFilter;
use agentcore::{EventStream, Principal};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::task_id;

/// How often a comment line keeps an idle stream open through proxies.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(15);

/// The query of `GET /api/events`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsQuery {
    /// Only this agent's events.
    agent: Option<String>,
    /// Only this task's events.
    task: Option<String>,
    /// The last event id the client saw, for a client that cannot send `Last-Event-ID`.
    last_event_id: Option<i64>,
}

impl EventsQuery {
    /// The agent asked for, and the rest.
    pub(crate) fn split(self) -> (Option<String>, AgentEventsQuery) {
        (self.agent, AgentEventsQuery { task: self.task, last_event_id: self.last_event_id })
    }
}

/// The query of `GET /api/agents/{id}/events`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AgentEventsQuery {
    /// Only this task's events.
    pub(crate) task: Option<String>,
    /// The last event id the client saw, for a client that cannot send `Last-Event-ID`.
    pub(crate) last_event_id: Option<i64>,
}

/// Opens the stream for `who` (the dashboard's pages use it with the session's caller).
pub(crate) async fn follow(
    state: &AppState,
    who: &Principal,
    agent: Option<AgentId>,
    headers: &HeaderMap,
    query: AgentEventsQuery,
) -> Result<Sse<impl Stream<Item = Result<sse::Event, Infallible>> + use<>>, ApiError> {
    let task = query.task.as_deref().map(task_id).transpose()?;
    // A header that is not a number is a client's own id scheme: it starts afresh.
    let last = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<i64>().ok())
        .or(query.last_event_id);
    let stream = state.core.events(who, EventFilter { agent, task }, last).await?;
    Ok(to_sse(stream))
}

/// Each event as one SSE message, with a heartbeat.
fn to_sse(stream: EventStream) -> Sse<impl Stream<Item = Result<sse::Event, Infallible>>> {
    let messages = stream.map(|event| {
        let mut message = sse::Event::default().event(event.kind.as_str());
        if let Some(id) = event.id {
            message = message.id(id.to_string());
        }
        let data = serde_json::to_string(&event).unwrap_or_else(|_| "{}".to_owned());
        Ok(message.data(data))
    });
    Sse::new(messages).keep_alive(KeepAlive::new().interval(HEARTBEAT).text("keep-alive"))
}
