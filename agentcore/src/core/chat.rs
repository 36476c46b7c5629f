//! Chat: connecting Discord servers, mapping agents to their channels, sending messages.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::{Core, Principal};
use crate::api::NewConnection;
use crate::discord::{Channel, DiscordError};
use crate::domain::activity::{Action, NewActivity};
use crate::domain::agent::AgentId;
use crate::domain::chat::{
    AllowedRoles, ChannelId, ChannelInfo, Connection, ConnectionKind, GuildId, Mapping,
    OutgoingMessage,
};
use crate::domain::now;
use crate::domain::workspace::Need;
use crate::error::{Conflict, Error, Refusal, Result, ValidationErrors};
use crate::store::ConnectionRecord;

/// How long an install link stays valid.
const STATE_TTL: Duration = Duration::from_secs(600);
/// View Channel, Send Messages, Embed Links, Read Message History.
const BOT_PERMISSIONS: u64 = 1024 + 2048 + 16384 + 65536;

/// Where to send a user to install the service's bot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OauthUrl {
    pub url: String,
    pub state: String,
}

/// `{"status": "connected", "guild_id", "guild_name"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Connected {
    pub status: String,
    pub guild_id: String,
    pub guild_name: String,
}

/// `{"status": "sent", "message_id", "channel_id"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Sent {
    pub status: String,
    pub message_id: String,
    pub channel_id: String,
}

impl Core {
    /// The link that installs the service's bot, with a `state` bound to the caller for ten
    /// minutes.
    pub async fn oauth_url(&self, who: &Principal) -> Result<OauthUrl> {
        who.require(Need::Manage)?;
        let config = &self.inner.discord_config;
        let client_id = require_setting(config.client_id.as_deref(), "discord.client_id")?;
        require_setting(
            config.client_secret.as_ref().map(|s| s.expose_secret()),
            "discord.client_secret",
        )?;
        let redirect_uri = require_setting(config.redirect_uri.as_deref(), "discord.redirect_uri")?;
        require_setting(config.bot_token.as_ref().map(|s| s.expose_secret()), "discord.bot_token")?;
        let state = self.auth().issue_state(&who.workspace, STATE_TTL)?;
        let site =
            self.inner.discord.api_base().split("/api/").next().unwrap_or_default().to_owned();
        let url = format!(
            "{site}/oauth2/authorize?client_id={}&scope=bot%20applications.commands&permissions={BOT_PERMISSIONS}&response_type=code&redirect_uri={}&state={}",
            encode(client_id),
            encode(redirect_uri),
            encode(&state)
        );
        Ok(OauthUrl { url, state })
    }

    /// Completes an install: checks `state` (issued by [`Core::oauth_url`] to the caller,
    /// unexpired, unspent), exchanges `code`, trusts the guild Discord names in its answer (the
    /// redirect's `guild_id` is only a hint), spends the state and stores the connection. So a
    /// link carrying someone else's `code`, followed by a signed-in user, connects nothing.
    pub async fn oauth_callback(
        &self,
        who: &Principal,
        code: &str,
        state: Option<&str>,
    ) -> Result<Connected> {
        who.require(Need::Manage)?;
        let config = &self.inner.discord_config;
        let client_id = require_setting(config.client_id.as_deref(), "discord.client_id")?;
        let client_secret =
            require_setting(config.client_secret.as_ref(), "discord.client_secret")?;
        let redirect_uri = require_setting(config.redirect_uri.as_deref(), "discord.redirect_uri")?;
        let bot_token = require_setting(config.bot_token.as_ref(), "discord.bot_token")?;
        let Some(state) = state else {
            return Err(ValidationErrors::single(
                "state",
                "is required: start the install from the link of oauth-url",
            )
            .into());
        };
        let state = self
            .auth()
            .verify_state(state)
            .filter(|state| state.user_id == who.workspace.as_str())
            .ok_or_else(|| ValidationErrors::single("state", "is invalid, expired or not yours"))?;
        let exchanged = self
            .inner
            .discord
            .exchange_code(client_id, client_secret, code, redirect_uri)
            .await
            .map_err(|error| match error {
                DiscordError::Rejected { .. } | DiscordError::InvalidToken => {
                    ValidationErrors::single(
                        "code",
                        "was refused by Discord (expired or already used)",
                    )
                    .into()
                }
                other => upstream(&other),
            })?;
        let guild = exchanged.guild.ok_or_else(|| {
            Error::Upstream(
                "Discord's token answer named no server; was the bot scope granted?".into(),
            )
        })?;
        let guild_id = GuildId::parse(&guild.id)
            .map_err(|_| Error::Upstream("Discord named an invalid server id".into()))?;
        let expires_at = chrono::DateTime::from_timestamp(state.expires_at, 0).unwrap_or_else(now);
        if !self.store().spend_oauth_state(&state.id, expires_at).await? {
            return Err(ValidationErrors::single("state", "was already used").into());
        }
        let bot = Bot {
            token: bot_token,
            kind: ConnectionKind::Oauth,
            sealed: None,
            application_id: Some(client_id.to_owned()),
            public_key: None,
        };
        self.store_connection(who, &guild_id, bot, None).await
    }

    /// Connects a guild through the user's own bot, after checking the token and the guild;
    /// registers the slash commands of the bot's application there.
    pub async fn connect(&self, who: &Principal, new: &NewConnection) -> Result<Connected> {
        who.require(Need::Manage)?;
        let (guild_id, token) = (&new.guild, &new.token);
        let sealed = self.inner.secrets.seal(
            token.0.expose_secret(),
            &seal_context(who.workspace.as_str(), guild_id.as_str()),
        )?;
        self.inner.discord.forgive(&token.0);
        self.inner.discord.current_user(&token.0).await.map_err(|e| guild_error(&e))?;
        let application = match self.inner.discord.current_application(&token.0).await {
            Ok(application) => Some(application),
            Err(error) => {
                tracing::warn!(%error, "cannot read the bot's application; no slash commands");
                None
            }
        };
        let public_key =
            new.public_key.clone().or_else(|| application.as_ref()?.verify_key.clone());
        let bot = Bot {
            token: &token.0,
            kind: ConnectionKind::BotToken,
            sealed: Some(sealed),
            application_id: application.map(|a| a.id),
            public_key,
        };
        self.store_connection(who, guild_id, bot, new.guild_name.clone()).await
    }

    pub async fn connections(&self, who: &Principal) -> Result<Vec<Connection>> {
        self.store().connections(&who.workspace).await
    }

    /// Checks that the connection's bot still works and sees its guild; returns its name.
    pub async fn test_connection(&self, who: &Principal, guild_id: &GuildId) -> Result<String> {
        who.require(Need::Manage)?;
        let (token, _) = self.credentials(who, guild_id).await?;
        let discord = &self.inner.discord;
        discord.current_user(&token).await.map_err(|e| guild_error(&e))?;
        let guild = discord.guild(&token, guild_id.as_str()).await.map_err(|e| guild_error(&e))?;
        Ok(guild.name)
    }

    /// Removes the connection, its mappings and its pending posts, and the slash commands it
    /// registered in the server (when Discord can still be asked to).
    pub async fn disconnect(&self, who: &Principal, guild_id: &GuildId) -> Result<()> {
        who.require(Need::Manage)?;
        let found = self.credentials(who, guild_id).await;
        if let Ok((token, record)) = &found
            && let Some(application) = &record.connection.application_id
        {
            let none = serde_json::json!([]);
            let removed = self
                .inner
                .discord
                .overwrite_guild_commands(token, application, guild_id.as_str(), &none)
                .await;
            if let Err(error) = removed {
                tracing::warn!(%error, guild_id = %guild_id, "cannot remove the slash commands");
            }
        }
        self.store().delete_connection(&who.workspace, guild_id.as_str()).await?;
        let was = found.ok().and_then(|(_, record)| serde_json::to_value(record.connection).ok());
        self.record(who, "connection.disconnected", ("connection", guild_id.as_str()), was, None)
            .await;
        Ok(())
    }

    /// Sets the roles whose members may run commands that change something.
    pub async fn set_allowed_roles(
        &self,
        who: &Principal,
        guild_id: &GuildId,
        roles: &AllowedRoles,
    ) -> Result<Connection> {
        who.require(Need::Manage)?;
        let before = self.store().connection(&who.workspace, guild_id.as_str()).await?;
        let after =
            self.store().set_allowed_roles(&who.workspace, guild_id.as_str(), roles).await?;
        let was = serde_json::json!({"allowed_role_ids": before.connection.allowed_role_ids});
        let is = serde_json::json!({"allowed_role_ids": after.allowed_role_ids});
        let target = ("connection", guild_id.as_str());
        self.record(who, "connection.roles_set", target, Some(was), Some(is)).await;
        Ok(after)
    }

    /// The guild's text channels (types 0 and 5) by position; refreshes `channel_count`.
    pub async fn channels(&self, who: &Principal, guild_id: &GuildId) -> Result<Vec<ChannelInfo>> {
        let (token, _) = self.credentials(who, guild_id).await?;
        let channels = self.text_channels(&token, guild_id).await?;
        let count = i64::try_from(channels.len()).unwrap_or(i64::MAX);
        self.store().set_channel_count(&who.workspace, guild_id.as_str(), count).await?;
        Ok(channels)
    }

    /// Maps the agent to a text channel of the guild, replacing its earlier mapping. The stored
    /// channel name is Discord's.
    pub async fn map_agent(
        &self,
        who: &Principal,
        guild_id: &GuildId,
        agent: &AgentId,
        channel_id: &ChannelId,
    ) -> Result<Mapping> {
        who.require(Need::Work)?;
        self.store().agent(&who.workspace, agent).await?;
        let (token, _) = self.credentials(who, guild_id).await?;
        let channels = self.text_channels(&token, guild_id).await?;
        let channel =
            channels.into_iter().find(|c| c.id == channel_id.as_str()).ok_or_else(|| {
                ValidationErrors::single("channel_id", "is not a text channel of this server")
            })?;
        let mapping = Mapping {
            id: uuid::Uuid::now_v7().to_string(),
            agent_id: agent.clone(),
            guild_id: guild_id.as_str().to_owned(),
            channel_id: channel.id,
            channel_name: channel.name,
            created_at: now(),
        };
        self.store().upsert_mapping(&who.workspace, &mapping).await
    }

    pub async fn mappings(&self, who: &Principal) -> Result<Vec<Mapping>> {
        self.store().mappings(&who.workspace).await
    }

    pub async fn unmap_agent(&self, who: &Principal, agent: &AgentId) -> Result<()> {
        who.require(Need::Work)?;
        self.store().delete_mapping(&who.workspace, agent).await
    }

    /// Sends a message to the agent's channel now, and waits for Discord's message id.
    pub async fn send(
        &self,
        who: &Principal,
        guild_id: &GuildId,
        agent: &AgentId,
        message: &OutgoingMessage,
    ) -> Result<Sent> {
        who.require(Need::Work)?;
        let (token, _) = self.credentials(who, guild_id).await?;
        self.store().agent(&who.workspace, agent).await?;
        let mapping = self
            .store()
            .mappings(&who.workspace)
            .await?
            .into_iter()
            .find(|m| m.agent_id == *agent && m.guild_id == guild_id.as_str())
            .ok_or_else(|| {
                Error::conflict(
                    Conflict::AgentNotMapped,
                    format!("Agent '{agent}' has no channel in server {guild_id}; map it first."),
                )
            })?;
        let posted = self
            .inner
            .discord
            .create_message(&token, &mapping.channel_id, &message.body())
            .await
            .map_err(|e| match e {
                DiscordError::InvalidToken => guild_error(&e),
                other => upstream(&other),
            })?;
        let details = format!("Message sent to #{} by a user.", mapping.channel_name);
        self.store()
            .log_activity(&who.workspace, agent, &NewActivity::new(Action::MessageSent, details))
            .await?;
        Ok(Sent { status: "sent".into(), message_id: posted.id, channel_id: posted.channel_id })
    }

    /// The bot token to act with in `guild_id`, and the connection.
    pub(crate) async fn credentials(
        &self,
        who: &Principal,
        guild_id: &GuildId,
    ) -> Result<(SecretString, ConnectionRecord)> {
        let record = self.store().connection(&who.workspace, guild_id.as_str()).await?;
        let token = self.token_of(who.workspace.as_str(), &record)?;
        Ok((token, record))
    }

    /// Opens a connection's sealed token, or the service bot's for OAuth connections.
    pub(crate) fn token_of(&self, owner: &str, record: &ConnectionRecord) -> Result<SecretString> {
        match (record.connection.kind, &record.sealed_token) {
            (ConnectionKind::BotToken, Some(sealed)) => {
                self.inner.secrets.open(sealed, &seal_context(owner, &record.connection.guild_id))
            }
            (ConnectionKind::BotToken, None) => {
                Err(Error::internal("a bot-token connection has no token"))
            }
            (ConnectionKind::Oauth, _) => {
                require_setting(self.inner.discord_config.bot_token.as_ref(), "discord.bot_token")
                    .cloned()
            }
        }
    }

    async fn store_connection(
        &self,
        who: &Principal,
        guild_id: &GuildId,
        bot: Bot<'_>,
        guild_name: Option<String>,
    ) -> Result<Connected> {
        let discord = &self.inner.discord;
        let token = bot.token;
        let guild = discord.guild(token, guild_id.as_str()).await.map_err(|e| guild_error(&e))?;
        if guild.id != guild_id.as_str() {
            return Err(Error::Upstream(
                "Discord answered for a different server than asked.".into(),
            ));
        }
        let channels = self.text_channels(token, guild_id).await?;
        let record = ConnectionRecord {
            connection: Connection {
                id: uuid::Uuid::now_v7().to_string(),
                guild_id: guild.id.clone(),
                guild_name: guild_name.filter(|n| !n.trim().is_empty()).unwrap_or(guild.name),
                kind: bot.kind,
                connected_at: now(),
                channel_count: i64::try_from(channels.len()).unwrap_or(i64::MAX),
                application_id: bot.application_id.clone(),
                public_key: bot.public_key,
                allowed_role_ids: Vec::new(),
            },
            sealed_token: bot.sealed,
            owner_id: who.workspace.as_str().to_owned(),
        };
        let stored = self.store().upsert_connection(&who.workspace, &record).await?;
        tracing::info!(workspace = %who.workspace, guild_id = %stored.guild_id, kind = bot.kind.as_str(), "guild connected");
        let after = serde_json::to_value(&stored).ok();
        self.record(who, "connection.connected", ("connection", &stored.guild_id), None, after)
            .await;
        if let Some(application) = &bot.application_id {
            let commands = crate::discord::interaction::commands();
            match discord
                .overwrite_guild_commands(token, application, guild_id.as_str(), &commands)
                .await
            {
                Ok(()) => tracing::info!(guild_id = %stored.guild_id, "slash commands registered"),
                // The connection works without them: posts do not need commands.
                Err(error) => {
                    tracing::warn!(%error, guild_id = %stored.guild_id, "cannot register the slash commands (was the applications.commands scope granted?)")
                }
            }
        }
        Ok(Connected {
            status: "connected".into(),
            guild_id: stored.guild_id,
            guild_name: stored.guild_name,
        })
    }

    async fn text_channels(
        &self,
        token: &SecretString,
        guild_id: &GuildId,
    ) -> Result<Vec<ChannelInfo>> {
        let channels = self
            .inner
            .discord
            .guild_channels(token, guild_id.as_str())
            .await
            .map_err(|e| guild_error(&e))?;
        let mut text: Vec<ChannelInfo> = channels
            .into_iter()
            .filter(Channel::is_text)
            .map(|c| ChannelInfo {
                name: c.name.unwrap_or_default(),
                position: c.position.unwrap_or(0),
                id: c.id,
            })
            .collect();
        text.sort_by(|a, b| a.position.cmp(&b.position).then_with(|| a.id.cmp(&b.id)));
        Ok(text)
    }

    pub(crate) fn wake_outbox(&self) {
        self.inner.wakeups.post_queued();
    }
}

/// The bot a connection acts through, and its application.
struct Bot<'a> {
    token: &'a SecretString,
    kind: ConnectionKind,
    sealed: Option<String>,
    application_id: Option<String>,
    public_key: Option<String>,
}

/// What a bot token is sealed to: its owner and guild. Sealing and opening both build it
/// here, so a change cannot leave every stored token unopenable.
fn seal_context(owner: &str, guild_id: &str) -> String {
    format!("{owner}/{guild_id}")
}

/// Discord's answer to a call about a guild, as the caller should see it.
fn guild_error(error: &DiscordError) -> Error {
    match error {
        DiscordError::InvalidToken => {
            Error::refused(Refusal::InvalidBotToken, "Discord does not accept this bot token.")
        }
        DiscordError::Rejected { status: 403 | 404, .. } => Error::refused(
            Refusal::GuildNotAccessible,
            "The bot cannot see this server; invite it to the server first.",
        ),
        other => upstream(other),
    }
}

fn upstream(error: &DiscordError) -> Error {
    tracing::warn!(%error, "Discord call failed");
    match error {
        DiscordError::Rejected { message, .. } if !message.is_empty() => {
            Error::Upstream(format!("Discord refused the request: {message}."))
        }
        DiscordError::Paused => Error::Upstream(format!("{error}.")),
        _ => Error::Upstream("Discord could not complete the request; try again later.".into()),
    }
}

fn require_setting<'a, T: ?Sized>(value: Option<&'a T>, name: &str) -> Result<&'a T> {
    value.ok_or_else(|| Error::NotConfigured(format!("Discord installs need the setting {name}.")))
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
