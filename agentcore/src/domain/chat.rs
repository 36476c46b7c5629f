//! Chat: Discord connections, agent-to-channel mappings and messages.

use chrono::{DateTime, Utc};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::agent::AgentId;
use super::message::{Embed, MessageBody};
use super::text;

/// A Discord snowflake: the decimal id of a guild, channel or message.
fn snowflake(value: &str) -> Result<String, String> {
    // Snowflakes never start with 0; a leading zero would name the same number twice.
    if !value.is_empty()
        && value.len() <= 20
        && !value.starts_with('0')
        && value.bytes().all(|b| b.is_ascii_digit())
    {
        Ok(value.to_owned())
    } else {
        Err("must be a Discord id (up to 20 digits)".into())
    }
}

text::text_newtype!(
    /// A Discord server (guild) id.
    GuildId,
    snowflake
);

text::text_newtype!(
    /// A Discord channel id.
    ChannelId,
    snowflake
);

/// A bot token as the user pasted it. Never logged, never returned.
#[derive(Debug, Clone)]
pub struct BotToken(pub(crate) SecretString);

impl BotToken {
    pub fn parse(value: &str) -> Result<Self, String> {
        let value = value.trim();
        if value.is_empty() {
            return Err("must not be empty".into());
        }
        if value.len() > 200 || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("is not a Discord bot token".into());
        }
        Ok(Self(SecretString::from(value.to_owned())))
    }
}

/// How a connection reaches its guild.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ConnectionKind {
    /// The user's own bot; its token is stored, sealed.
    BotToken,
    /// The service's bot, installed through OAuth.
    Oauth,
}

impl ConnectionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionKind::BotToken => "bot_token",
            ConnectionKind::Oauth => "oauth",
        }
    }
}

/// A connected guild as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Connection {
    pub id: String,
    pub guild_id: String,
    pub guild_name: String,
    pub kind: ConnectionKind,
    pub connected_at: DateTime<Utc>,
    /// Text channels, as last fetched.
    pub channel_count: i64,
    /// The application whose slash commands the server has (the service's, or the user's bot's).
    pub application_id: Option<String>,
    /// The user's bot's application public key, which its interactions are verified with;
    /// `null` for the service's bot (its key is the operator's setting).
    pub public_key: Option<String>,
    /// Roles whose members may run commands that change something, besides Manage Server.
    pub allowed_role_ids: Vec<String>,
}

/// The roles allowed to run commands that change something: Discord ids, each once, at most 25.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedRoles(Vec<String>);

impl AllowedRoles {
    pub const MAX: usize = 25;

    pub fn parse<S: AsRef<str>>(ids: &[S]) -> Result<Self, String> {
        let mut roles: Vec<String> = Vec::new();
        for id in ids {
            let id = snowflake(id.as_ref()).map_err(|e| format!("'{}' {e}", id.as_ref()))?;
            if !roles.contains(&id) {
                roles.push(id);
            }
        }
        if roles.len() > Self::MAX {
            return Err(format!("at most {} roles", Self::MAX));
        }
        Ok(Self(roles))
    }

    pub fn ids(&self) -> &[String] {
        &self.0
    }

    /// As stored: a JSON array of ids.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "[]".into())
    }

    pub fn from_json(stored: &str) -> Self {
        let ids: Vec<String> = serde_json::from_str(stored).unwrap_or_default();
        Self::parse(&ids).unwrap_or_default()
    }
}

/// An application's public key as the developer portal shows it: 64 hex characters.
pub fn public_key(value: &str) -> Result<String, String> {
    let value = value.trim().to_ascii_lowercase();
    if value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(value)
    } else {
        Err("must be the application's public key: 64 hex characters".into())
    }
}

/// A text channel of a guild.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelInfo {
    pub id: String,
    pub name: String,
    pub position: i64,
}

/// Where an agent posts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Mapping {
    pub id: String,
    pub agent_id: AgentId,
    pub guild_id: String,
    pub channel_id: String,
    pub channel_name: String,
    pub created_at: DateTime<Utc>,
}

/// A message a user sends through an agent: at least content or one embed field, within
/// Discord's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    content: Option<String>,
    embed: Option<Embed>,
}

impl OutgoingMessage {
    pub const MAX_CONTENT: usize = 2000;
    pub const MAX_TITLE: usize = 256;
    pub const MAX_DESCRIPTION: usize = 4096;
    pub const MAX_COLOR: i64 = 0xFF_FF_FF;

    pub fn content(value: &str) -> Result<String, String> {
        text::text(value, 0, Self::MAX_CONTENT)
    }

    pub fn embed_title(value: &str) -> Result<String, String> {
        text::text(value, 0, Self::MAX_TITLE)
    }

    pub fn embed_description(value: &str) -> Result<String, String> {
        text::text(value, 0, Self::MAX_DESCRIPTION)
    }

    pub fn embed_color(value: i64) -> Result<u32, String> {
        u32::try_from(value)
            .ok()
            .filter(|c| i64::from(*c) <= Self::MAX_COLOR)
            .ok_or_else(|| format!("must be an integer from 0 to {}", Self::MAX_COLOR))
    }

    /// Assembles the checked parts; `None` when there is nothing to show.
    pub fn new(
        content: Option<String>,
        title: Option<String>,
        description: Option<String>,
        color: Option<u32>,
    ) -> Option<Self> {
        let content = content.filter(|c| !c.trim().is_empty());
        let title = title.filter(|t| !t.trim().is_empty());
        let description = description.filter(|d| !d.trim().is_empty());
        let embed = (title.is_some() || description.is_some()).then_some(Embed {
            title,
            description,
            color,
        });
        (content.is_some() || embed.is_some()).then_some(Self { content, embed })
    }

    pub fn body(&self) -> MessageBody {
        MessageBody::new(self.content.clone(), self.embed.clone())
    }
}

/// A post waiting in the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxPost {
    pub id: i64,
    pub owner_id: String,
    pub agent_id: AgentId,
    pub guild_id: String,
    pub channel_id: String,
    pub nonce: String,
    pub body: MessageBody,
    pub attempts: i32,
}

/// One queue of posts: a user's posts to one channel, delivered in order. Users sharing a
/// channel have separate queues, so one user's stuck post never holds back another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutboxLane {
    pub owner_id: String,
    pub channel_id: String,
}

/// A post to queue with a change, if the agent is mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPost {
    pub nonce: String,
    pub body: MessageBody,
}

impl NewPost {
    /// Discord keeps a nonce of up to 25 characters; 24 hex digits of a random UUID suffice.
    pub fn new(body: MessageBody) -> Self {
        let nonce = uuid::Uuid::new_v4().simple().to_string()[..24].to_owned();
        Self { nonce, body }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snowflakes_are_digits() {
        assert!(GuildId::parse("123456789012345678").is_ok());
        for bad in ["", "abc", "12a", &"1".repeat(21), "-1", "0123"] {
            assert!(GuildId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_message_needs_something_to_show() {
        assert!(OutgoingMessage::new(None, None, None, Some(5)).is_none());
        assert!(OutgoingMessage::new(Some("  ".into()), None, None, None).is_none());
        let message =
            OutgoingMessage::new(None, Some("Title".into()), None, Some(0xFF0000)).unwrap();
        assert_eq!(message.body().embeds.len(), 1);
        assert!(message.body().allowed_mentions.parse.is_empty());
    }

    #[test]
    fn colours_are_24_bit() {
        assert!(OutgoingMessage::embed_color(0).is_ok());
        assert!(OutgoingMessage::embed_color(0xFFFFFF).is_ok());
        assert!(OutgoingMessage::embed_color(0x1000000).is_err());
        assert!(OutgoingMessage::embed_color(-1).is_err());
    }

    #[test]
    fn nonces_fit_discord() {
        let post = NewPost::new(MessageBody::new(Some("x".into()), None));
        assert!(post.nonce.len() <= 25);
    }
}
