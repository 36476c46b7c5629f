//! `GET /channels/{id}/messages`: a channel's latest messages, newest first, as Discord lists
//! them (`limit` 1 to 100, default 50); and people's messages to seed a channel with.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{FakeDiscord, Posted, Shared, authenticate, channel_access, error};

impl FakeDiscord {
    /// A person's message in the channel, as if typed in Discord.
    pub fn say(&self, channel_id: &str, author: &str, content: &str) {
        self.with(|s| {
            s.next_id += 1;
            let body = json!({"content": content, "author": author});
            let posted = Posted {
                id: s.next_id.to_string(),
                channel_id: channel_id.into(),
                body,
                at: Instant::now(),
            };
            s.messages.push(posted);
        });
    }
}

pub(super) async fn channel_messages(
    State(state): Shared,
    headers: HeaderMap,
    Path(channel_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let mut s = state.lock().unwrap();
    let path = format!("/channels/{channel_id}/messages");
    let token = match authenticate(&mut s, &headers, "GET", path, Value::Null) {
        Ok(token) => token,
        Err(response) => return response,
    };
    if let Err(refused) = channel_access(&s, &token, &channel_id) {
        return refused;
    }
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => 50,
        Some(Ok(limit)) if (1..=100).contains(&limit) => limit,
        Some(_) => return error(400, 50035, "Invalid Form Body: limit"),
    };
    let bot = s.bots.get(&token).cloned().unwrap_or_default();
    let messages: Vec<Value> = s
        .messages
        .iter()
        .rev()
        .filter(|m| m.channel_id == channel_id)
        .take(limit)
        .map(|m| {
            let author = m.body["author"].as_str().unwrap_or(&bot);
            let content = m.body["content"].as_str().unwrap_or_default();
            json!({"id": m.id, "channel_id": m.channel_id, "content": content,
                   "author": {"id": "1", "username": author}, "embeds": m.body.get("embeds").cloned().unwrap_or(json!([]))})
        })
        .collect();
    Json(Value::Array(messages)).into_response()
}
