//! Discord over plain REST: a small client for the few calls the service makes, behind a rate
//! limiter that learns Discord's buckets from its headers.
//!
//! Why not `twilight-http`: its typed message builder has no `enforce_nonce`, it ignores
//! `Retry-After` on a 429 without `X-RateLimit-Scope`, and its `/api/v10` prefix is fixed,
//! which makes a faithful local fake awkward. Five endpoints do not justify working around
//! those; see ARCHITECTURE.md.

mod client;
mod ratelimit;

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

/// An embed as the service sends it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Embed {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub color: Option<u32>,
}

/// The body of `POST /channels/{id}/messages`. Mentions never ping: the text is written by
/// agents and users, not meant to notify anyone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub embeds: Vec<Embed>,
    pub allowed_mentions: AllowedMentions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enforce_nonce: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowedMentions {
    pub parse: Vec<String>,
}

impl MessageBody {
    pub fn new(content: Option<String>, embed: Option<Embed>) -> Self {
        Self {
            content,
            embeds: embed.into_iter().collect(),
            allowed_mentions: AllowedMentions::default(),
            nonce: None,
            enforce_nonce: false,
        }
    }

    /// Makes a retry of this message return the first one instead of posting twice.
    pub fn with_nonce(mut self, nonce: String) -> Self {
        self.nonce = Some(nonce);
        self.enforce_nonce = true;
        self
    }
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
