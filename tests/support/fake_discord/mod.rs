//! A fake Discord REST API (v10) on a local port, as faithful as the tests need: bot-token
//! auth, guild membership, channels, messages with Discord's limits and nonce handling, the
//! OAuth2 code exchange, per-channel rate limits with the full 429 header set, and failures on
//! demand. It records every request.

// Handlers answer errors as ready responses, as axum handlers do.
#![allow(clippy::result_large_err)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::time::Instant;

mod commands;
mod interactions;
mod messages;
mod oauth;
mod read;

pub use commands::{autocomplete, button, option, slash, subcommand};
pub use interactions::*;

pub const CLIENT_ID: &str = "900000000000000001";
pub const CLIENT_SECRET: &str = "fake-client-secret";
pub const REDIRECT_URI: &str = "https://agents.example/discord/callback";
pub const SERVICE_BOT_TOKEN: &str = "service-bot-token.abc";

/// A failure to inject into the next message posts.
#[derive(Debug, Clone, Copy)]
pub enum Failure {
    /// Answer 500 without posting.
    ServerError,
    /// Post the message, then hold the answer past the client's timeout.
    PostThenHang(Duration),
    /// Answer 401: the token was revoked.
    Unauthorized,
    /// Answer 429 with scope `shared`: a limit on the channel itself, which no bucket header
    /// predicts; `retry_after` as given.
    SharedRateLimit(Duration),
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
}

#[derive(Debug, Clone)]
pub struct Posted {
    pub id: String,
    pub channel_id: String,
    pub body: Value,
    /// When the message was accepted (the benchmarks time delivery with it).
    #[allow(dead_code)]
    pub at: Instant,
}

#[derive(Debug, Default)]
struct Guild {
    name: String,
    channels: Vec<Value>,
    bots: HashSet<String>,
}

/// Where held answers wait: none passes until it is closed.
#[derive(Debug, Clone)]
struct Gate(Arc<tokio::sync::Semaphore>);

impl Default for Gate {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::Semaphore::new(0)))
    }
}

#[derive(Debug, Default)]
struct FakeState {
    bots: HashMap<String, String>,
    guilds: HashMap<String, Guild>,
    codes: HashMap<String, String>,
    messages: Vec<Posted>,
    nonces: HashMap<(String, String), Value>,
    requests: Vec<Recorded>,
    failures: VecDeque<Failure>,
    /// Every message post answers 503, as during an outage, while set.
    outage: bool,
    limit: Option<(u32, Duration)>,
    /// The title the next message to hold starts with (see [`FakeDiscord::hold_answer_to`]).
    hold: Option<String>,
    /// Where held answers wait.
    held: Gate,
    windows: HashMap<(String, String), (Instant, u32)>,
    rate_limited: HashMap<String, u32>,
    next_id: u64,
    interactions: interactions::Interactions,
}

#[derive(Clone)]
pub struct FakeDiscord {
    pub api_base: String,
    state: Arc<Mutex<FakeState>>,
}

impl FakeDiscord {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(FakeState {
            next_id: 1_300_000_000_000_000_000,
            ..FakeState::default()
        }));
        let app = Router::new()
            .route("/api/v10/users/@me", get(current_user))
            .route("/api/v10/guilds/{id}", get(guild))
            .route("/api/v10/guilds/{id}/channels", get(channels))
            .route(
                "/api/v10/channels/{id}/messages",
                post(messages::create_message).get(read::channel_messages),
            )
            .route(
                "/api/v10/channels/{id}/messages/{message_id}",
                patch(interactions::edit_message),
            )
            .route("/api/v10/oauth2/token", post(oauth::token_exchange))
            .route("/api/v10/applications/@me", get(interactions::current_application))
            .route(
                "/api/v10/applications/{id}/guilds/{guild_id}/commands",
                get(interactions::guild_commands).put(interactions::guild_commands),
            )
            .route(
                "/api/v10/webhooks/{id}/{token}/messages/@original",
                patch(interactions::edit_original),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api_base = format!("http://{}/api/v10", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let fake = Self { api_base, state };
        fake.add_bot(SERVICE_BOT_TOKEN, "AgentsService");
        fake.add_application(SERVICE_BOT_TOKEN, CLIENT_ID, SERVICE_APP_SEED);
        fake
    }

    fn with<T>(&self, f: impl FnOnce(&mut FakeState) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    pub fn add_bot(&self, token: &str, name: &str) {
        self.with(|s| s.bots.insert(token.to_owned(), name.to_owned()));
    }

    pub fn revoke(&self, token: &str) {
        self.with(|s| s.bots.remove(token));
    }

    /// A guild with text channels `general` (position 1) and `updates` (0), a voice channel, a
    /// category and an announcement channel; the listed bots are members.
    pub fn add_guild(&self, id: &str, name: &str, bots: &[&str]) {
        let channels = vec![
            json!({"id": format!("{id}1"), "type": 0, "name": "general", "position": 1, "parent_id": null}),
            json!({"id": format!("{id}2"), "type": 0, "name": "updates", "position": 0, "parent_id": null}),
            json!({"id": format!("{id}3"), "type": 2, "name": "voice", "position": 2, "parent_id": null}),
            json!({"id": format!("{id}4"), "type": 4, "name": "category", "position": 3, "parent_id": null}),
            json!({"id": format!("{id}5"), "type": 5, "name": "news", "position": 4, "parent_id": null}),
            json!({"id": format!("{id}6"), "type": 15, "name": "forum", "position": 5, "parent_id": null}),
        ];
        self.insert_guild(id, name, bots, channels);
    }

    /// A guild with `count` text channels `channel-0`… whose ids are the guild's id followed by
    /// a three-digit number; the listed bots are members. (For the benchmarks.)
    #[allow(dead_code)]
    pub fn add_guild_with_text_channels(&self, id: &str, name: &str, bots: &[&str], count: usize) {
        let channels = (0..count)
            .map(|i| json!({"id": format!("{id}{i:03}"), "type": 0, "name": format!("channel-{i}"), "position": i, "parent_id": null}))
            .collect();
        self.insert_guild(id, name, bots, channels);
    }

    fn insert_guild(&self, id: &str, name: &str, bots: &[&str], channels: Vec<Value>) {
        let bots = bots.iter().map(|b| (*b).to_owned()).collect();
        self.with(|s| {
            s.guilds.insert(id.to_owned(), Guild { name: name.to_owned(), channels, bots })
        });
    }

    /// An OAuth2 code that installs the service bot into `guild_id`.
    pub fn issue_code(&self, code: &str, guild_id: &str) {
        self.with(|s| {
            s.codes.insert(code.to_owned(), guild_id.to_owned());
            if let Some(guild) = s.guilds.get_mut(guild_id) {
                guild.bots.insert(SERVICE_BOT_TOKEN.to_owned());
            }
        });
    }

    /// Allow `count` messages per channel per `window`.
    pub fn limit_messages(&self, count: u32, window: Duration) {
        self.with(|s| s.limit = Some((count, window)));
    }

    pub fn remove_channel(&self, channel_id: &str) {
        self.with(|s| {
            s.guilds.values_mut().for_each(|g| g.channels.retain(|c| c["id"] != channel_id))
        });
    }

    /// Starts or ends an outage: meanwhile every message post answers 503 and posts nothing.
    pub fn set_outage(&self, on: bool) {
        self.with(|s| s.outage = on);
    }

    /// The next message whose first embed's title starts with `title` is posted, and its
    /// answer held until [`FakeDiscord::release_answers`]: the sender is caught between
    /// Discord taking the message and hearing its id.
    pub fn hold_answer_to(&self, title: &str) {
        self.with(|s| s.hold = Some(title.to_owned()));
    }

    /// Lets the held answers go, and any held later.
    pub fn release_answers(&self) {
        self.with(|s| s.held.0.close());
    }

    pub fn clear_failures(&self) {
        self.with(|s| s.failures.clear());
    }

    pub fn fail_next(&self, failures: &[Failure]) {
        self.with(|s| s.failures.extend(failures.iter().copied()));
    }

    pub fn messages(&self) -> Vec<Posted> {
        self.with(|s| s.messages.clone())
    }

    pub fn messages_in(&self, channel_id: &str) -> Vec<Posted> {
        self.messages().into_iter().filter(|m| m.channel_id == channel_id).collect()
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.with(|s| s.requests.clone())
    }

    /// 429s answered per channel.
    pub fn rate_limited(&self, channel_id: &str) -> u32 {
        self.with(|s| s.rate_limited.get(channel_id).copied().unwrap_or(0))
    }
}

type Shared = State<Arc<Mutex<FakeState>>>;

fn error(status: u16, code: u32, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap();
    (status, Json(json!({"code": code, "message": message}))).into_response()
}

/// The bot behind the `Authorization: Bot <token>` header, or Discord's 401.
fn authenticate(
    state: &mut FakeState,
    headers: &HeaderMap,
    method: &str,
    path: String,
    body: Value,
) -> Result<String, Response> {
    let authorization =
        headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    state.requests.push(Recorded {
        method: method.into(),
        path,
        authorization: authorization.clone(),
        body,
    });
    let agent = headers.get("user-agent").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !agent.starts_with("DiscordBot (") {
        return Err(error(403, 40333, "internal network error"));
    }
    match authorization.as_deref().and_then(|a| a.strip_prefix("Bot ")) {
        Some(token) if state.bots.contains_key(token) => Ok(token.to_owned()),
        _ => Err(error(401, 0, "401: Unauthorized")),
    }
}

/// Discord's answer when the bot cannot reach the channel: 404 for an unknown channel, 403
/// when the bot is not in its guild.
fn channel_access(state: &FakeState, token: &str, channel_id: &str) -> Result<(), Response> {
    let Some(guild) =
        state.guilds.values().find(|g| g.channels.iter().any(|c| c["id"] == channel_id))
    else {
        return Err(error(404, 10003, "Unknown Channel"));
    };
    if !guild.bots.contains(token) {
        return Err(error(403, 50001, "Missing Access"));
    }
    Ok(())
}

/// The guild if the bot is in it: Discord answers 404 for an unknown guild and 403 when the
/// bot is not a member.
fn member_guild<'a>(state: &'a FakeState, token: &str, id: &str) -> Result<&'a Guild, Response> {
    match state.guilds.get(id) {
        None => Err(error(404, 10004, "Unknown Guild")),
        Some(guild) if !guild.bots.contains(token) => Err(error(403, 50001, "Missing Access")),
        Some(guild) => Ok(guild),
    }
}

async fn current_user(State(state): Shared, headers: HeaderMap) -> Response {
    let mut s = state.lock().unwrap();
    let token = match authenticate(&mut s, &headers, "GET", "/users/@me".into(), Value::Null) {
        Ok(token) => token,
        Err(response) => return response,
    };
    let name = s.bots[&token].clone();
    Json(json!({"id": "800000000000000001", "username": name, "discriminator": "0", "bot": true, "mfa_enabled": false})).into_response()
}

async fn guild(State(state): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let mut s = state.lock().unwrap();
    let token = match authenticate(&mut s, &headers, "GET", format!("/guilds/{id}"), Value::Null) {
        Ok(token) => token,
        Err(response) => return response,
    };
    match member_guild(&s, &token, &id) {
        Ok(guild) => Json(json!({"id": id, "name": guild.name, "owner_id": "1"})).into_response(),
        Err(response) => response,
    }
}

async fn channels(State(state): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let mut s = state.lock().unwrap();
    let token = match authenticate(
        &mut s,
        &headers,
        "GET",
        format!("/guilds/{id}/channels"),
        Value::Null,
    ) {
        Ok(token) => token,
        Err(response) => return response,
    };
    match member_guild(&s, &token, &id) {
        Ok(guild) => Json(Value::Array(guild.channels.clone())).into_response(),
        Err(response) => response,
    }
}
