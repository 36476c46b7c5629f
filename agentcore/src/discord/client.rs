//! The HTTP side: authentication, timeouts, error decoding, and retries of 429s.

use std::time::Duration;

use reqwest::{Method, RequestBuilder, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::ratelimit::{Observed, RateLimiter, Refused, Slot, TokenKey};
use super::{
    Application, BotUser, Channel, ChannelMessage, Guild, Message, MessageBody, TokenResponse,
};

/// How often a request that met a 429 is sent again (after waiting as told) before giving up.
const RATE_LIMIT_RETRIES: u32 = 5;

/// Why a Discord call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscordError {
    /// 401: the token is invalid or was revoked. It is not used again until replaced.
    #[error("Discord rejected the bot token")]
    InvalidToken,
    /// A 4xx other than 401 and 429: retrying the same request will not help.
    #[error("Discord refused the request ({status}, code {code}): {message}")]
    Rejected { status: u16, code: i64, message: String },
    /// Still rate limited after waiting several times.
    #[error("Discord kept rate limiting the request")]
    RateLimited,
    /// 5xx: Discord had a problem; a later retry may work.
    #[error("Discord answered {status}")]
    Unavailable { status: u16 },
    /// This process stopped calling Discord for a while: it made too many invalid requests
    /// lately, and Discord bans the address of whoever makes 10,000 in ten minutes.
    #[error("Discord calls are paused after too many refused requests; try again in a few minutes")]
    Paused,
    /// No answer: a timeout, a refused or dropped connection, an unreadable body.
    #[error("Discord could not be reached: {0}")]
    Transport(String),
}

impl DiscordError {
    /// Whether the same request may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            DiscordError::RateLimited
                | DiscordError::Paused
                | DiscordError::Unavailable { .. }
                | DiscordError::Transport(_)
        )
    }

    /// Discord's JSON error code, when it sent one.
    pub fn code(&self) -> Option<i64> {
        match self {
            DiscordError::Rejected { code, .. } => Some(*code),
            _ => None,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    message: String,
    #[serde(default)]
    retry_after: Option<f64>,
    #[serde(default)]
    global: bool,
}

/// A Discord REST client. One per process: its limiter must see every request.
#[derive(Debug)]
pub struct DiscordClient {
    http: reqwest::Client,
    api_base: String,
    limiter: RateLimiter,
    /// 429 answers received, for metrics.
    rate_limited: std::sync::atomic::AtomicU64,
}

impl DiscordClient {
    /// `api_base` is like `https://discord.com/api/v10`; `timeout` bounds each request.
    pub fn new(api_base: &str, timeout: Duration) -> Result<Self, DiscordError> {
        crate::tls::install_provider();
        let user_agent =
            format!("DiscordBot ({}, {})", env!("CARGO_PKG_REPOSITORY"), env!("CARGO_PKG_VERSION"));
        let http = reqwest::Client::builder()
            .user_agent(user_agent)
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| DiscordError::Transport(e.to_string()))?;
        Ok(Self {
            http,
            api_base: api_base.trim_end_matches('/').to_owned(),
            limiter: RateLimiter::new(),
            rate_limited: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// How many 429s Discord has answered this client.
    pub fn rate_limited(&self) -> u64 {
        self.rate_limited.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn api_base(&self) -> &str {
        &self.api_base
    }

    /// Forgets an earlier 401 of `token`, for when it is stored again.
    pub fn forgive(&self, token: &SecretString) {
        self.limiter.forgive(TokenKey::of(token.expose_secret()));
    }

    /// The bot user behind `token`; `InvalidToken` when Discord refuses it.
    pub async fn current_user(&self, token: &SecretString) -> Result<BotUser, DiscordError> {
        self.bot(token, Method::GET, "GET /users/@me", "@me", "/users/@me".into(), None).await
    }

    pub async fn guild(&self, token: &SecretString, guild_id: &str) -> Result<Guild, DiscordError> {
        self.bot(
            token,
            Method::GET,
            "GET /guilds/{id}",
            guild_id,
            format!("/guilds/{guild_id}"),
            None,
        )
        .await
    }

    /// Every channel of the guild, of every type, as Discord lists them.
    pub async fn guild_channels(
        &self,
        token: &SecretString,
        guild_id: &str,
    ) -> Result<Vec<Channel>, DiscordError> {
        let path = format!("/guilds/{guild_id}/channels");
        self.bot(token, Method::GET, "GET /guilds/{id}/channels", guild_id, path, None).await
    }

    pub async fn create_message(
        &self,
        token: &SecretString,
        channel_id: &str,
        body: &MessageBody,
    ) -> Result<Message, DiscordError> {
        let path = format!("/channels/{channel_id}/messages");
        let body =
            serde_json::to_value(body).map_err(|e| DiscordError::Transport(e.to_string()))?;
        self.bot(token, Method::POST, "POST /channels/{id}/messages", channel_id, path, Some(body))
            .await
    }

    /// The channel's latest `limit` messages, newest first.
    pub async fn channel_messages(
        &self,
        token: &SecretString,
        channel_id: &str,
        limit: u8,
    ) -> Result<Vec<ChannelMessage>, DiscordError> {
        let path = format!("/channels/{channel_id}/messages?limit={limit}");
        self.bot(token, Method::GET, "GET /channels/{id}/messages", channel_id, path, None).await
    }

    /// Edits a message the bot posted (an approval's, once decided).
    pub async fn edit_message(
        &self,
        token: &SecretString,
        channel_id: &str,
        message_id: &str,
        body: &MessageBody,
    ) -> Result<Message, DiscordError> {
        let path = format!("/channels/{channel_id}/messages/{message_id}");
        let mut body =
            serde_json::to_value(body).map_err(|e| DiscordError::Transport(e.to_string()))?;
        // An edit keeps what it does not name: the buttons go only when told to.
        body["components"] = serde_json::json!([]);
        self.bot(
            token,
            Method::PATCH,
            "PATCH /channels/{id}/messages/{id}",
            channel_id,
            path,
            Some(body),
        )
        .await
    }

    /// The application behind a bot token: its id (for commands) and its public key.
    pub async fn current_application(
        &self,
        token: &SecretString,
    ) -> Result<Application, DiscordError> {
        let path = "/applications/@me".to_owned();
        self.bot(token, Method::GET, "GET /applications/@me", "@me", path, None).await
    }

    /// Replaces every command the application has in the guild (`[]` removes them).
    pub async fn overwrite_guild_commands(
        &self,
        token: &SecretString,
        application_id: &str,
        guild_id: &str,
        commands: &serde_json::Value,
    ) -> Result<(), DiscordError> {
        let path = format!("/applications/{application_id}/guilds/{guild_id}/commands");
        let route = "PUT /applications/{id}/guilds/{id}/commands";
        let _: serde_json::Value =
            self.bot(token, Method::PUT, route, guild_id, path, Some(commands.clone())).await?;
        Ok(())
    }

    /// Finishes a deferred interaction: edits its original answer through the interaction's
    /// webhook (authenticated by the token in the path, valid 15 minutes).
    pub async fn edit_original(
        &self,
        application_id: &str,
        interaction_token: &str,
        body: &serde_json::Value,
    ) -> Result<(), DiscordError> {
        let url = format!(
            "{}/webhooks/{application_id}/{interaction_token}/messages/@original",
            self.api_base
        );
        for _ in 0..=RATE_LIMIT_RETRIES {
            let response = self.http.patch(&url).json(body).send().await.map_err(transport)?;
            let status = response.status();
            let bytes = response.bytes().await.map_err(transport)?;
            if status.is_success() {
                return Ok(());
            }
            if status == StatusCode::TOO_MANY_REQUESTS {
                let error: ErrorBody = serde_json::from_slice(&bytes).unwrap_or_default();
                let wait = error.retry_after.unwrap_or(1.0).clamp(0.0, 60.0);
                tokio::time::sleep(Duration::from_secs_f64(wait)).await;
                continue;
            }
            return Err(error_of(status, &bytes));
        }
        Err(DiscordError::RateLimited)
    }

    /// Exchanges an OAuth2 authorization code (form-encoded, client credentials in the form).
    pub async fn exchange_code(
        &self,
        client_id: &str,
        client_secret: &SecretString,
        code: &str,
        redirect_uri: &str,
    ) -> Result<TokenResponse, DiscordError> {
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", client_id),
            ("client_secret", client_secret.expose_secret()),
        ];
        let request = self.http.post(format!("{}/oauth2/token", self.api_base)).form(&form);
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(transport)?;
        if status.is_success() {
            serde_json::from_slice(&bytes)
                .map_err(|e| DiscordError::Transport(format!("unreadable answer: {e}")))
        } else {
            Err(error_of(status, &bytes))
        }
    }

    /// Sends a bot request through the limiter, waiting out 429s a few times.
    async fn bot<T: DeserializeOwned>(
        &self,
        token: &SecretString,
        method: Method,
        route: &'static str,
        major: &str,
        path: String,
        body: Option<serde_json::Value>,
    ) -> Result<T, DiscordError> {
        let slot =
            Slot { token: TokenKey::of(token.expose_secret()), route, major: major.to_owned() };
        let url = format!("{}{path}", self.api_base);
        for _ in 0..=RATE_LIMIT_RETRIES {
            self.limiter.acquire(&slot).await.map_err(|refused| match refused {
                Refused::Token => DiscordError::InvalidToken,
                Refused::Paused { .. } => DiscordError::Paused,
            })?;
            let mut request: RequestBuilder = self
                .http
                .request(method.clone(), &url)
                .header("authorization", format!("Bot {}", token.expose_secret()));
            if let Some(body) = &body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(transport)?;
            let status = response.status();
            let headers = response.headers().clone();
            let bytes = response.bytes().await.map_err(transport)?;
            let error: ErrorBody = if status.is_success() {
                ErrorBody::default()
            } else {
                serde_json::from_slice(&bytes).unwrap_or_default()
            };
            let observed = Observed {
                status: status.as_u16(),
                retry_after: error.retry_after,
                global: error.global,
            };
            self.limiter.observe(&slot, &headers, observed);
            if status == StatusCode::TOO_MANY_REQUESTS {
                self.rate_limited.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(route, major, retry_after = ?error.retry_after, "Discord rate limited a request");
                continue;
            }
            if status.is_success() {
                return serde_json::from_slice(&bytes)
                    .map_err(|e| DiscordError::Transport(format!("unreadable answer: {e}")));
            }
            return Err(error_of(status, &bytes));
        }
        Err(DiscordError::RateLimited)
    }
}

fn error_of(status: StatusCode, bytes: &[u8]) -> DiscordError {
    let body: ErrorBody = serde_json::from_slice(bytes).unwrap_or_default();
    match status.as_u16() {
        401 => DiscordError::InvalidToken,
        429 => DiscordError::RateLimited,
        s if s >= 500 => DiscordError::Unavailable { status: s },
        s => DiscordError::Rejected { status: s, code: body.code, message: body.message },
    }
}

fn transport(error: reqwest::Error) -> DiscordError {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    DiscordError::Transport(format!("{kind}: {error}"))
}
