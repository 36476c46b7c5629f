//! `/api/chat/*`: Discord connections, channel mappings and sending.

use axum::Json as Reply;
use axum::extract::State;

use agentcore::api::{
    CallbackRequest, ChannelList, ConnectRequest, ConnectionList, ConnectionTest, Disconnected,
    MapRequest, Mapped, MappingList, RolesRequest, SendRequest, Unmapped,
};
use agentcore::domain::agent::AgentId;
use agentcore::domain::chat::Connection;
use agentcore::{Connected, Error, OauthUrl, Resource, Sent};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Path, guild_id};

#[utoipa::path(get, path = "/api/chat/oauth-url", operation_id = "oauth_url", tag = "chat", security(("bearer" = [])),
    responses((status = 200, description = "Where to install the service's bot, with the state to send back.", body = OauthUrl)))]
pub(super) async fn oauth_url(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<OauthUrl>, ApiError> {
    Ok(Reply(state.core.oauth_url(&who).await?))
}

#[utoipa::path(post, path = "/api/chat/callback", operation_id = "oauth_callback", tag = "chat", security(("bearer" = [])),
    request_body = CallbackRequest,
    responses((status = 200, description = "The guild is connected.", body = Connected)))]
pub(super) async fn callback(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<CallbackRequest>,
) -> Result<Reply<Connected>, ApiError> {
    let (code, oauth_state) = request.parse()?;
    Ok(Reply(state.core.oauth_callback(&who, &code, oauth_state.as_deref()).await?))
}

#[utoipa::path(post, path = "/api/chat/connect", operation_id = "connect_guild", tag = "chat", security(("bearer" = [])),
    request_body = ConnectRequest,
    responses((status = 200, description = "The guild is connected through the user's own bot.", body = Connected)))]
pub(super) async fn connect(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<ConnectRequest>,
) -> Result<Reply<Connected>, ApiError> {
    Ok(Reply(state.core.connect(&who, &request.parse()?).await?))
}

#[utoipa::path(get, path = "/api/chat/connections", operation_id = "list_connections", tag = "chat", security(("bearer" = [])),
    responses((status = 200, description = "The caller's connected guilds.", body = ConnectionList)))]
pub(super) async fn connections(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<ConnectionList>, ApiError> {
    Ok(Reply(ConnectionList { connections: state.core.connections(&who).await? }))
}

#[utoipa::path(post, path = "/api/chat/test/{guild_id}", operation_id = "test_connection", tag = "chat", security(("bearer" = [])),
    params(("guild_id" = String, Path, example = "4242", description = "The Discord guild (server) id.")),
    responses((status = 200, description = "Discord answered for the guild.", body = ConnectionTest)))]
pub(super) async fn test(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
) -> Result<Reply<ConnectionTest>, ApiError> {
    let guild_name = state.core.test_connection(&who, &guild_id(&guild)?).await?;
    Ok(Reply(ConnectionTest { status: "ok".into(), guild_name }))
}

#[utoipa::path(delete, path = "/api/chat/connections/{guild_id}", operation_id = "disconnect_guild", tag = "chat", security(("bearer" = [])),
    params(("guild_id" = String, Path, example = "4242", description = "The Discord guild (server) id.")),
    responses((status = 200, description = "The guild and its mappings are gone.", body = Disconnected)))]
pub(super) async fn disconnect(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
) -> Result<Reply<Disconnected>, ApiError> {
    let guild = guild_id(&guild)?;
    state.core.disconnect(&who, &guild).await?;
    Ok(Reply(Disconnected { status: "disconnected".into(), guild_id: guild.into_inner() }))
}

#[utoipa::path(get, path = "/api/chat/connections/{guild_id}/channels", operation_id = "list_channels", tag = "chat", security(("bearer" = [])),
    params(("guild_id" = String, Path, example = "4242", description = "The Discord guild (server) id.")),
    responses((status = 200, description = "The guild's text channels, fetched from Discord.", body = ChannelList)))]
pub(super) async fn channels(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
) -> Result<Reply<ChannelList>, ApiError> {
    Ok(Reply(ChannelList { channels: state.core.channels(&who, &guild_id(&guild)?).await? }))
}

#[utoipa::path(post, path = "/api/chat/mappings/{id}", operation_id = "map_agent", tag = "chat", security(("bearer" = [])),
    params(("id" = String, Path, example = "4242", description = "The guild id the channel belongs to.")),
    request_body = MapRequest,
    responses((status = 200, description = "The agent posts to the channel.", body = Mapped)))]
pub(super) async fn map(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
    Json(request): Json<MapRequest>,
) -> Result<Reply<Mapped>, ApiError> {
    let guild = guild_id(&guild)?;
    let (agent, channel) = request.parse()?;
    let mapping = state.core.map_agent(&who, &guild, &agent, &channel).await?;
    Ok(Reply(Mapped { status: "mapped".into(), mapping }))
}

#[utoipa::path(get, path = "/api/chat/mappings", operation_id = "list_mappings", tag = "chat", security(("bearer" = [])),
    responses((status = 200, description = "Where each of the caller's agents posts.", body = MappingList)))]
pub(super) async fn mappings(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<MappingList>, ApiError> {
    Ok(Reply(MappingList { mappings: state.core.mappings(&who).await? }))
}

#[utoipa::path(delete, path = "/api/chat/mappings/{id}", operation_id = "unmap_agent", tag = "chat", security(("bearer" = [])),
    params(("id" = String, Path, example = "alpha", description = "The agent id whose mapping goes.")),
    responses((status = 200, description = "The agent posts nowhere.", body = Unmapped)))]
pub(super) async fn unmap(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
) -> Result<Reply<Unmapped>, ApiError> {
    let agent = AgentId::parse(&agent).map_err(|_| Error::not_found(Resource::Mapping, &agent))?;
    state.core.unmap_agent(&who, &agent).await?;
    Ok(Reply(Unmapped { status: "unmapped".into(), agent_id: agent.to_string() }))
}

#[utoipa::path(post, path = "/api/chat/send/{guild_id}", operation_id = "send_message", tag = "chat", security(("bearer" = [])),
    params(("guild_id" = String, Path, example = "4242", description = "The Discord guild (server) id.")), request_body = SendRequest,
    responses((status = 200, description = "Discord accepted the message.", body = Sent)))]
pub(super) async fn send(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
    Json(request): Json<SendRequest>,
) -> Result<Reply<Sent>, ApiError> {
    let guild = guild_id(&guild)?;
    let (agent, message) = request.parse()?;
    Ok(Reply(state.core.send(&who, &guild, &agent, &message).await?))
}

#[utoipa::path(put, path = "/api/chat/connections/{guild_id}/roles", operation_id = "set_allowed_roles", tag = "chat", security(("bearer" = [])),
    params(("guild_id" = String, Path, example = "4242", description = "The Discord guild (server) id.")), request_body = RolesRequest,
    responses((status = 200, description = "The connection, with the roles whose members may run commands that change something.", body = Connection)))]
pub(super) async fn roles(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
    Json(request): Json<RolesRequest>,
) -> Result<Reply<Connection>, ApiError> {
    let guild = guild_id(&guild)?;
    Ok(Reply(state.core.set_allowed_roles(&who, &guild, &request.parse()?).await?))
}
