//! Discord over plain REST: a small client for the few calls the service makes, behind a rate
//! limiter that learns Discord's buckets from its headers.
//!
//! Why not `twilight-http`: its typed message builder has no `enforce_nonce`, it ignores
//! `Retry-After` on a 429 without `X-RateLimit-Scope`, and its `/api/v10` prefix is fixed,
//! which makes a faithful local fake awkward. Five endpoints do not justify working around
//! those; see docs/decisions.md.

mod client;
pub mod interaction;
mod ratelimit;
pub mod signature;

use serde::{Deserialize, Serialize};

pub use client::{DiscordClient, DiscordError};
pub use ratelimit::RateLimiter;

/// Discord channel types that take a plain message: text (0) and announcement (5).
pub const TEXT_CHANNEL_TYPES: [u8; 2] = [0, 5];

/// The bot behind a token (`GET /users/@me`).
#[derive(Debug, Clone, Deserialize)]
pub struct BotUser {
    pub id: String,
    pub username: String,
    #[serde(default)]
    pub bot: bool,
}

/// The application behind a bot token (`GET /applications/@me`).
#[derive(Debug, Clone, Deserialize)]
pub struct Application {
    pub id: String,
    /// Its public key, hex: what interactions are verified with.
    #[serde(default)]
    pub verify_key: Option<String>,
}

/// `GET /guilds/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Guild {
    pub id: String,
    pub name: String,
}

/// One entry of `GET /guilds/{id}/channels`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Channel {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: u8,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub position: Option<i64>,
}

impl Channel {
    pub fn is_text(&self) -> bool {
        TEXT_CHANNEL_TYPES.contains(&self.kind)
    }
}

pub use crate::domain::message::{AllowedMentions, Embed, MessageBody};

/// A message read from a channel.
#[derive(Debug, Clone, Deserialize)]
pub struct ChannelMessage {
    pub id: String,
    #[serde(default)]
    pub content: String,
    pub author: Author,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Author {
    pub username: String,
}

/// A posted message.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub id: String,
    pub channel_id: String,
}

/// The answer of the OAuth2 code exchange; for the `bot` scope it names the guild.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenResponse {
    #[serde(default)]
    pub guild: Option<Guild>,
}
