//! Discord's side of HTTP interactions: the application behind a bot token (`GET
//! /applications/@me`), guild command registration with Discord's validation, interactions
//! signed with the application's Ed25519 key, edits of the original response through the
//! interaction's webhook (valid 15 minutes), and edits of the bot's messages.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::Method;
use ed25519_dalek::{Signer, SigningKey};

use super::commands::{check_items, invalid_form};
use super::messages::check_message;
use super::*;

/// Seed of the Ed25519 key of the service's application (its id is [`CLIENT_ID`]).
pub const SERVICE_APP_SEED: [u8; 32] = [7; 32];
/// The Manage Server permission bit.
pub const MANAGE_GUILD: u64 = 1 << 5;
/// The Administrator permission bit.
pub const ADMINISTRATOR: u64 = 1 << 3;
/// View Channel and Send Messages: what every member of the tests' guilds has.
const VIEW_AND_SEND: u64 = (1 << 10) | (1 << 11);
/// How long an interaction's token accepts follow-ups.
const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// The hex public key (64 lowercase hex chars) of the key made from `seed`: what Discord
/// shows as the application's "public key" (`verify_key`).
pub fn public_key_hex(seed: &[u8; 32]) -> String {
    hex::encode(SigningKey::from_bytes(seed).verifying_key().to_bytes())
}

/// `X-Signature-Ed25519` for `timestamp` and `body`: hex of the Ed25519 signature over the
/// bytes timestamp||body.
pub fn sign(seed: &[u8; 32], timestamp: &str, body: &str) -> String {
    let message = [timestamp.as_bytes(), body.as_bytes()].concat();
    hex::encode(SigningKey::from_bytes(seed).sign(&message).to_bytes())
}

/// Who clicked or typed: a guild member with computed `permissions` (a bitfield;
/// [`MANAGE_GUILD`], [`ADMINISTRATOR`]) and role ids.
#[derive(Debug, Clone)]
pub struct Member {
    pub user_id: String,
    pub username: String,
    pub permissions: u64,
    pub roles: Vec<String>,
}

impl Member {
    /// A member with Manage Server.
    pub fn manager(name: &str) -> Self {
        Self::with_permissions(name, VIEW_AND_SEND | MANAGE_GUILD, &[])
    }

    /// A member with only View Channel and Send Messages (no Manage Server), and these roles.
    pub fn plain(name: &str, roles: &[&str]) -> Self {
        Self::with_permissions(name, VIEW_AND_SEND, roles)
    }

    fn with_permissions(name: &str, permissions: u64, roles: &[&str]) -> Self {
        let roles = roles.iter().map(|r| (*r).to_owned()).collect();
        let user_id = snowflake_of(&format!("user:{name}"));
        Self { user_id, username: name.to_owned(), permissions, roles }
    }
}

/// An interaction ready to POST: the exact body and its headers.
#[derive(Debug, Clone)]
pub struct SignedInteraction {
    pub id: String,
    pub token: String,
    pub body: String,
    pub timestamp: String,
    pub signature: String,
}

impl SignedInteraction {
    /// POSTs it to `url` with `Content-Type: application/json`, `X-Signature-Ed25519`,
    /// `X-Signature-Timestamp` and Discord's `User-Agent`; returns the response.
    pub async fn post(&self, url: &str) -> reqwest::Response {
        agentcore::install_tls_provider();
        reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("x-signature-ed25519", &self.signature)
            .header("x-signature-timestamp", &self.timestamp)
            .header("user-agent", "Discord-Interactions/1.0 (+https://discord.com)")
            .body(self.body.clone())
            .send()
            .await
            .unwrap()
    }
}

/// An edit of an interaction's original response, through its webhook.
#[derive(Debug, Clone)]
pub struct Followup {
    pub application_id: String,
    pub token: String,
    pub body: Value,
}

/// An edit of a channel message.
#[derive(Debug, Clone)]
pub struct Edit {
    pub channel_id: String,
    pub message_id: String,
    pub body: Value,
}

/// The interactions' part of the fake's state.
#[derive(Debug, Default)]
pub(super) struct Interactions {
    /// Per bot token: the application's id and key seed.
    applications: HashMap<String, (String, [u8; 32])>,
    /// Per (application, guild): the registered commands.
    commands: HashMap<(String, String), Vec<Value>>,
    /// Per (application, token): when issued, and the original response as last edited.
    tokens: HashMap<(String, String), (SystemTime, Value)>,
    followups: Vec<Followup>,
    edits: Vec<Edit>,
}

impl FakeDiscord {
    /// The application behind a bot token, as `GET /applications/@me` answers it; adds the bot
    /// if unknown. The service bot is registered at start with [`CLIENT_ID`] and
    /// [`SERVICE_APP_SEED`].
    pub fn add_application(&self, bot_token: &str, application_id: &str, seed: [u8; 32]) {
        self.with(|s| {
            s.bots.entry(bot_token.to_owned()).or_insert_with(|| format!("App {application_id}"));
            let app = (application_id.to_owned(), seed);
            s.interactions.applications.insert(bot_token.to_owned(), app);
        });
    }

    /// An interaction of `application_id` in the guild's channel, by `member`, with a fresh id
    /// and the current time, signed; its token accepts follow-ups. `payload` holds the
    /// interaction's `type`, `data`, `message`… (see [`slash`], [`button`]).
    pub fn interaction(
        &self,
        application_id: &str,
        guild_id: &str,
        channel_id: &str,
        member: &Member,
        payload: Value,
    ) -> SignedInteraction {
        let (id, place) = (self.with(next_snowflake), Some((guild_id, channel_id, member)));
        self.signed(application_id, &id, &unix_now(), place, payload)
    }

    /// [`Self::interaction`] with an explicit id and timestamp (for duplicates and stale
    /// timestamps); the token follows from the id, so a duplicate carries the same one, and its
    /// 15 minutes run from the (unix seconds) timestamp.
    #[allow(clippy::too_many_arguments)]
    pub fn interaction_with(
        &self,
        application_id: &str,
        id: &str,
        timestamp: &str,
        guild_id: &str,
        channel_id: &str,
        member: &Member,
        payload: Value,
    ) -> SignedInteraction {
        let place = Some((guild_id, channel_id, member));
        self.signed(application_id, id, timestamp, place, payload)
    }

    /// A PING (type 1) with no guild or member, signed.
    pub fn ping(&self, application_id: &str) -> SignedInteraction {
        let id = self.with(next_snowflake);
        self.signed(application_id, &id, &unix_now(), None, json!({"type": 1}))
    }

    /// Makes the interaction's token older than 15 minutes: its webhook answers 404 from now.
    pub fn expire_interaction(&self, token: &str) {
        self.with(|s| {
            let tokens = s.interactions.tokens.iter_mut().filter(|(key, _)| key.1 == token);
            tokens.for_each(|(_, (issued, _))| *issued = UNIX_EPOCH);
        });
    }

    /// The commands last registered for the guild (None: never; Some(empty) after an
    /// overwrite with `[]`).
    pub fn guild_commands(&self, application_id: &str, guild_id: &str) -> Option<Vec<Value>> {
        let key = (application_id.to_owned(), guild_id.to_owned());
        self.with(|s| s.interactions.commands.get(&key).cloned())
    }

    /// Every edit of an original response received through the webhook, in order.
    pub fn followups(&self) -> Vec<Followup> {
        self.with(|s| s.interactions.followups.clone())
    }

    /// Every channel message edit received, in order.
    pub fn edits(&self) -> Vec<Edit> {
        self.with(|s| s.interactions.edits.clone())
    }

    /// The interaction's body, with what Discord fills in around `payload`, signed.
    fn signed(
        &self,
        application_id: &str,
        id: &str,
        timestamp: &str,
        place: Option<(&str, &str, &Member)>,
        payload: Value,
    ) -> SignedInteraction {
        self.with(|s| {
            let mut apps = s.interactions.applications.values();
            let Some((_, seed)) = apps.find(|(app, _)| app == application_id).cloned() else {
                panic!("no application {application_id} in the fake Discord");
            };
            let token =
                format!("aW50ZXJhY3Rpb246{id}{}", snowflake_of(&format!("{application_id}:{id}")));
            let mut body = json!({"id": id, "application_id": application_id, "token": token,
                "version": 1, "entitlements": [], "authorizing_integration_owners": {}});
            if let Some((guild_id, channel_id, m)) = place {
                let member = json!({"user": {"id": m.user_id, "username": m.username,
                    "global_name": m.username, "discriminator": "0"}, "roles": m.roles,
                    "permissions": m.permissions.to_string(), "nick": null,
                    "joined_at": "2026-01-01T00:00:00.000000+00:00"});
                let fields = json!({"guild_id": guild_id, "channel_id": channel_id,
                    "guild": {"id": guild_id, "locale": "en-US", "features": []},
                    "channel": {"id": channel_id, "type": 0, "guild_id": guild_id},
                    "member": member, "app_permissions": "84992", "locale": "en-US",
                    "guild_locale": "en-US", "authorizing_integration_owners": {"0": guild_id},
                    "context": 0});
                merge(&mut body, fields);
                let issued = timestamp
                    .parse()
                    .map_or(SystemTime::now(), |t| UNIX_EPOCH + Duration::from_secs(t));
                let original = json!({"id": next_snowflake(s), "channel_id": channel_id,
                    "content": "", "embeds": [], "components": []});
                let key = (application_id.to_owned(), token.clone());
                s.interactions.tokens.entry(key).or_insert((issued, original));
            }
            merge(&mut body, payload);
            if let Some((guild_id, channel_id, _)) = place {
                complete(s, &mut body, application_id, guild_id, channel_id);
            }
            let body = body.to_string();
            let signature = sign(&seed, timestamp, &body);
            SignedInteraction { id: id.into(), token, body, timestamp: timestamp.into(), signature }
        })
    }
}

/// Fills what Discord knows and the payload builders do not: a command's registered id and
/// guild, the clicked message as stored.
fn complete(s: &FakeState, body: &mut Value, application_id: &str, guild: &str, channel: &str) {
    let key = (application_id.to_owned(), guild.to_owned());
    let mut registered = s.interactions.commands.get(&key).into_iter().flatten();
    let command = registered.find(|c| c["name"] == body["data"]["name"] && c["type"] == 1);
    if let Some(command) = command.filter(|_| body["type"] == 2 || body["type"] == 4) {
        merge(&mut body["data"], json!({"id": command["id"], "guild_id": guild}));
    }
    if body["type"] == 3 && body["message"].is_object() {
        body["message"]["channel_id"] = json!(channel);
        if let Some(posted) = s.messages.iter().find(|m| body["message"]["id"] == m.id) {
            merge(&mut body["message"], message_json(posted));
        }
    }
}

/// `GET /applications/@me`: the bot's application.
pub(super) async fn current_application(
    State(state): Shared,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let mut s = state.lock().unwrap();
    let path = "/applications/@me".to_owned();
    let token = authenticate(&mut s, &headers, "GET", path, Value::Null)?;
    let unknown = || error(404, 10002, "Unknown Application");
    let (id, seed) = s.interactions.applications.get(&token).ok_or_else(unknown)?;
    let name = &s.bots[&token];
    let bot =
        json!({"id": "800000000000000001", "username": name, "discriminator": "0", "bot": true});
    Ok(Json(json!({"id": id, "name": name, "verify_key": public_key_hex(seed), "bot_public": true,
        "flags": 0, "description": "", "bot": bot}))
    .into_response())
}

/// `GET` and `PUT /applications/{app}/guilds/{guild}/commands`: the guild's commands, and
/// their bulk overwrite.
pub(super) async fn guild_commands(
    State(state): Shared,
    method: Method,
    headers: HeaderMap,
    Path((application_id, guild_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, Response> {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let mut s = state.lock().unwrap();
    let path = format!("/applications/{application_id}/guilds/{guild_id}/commands");
    let recorded = parsed.clone().unwrap_or(Value::Null);
    let token = authenticate(&mut s, &headers, method.as_str(), path, recorded)?;
    if s.interactions.applications.get(&token).is_none_or(|(app, _)| *app != application_id) {
        return Err(error(403, 50001, "Missing Access"));
    }
    member_guild(&s, &token, &guild_id)?;
    let key = (application_id.clone(), guild_id.clone());
    let earlier = s.interactions.commands.get(&key).cloned().unwrap_or_default();
    if method != Method::PUT {
        return Ok(Json(earlier).into_response());
    }
    let body = parsed.ok_or_else(invalid_json)?;
    check_items(&body, vec![], true).map_err(invalid_form)?;
    let mut stored = Vec::new();
    for command in body.as_array().into_iter().flatten() {
        let mut command = command.clone();
        command["type"] = command.get("type").filter(|t| !t.is_null()).cloned().unwrap_or(json!(1));
        let same =
            earlier.iter().find(|c| c["name"] == command["name"] && c["type"] == command["type"]);
        let id = same.map_or_else(|| json!(next_snowflake(&mut s)), |c| c["id"].clone());
        let version = next_snowflake(&mut s);
        let fields = json!({"id": id, "application_id": application_id, "guild_id": guild_id,
            "version": version});
        merge(&mut command, fields);
        stored.push(command);
    }
    s.interactions.commands.insert(key, stored.clone());
    Ok(Json(stored).into_response())
}

/// `PATCH /webhooks/{app}/{token}/messages/@original`: edits the interaction's original
/// response; the token in the path is the only credential.
pub(super) async fn edit_original(
    State(state): Shared,
    headers: HeaderMap,
    Path((application_id, token)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, Response> {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let mut s = state.lock().unwrap();
    s.requests.push(Recorded {
        method: "PATCH".into(),
        path: format!("/webhooks/{application_id}/{token}/messages/@original"),
        authorization: headers.get("authorization").and_then(|v| v.to_str().ok()).map(Into::into),
        body: parsed.clone().unwrap_or(Value::Null),
    });
    let body = parsed.ok_or_else(invalid_json)?;
    let key = (application_id.clone(), token.clone());
    let found = s.interactions.tokens.get(&key).cloned();
    let found = found.filter(|(issued, _)| !issued.elapsed().is_ok_and(|a| a > TOKEN_LIFETIME));
    let (issued, mut message) = found.ok_or_else(|| error(404, 10015, "Unknown Webhook"))?;
    edit_fields(&mut message, &body);
    check_message(&message)?;
    s.interactions.tokens.insert(key, (issued, message.clone()));
    s.interactions.followups.push(Followup { application_id, token, body });
    Ok(Json(message).into_response())
}

/// `PATCH /channels/{channel}/messages/{message}`: edits one of the bot's messages.
pub(super) async fn edit_message(
    State(state): Shared,
    headers: HeaderMap,
    Path((channel_id, message_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, Response> {
    let body: Value = serde_json::from_slice(&body).map_err(|_| invalid_json())?;
    let mut s = state.lock().unwrap();
    let path = format!("/channels/{channel_id}/messages/{message_id}");
    let token = authenticate(&mut s, &headers, "PATCH", path, body.clone())?;
    channel_access(&s, &token, &channel_id)?;
    let found = s.messages.iter().position(|m| m.id == message_id && m.channel_id == channel_id);
    let index = found.ok_or_else(|| error(404, 10008, "Unknown Message"))?;
    if s.messages[index].body.get("author").is_some() {
        return Err(error(403, 50005, "Cannot edit a message authored by another user"));
    }
    let mut edited = s.messages[index].body.clone();
    edit_fields(&mut edited, &body);
    check_message(&edited)?;
    s.messages[index].body = edited;
    s.interactions.edits.push(Edit { channel_id, message_id, body });
    Ok(Json(message_json(&s.messages[index])).into_response())
}

fn invalid_json() -> Response {
    error(400, 50109, "The request body contains invalid JSON.")
}

/// A stored message as Discord answers it.
fn message_json(posted: &Posted) -> Value {
    let field = |name: &str| posted.body.get(name).cloned().unwrap_or(json!([]));
    json!({"id": posted.id, "channel_id": posted.channel_id,
        "content": posted.body["content"].as_str().unwrap_or_default(),
        "embeds": field("embeds"), "components": field("components")})
}

/// Applies an edit's fields (a null clears the field).
fn edit_fields(message: &mut Value, edit: &Value) {
    for (field, empty) in [("content", json!("")), ("embeds", json!([])), ("components", json!([]))]
    {
        if let Some(value) = edit.get(field) {
            message[field] = if value.is_null() { empty } else { value.clone() };
        }
    }
}

/// Copies the object `fields` into the object `target`.
fn merge(target: &mut Value, fields: Value) {
    if let (Some(target), Value::Object(fields)) = (target.as_object_mut(), fields) {
        target.extend(fields);
    }
}

fn next_snowflake(s: &mut FakeState) -> String {
    s.next_id += 1;
    s.next_id.to_string()
}

/// A stable snowflake-shaped id (18 digits) for a text.
pub(super) fn snowflake_of(text: &str) -> String {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    format!("6{:017}", hasher.finish() % 100_000_000_000_000_000)
}

fn unix_now() -> String {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs().to_string()
}
