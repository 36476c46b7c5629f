//! Discord: connections, channels, mappings and messages.

use serde::{Deserialize, Serialize};

use crate::domain::agent::AgentId;
use crate::domain::chat::{
    AllowedRoles, BotToken, ChannelId, ChannelInfo, Connection, GuildId, Mapping, OutgoingMessage,
};
use crate::error::ValidationErrors;

use super::{required, text_field};

/// `POST /api/chat/callback`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Only a hint: the guild Discord names in the token exchange is the one stored.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<String>,
    /// The state `oauth-url` issued: required (checked after the install is known to be
    /// configured, so a server without it answers `not_configured` first).
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl CallbackRequest {
    /// The code and the state to verify.
    pub fn parse(&self) -> Result<(String, Option<String>), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let code = required(&mut e, "code", &self.code)
            .and_then(|v| e.check("code", text_field(v, 1, 512)));
        if let Some(guild_id) = &self.guild_id {
            e.check("guild_id", GuildId::parse(guild_id));
        }
        match code {
            Some(code) if e.is_empty() => Ok((code, self.state.clone())),
            _ => Err(e),
        }
    }
}

/// `POST /api/chat/connect`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConnectRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot_token: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guild_name: Option<String>,
    /// The bot's application public key (64 hex characters), which its interactions are
    /// verified with; by default the one Discord reports for the application.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
}

/// A connection through the user's own bot, as asked.
#[derive(Debug, Clone)]
pub struct NewConnection {
    pub guild: GuildId,
    pub token: BotToken,
    pub guild_name: Option<String>,
    pub public_key: Option<String>,
}

impl ConnectRequest {
    pub fn parse(&self) -> Result<NewConnection, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let token = required(&mut e, "bot_token", &self.bot_token)
            .and_then(|v| e.check("bot_token", BotToken::parse(v)));
        let guild = required(&mut e, "guild_id", &self.guild_id)
            .and_then(|v| e.check("guild_id", GuildId::parse(v)));
        let guild_name =
            self.guild_name.as_deref().and_then(|v| e.check("guild_name", text_field(v, 0, 100)));
        let public_key = self
            .public_key
            .as_deref()
            .filter(|k| !k.trim().is_empty())
            .and_then(|v| e.check("public_key", crate::domain::chat::public_key(v)));
        match (guild, token) {
            (Some(guild), Some(token)) if e.is_empty() => {
                Ok(NewConnection { guild, token, guild_name, public_key })
            }
            _ => Err(e),
        }
    }
}

/// `POST /api/chat/mappings/{guild_id}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MapRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<String>,
    /// Accepted for compatibility; the name stored is the channel's real one.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel_name: Option<String>,
}

impl MapRequest {
    pub fn parse(&self) -> Result<(AgentId, ChannelId), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let agent = required(&mut e, "agent_id", &self.agent_id)
            .and_then(|v| e.check("agent_id", AgentId::parse(v)));
        let channel = required(&mut e, "channel_id", &self.channel_id)
            .and_then(|v| e.check("channel_id", ChannelId::parse(v)));
        if let Some(name) = &self.channel_name {
            e.check("channel_name", text_field(name, 0, 100));
        }
        match (agent, channel) {
            (Some(agent), Some(channel)) if e.is_empty() => Ok((agent, channel)),
            _ => Err(e),
        }
    }
}

/// `POST /api/chat/send/{guild_id}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SendRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 2000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 256))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed_title: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 4096))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed_description: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 0, maximum = 16777215))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed_color: Option<i64>,
}

impl SendRequest {
    pub fn parse(&self) -> Result<(AgentId, OutgoingMessage), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let agent = required(&mut e, "agent_id", &self.agent_id)
            .and_then(|v| e.check("agent_id", AgentId::parse(v)));
        let content =
            self.content.as_deref().and_then(|v| e.check("content", OutgoingMessage::content(v)));
        let title = self
            .embed_title
            .as_deref()
            .and_then(|v| e.check("embed_title", OutgoingMessage::embed_title(v)));
        let description = self
            .embed_description
            .as_deref()
            .and_then(|v| e.check("embed_description", OutgoingMessage::embed_description(v)));
        let color =
            self.embed_color.and_then(|v| e.check("embed_color", OutgoingMessage::embed_color(v)));
        if !e.is_empty() {
            return Err(e);
        }
        let Some(message) = OutgoingMessage::new(content, title, description, color) else {
            e.add("content", "a message needs content, an embed title or an embed description");
            return Err(e);
        };
        agent.map(|agent| (agent, message)).ok_or(e)
    }
}

/// `{"connections": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConnectionList {
    pub connections: Vec<Connection>,
}

/// `{"channels": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelList {
    pub channels: Vec<ChannelInfo>,
}

/// `{"mappings": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MappingList {
    pub mappings: Vec<Mapping>,
}

/// `{"status": "mapped", ...}`: the mapping, with the API's status word.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Mapped {
    pub status: String,
    #[serde(flatten)]
    pub mapping: Mapping,
}

/// `{"status": "ok", "guild_name"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConnectionTest {
    pub status: String,
    pub guild_name: String,
}

/// `{"status": "disconnected", "guild_id"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Disconnected {
    pub status: String,
    pub guild_id: String,
}

/// `{"status": "unmapped", "agent_id"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Unmapped {
    pub status: String,
    pub agent_id: String,
}

/// `PUT /api/chat/connections/{guild_id}/roles`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RolesRequest {
    /// Role ids whose members may run commands that change something (besides members with
    /// Manage Server); `[]` leaves only those.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_role_ids: Option<Vec<String>>,
}

impl RolesRequest {
    pub fn parse(&self) -> Result<AllowedRoles, ValidationErrors> {
        let Some(ids) = &self.allowed_role_ids else {
            return Err(ValidationErrors::single("allowed_role_ids", "is required"));
        };
        AllowedRoles::parse(ids)
            .map_err(|error| ValidationErrors::single("allowed_role_ids", error))
    }
}
