//! What an agent posts to its channel: the message body as it is queued, stored in the outbox
//! and sent. Its fields are those of Discord's `POST /channels/{id}/messages`, which the Discord
//! client sends as it is; defining them here keeps the domain free of the adapter.

use serde::{Deserialize, Serialize};

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
    /// Rows of buttons (a tool approval's Approve and Deny).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<ActionRow>,
}

/// A row of buttons (Discord's component type 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionRow {
    #[serde(rename = "type")]
    pub kind: u8,
    pub components: Vec<Button>,
}

/// A button (component type 2) that sends an interaction with its `custom_id` when clicked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    #[serde(rename = "type")]
    pub kind: u8,
    /// 3 green (success), 4 red (danger).
    pub style: u8,
    pub label: String,
    pub custom_id: String,
}

impl ActionRow {
    pub fn buttons(buttons: Vec<Button>) -> Self {
        Self { kind: 1, components: buttons }
    }
}

impl Button {
    pub const SUCCESS: u8 = 3;
    pub const DANGER: u8 = 4;

    pub fn new(style: u8, label: &str, custom_id: String) -> Self {
        Self { kind: 2, style, label: label.to_owned(), custom_id }
    }
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
            components: Vec::new(),
        }
    }

    /// Makes a retry of this message return the first one instead of posting twice.
    pub fn with_nonce(mut self, nonce: String) -> Self {
        self.nonce = Some(nonce);
        self.enforce_nonce = true;
        self
    }
}
