//! Discord: connections (with a bot token, or the OAuth install and its return), a guild's
//! channels and the agent-to-channel mappings, the connection test, and disconnecting.

use axum::extract::{Path, Query, State};
use minijinja::{Value, context};
use serde::Deserialize;

use agentcore::api::{CallbackRequest, ConnectRequest, MapRequest};
use agentcore::domain::agent::AgentFilter;
use agentcore::domain::chat::GuildId;
use agentcore::{Error, Principal, Resource};

use crate::AppState;
use crate::error::ApiError;
use crate::ui::form::Fields;
use crate::ui::render::FormErrors;
use crate::ui::session::{Csrf, Viewer};

use super::{Shown, done, fail, refused, see, signed_in};

fn guild_id(raw: &str) -> Result<GuildId, super::Failed> {
    crate::extract::guild_id(raw).map_err(fail)
}

/// `GET /discord`: connections, mappings, and the ways to connect.
pub(crate) async fn page(State(state): State<AppState>, Viewer(who): Viewer, csrf: Csrf) -> Shown {
    discord_page(&state, &who, &csrf, Value::UNDEFINED, None).await
}

async fn discord_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    form: Value,
    notice: Option<String>,
) -> Shown {
    let connections = state.core.connections(who).await.map_err(fail)?;
    let mappings = state.core.mappings(who).await.map_err(fail)?;
    // The install link exists only where the operator configured the service's own bot.
    let install = state.core.oauth_url(who).await.ok().map(|url| url.url);
    signed_in(
        state,
        who,
        "discord.html",
        context! { csrf => csrf.0, nav => "discord", connections, mappings, install, form, notice },
    )
    .await
}

/// `POST /discord/connect`: a guild through the user's own bot token.
pub(crate) async fn connect(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    fields: Fields,
) -> Shown {
    let request = ConnectRequest {
        bot_token: fields.get("bot_token"),
        guild_id: fields.get("guild_id"),
        guild_name: fields.text("guild_name"),
        public_key: fields.text("public_key"),
    };
    let result = async { Ok::<_, ApiError>(state.core.connect(&who, &request.parse()?).await?) };
    match result.await {
        Ok(connected) => {
            let message = format!("{} is connected.", connected.guild_name);
            done(&format!("/discord/{}", connected.guild_id), message)
        }
        Err(error) => {
            let mut values = fields.values();
            values.remove("bot_token");
            let form = context! { values, errors => FormErrors::of(&error) };
            refused(discord_page(&state, &who, &csrf, form, None).await?, &error)
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct Install {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// `GET /discord/callback`: where Discord sends the browser back after the OAuth install
/// (`discord.redirect_uri` points here). The signed `state` ties it to the signed-in user.
pub(crate) async fn callback(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Query(install): Query<Install>,
) -> Shown {
    if let Some(error) = install.error {
        let notice = format!("Discord did not install the bot: {error}.");
        return discord_page(&state, &who, &csrf, Value::UNDEFINED, Some(notice)).await;
    }
    let request = CallbackRequest { code: install.code, guild_id: None, state: install.state };
    let result = async {
        let (code, oauth_state) = request.parse()?;
        Ok::<_, ApiError>(state.core.oauth_callback(&who, &code, oauth_state.as_deref()).await?)
    };
    match result.await {
        Ok(connected) => see(&format!("/discord/{}", connected.guild_id)),
        Err(error) => {
            let notice = FormErrors::of(&error).message;
            discord_page(&state, &who, &csrf, Value::UNDEFINED, notice).await
        }
    }
}

/// `GET /discord/{guild_id}`: the guild's channels, and a form mapping an agent to one.
pub(crate) async fn guild(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(guild): Path<String>,
) -> Shown {
    guild_page(&state, &who, &csrf, &guild_id(&guild)?, Value::UNDEFINED, None).await
}

async fn guild_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    guild: &GuildId,
    form: Value,
    notice: Option<String>,
) -> Shown {
    let connection = state
        .core
        .connections(who)
        .await
        .map_err(fail)?
        .into_iter()
        .find(|c| c.guild_id == guild.as_str())
        .ok_or_else(|| fail(Error::not_found(Resource::Connection, guild.as_str())))?;
    let channels = state.core.channels(who, guild).await.map_err(fail)?;
    let agents = state.core.list_agents(who, &AgentFilter::default()).await.map_err(fail)?;
    let mappings: Vec<_> = state
        .core
        .mappings(who)
        .await
        .map_err(fail)?
        .into_iter()
        .filter(|m| m.guild_id == guild.as_str())
        .collect();
    signed_in(
        state,
        who,
        "guild.html",
        context! { csrf => csrf.0, nav => "discord", connection, channels, agents, mappings, form, notice },
    )
    .await
}

/// `POST /discord/{guild_id}/{command}`: map an agent to a channel, test the connection, or
/// disconnect.
pub(crate) async fn command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((guild, command)): Path<(String, String)>,
    fields: Fields,
) -> Shown {
    let guild = guild_id(&guild)?;
    match command.as_str() {
        "map" => {
            let request = MapRequest {
                agent_id: fields.get("agent_id"),
                channel_id: fields.get("channel_id"),
                channel_name: None,
            };
            let result = async {
                let (agent, channel) = request.parse()?;
                Ok::<_, ApiError>(state.core.map_agent(&who, &guild, &agent, &channel).await?)
            };
            match result.await {
                Ok(mapped) => {
                    let message =
                        format!("{} posts to #{} now.", mapped.agent_id, mapped.channel_name);
                    done(&format!("/discord/{guild}"), message)
                }
                Err(error) => {
                    let form =
                        context! { values => fields.values(), errors => FormErrors::of(&error) };
                    refused(guild_page(&state, &who, &csrf, &guild, form, None).await?, &error)
                }
            }
        }
        "test" => {
            let notice = match state.core.test_connection(&who, &guild).await {
                Ok(name) => format!("The bot can reach {name}."),
                Err(error) => FormErrors::of(&error.into()).message.unwrap_or_default(),
            };
            guild_page(&state, &who, &csrf, &guild, Value::UNDEFINED, Some(notice)).await
        }
        "disconnect" => {
            state.core.disconnect(&who, &guild).await.map_err(fail)?;
            done("/discord", format!("The server {guild} was disconnected."))
        }
        _ => Err(fail(ApiError::RouteNotFound)),
    }
}

/// `POST /discord/unmap`: an agent no longer posts to its channel.
pub(crate) async fn unmap(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    fields: Fields,
) -> Shown {
    let agent = super::agent_id(&fields.get("agent_id").unwrap_or_default())?;
    state.core.unmap_agent(&who, &agent).await.map_err(fail)?;
    done(&discord_back(fields.text("back")), format!("{agent} no longer posts to Discord."))
}

/// Where an unmap goes back to: the Discord page or one server's page (a snowflake id), and
/// nothing else a form or a link could name.
pub(super) fn discord_back(back: Option<String>) -> String {
    back.filter(|b| match b.strip_prefix("/discord") {
        Some("") => true,
        Some(rest) => rest.strip_prefix('/').is_some_and(|id| {
            (1..=20).contains(&id.len()) && id.bytes().all(|c| c.is_ascii_digit())
        }),
        None => false,
    })
    .unwrap_or_else(|| "/discord".into())
}

#[cfg(test)]
mod tests {
    use super::discord_back;

    #[test]
    fn an_unmap_goes_back_only_to_a_discord_page() {
        let back = |raw: &str| discord_back(Some(raw.to_owned()));
        assert_eq!(back("/discord"), "/discord");
        assert_eq!(back("/discord/1234567890"), "/discord/1234567890");
        for elsewhere in
            ["/discordx", "/discord%0A", "/discord/12/unmap", "//evil.example", "/discord/"]
        {
            assert_eq!(back(elsewhere), "/discord", "{elsewhere}");
        }
        assert_eq!(discord_back(None), "/discord");
    }
}
