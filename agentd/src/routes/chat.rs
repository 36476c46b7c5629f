//! `/api/chat/*`: Discord connections, channel mappings and sending.

use axum::Json as Reply;
use axum::extract::State;

use agentcore::api::{
    CallbackRequest, ChannelList, ConnectRequest, ConnectionList, ConnectionTest, Disconnected,
    MapRequest, Mapped, MappingList, SendRequest, Unmapped,
};
use agentcore::domain::agent::AgentId;
use agentcore::domain::chat::GuildId;
use agentcore::{Connected, Error, OauthUrl, Resource, Sent};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Path};

/// A guild id from the path; one that cannot exist is simply not connected.
fn guild_id(raw: &str) -> Result<GuildId, ApiError> {
    GuildId::parse(raw).map_err(|_| Error::not_found(Resource::Connection, raw).into())
}

pub async fn oauth_url(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<OauthUrl>, ApiError> {
    Ok(Reply(state.core.oauth_url(&who).await?))
}

pub async fn callback(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<CallbackRequest>,
) -> Result<Reply<Connected>, ApiError> {
    let (code, oauth_state) = request.parse()?;
    Ok(Reply(state.core.oauth_callback(&who, &code, oauth_state.as_deref()).await?))
}

pub async fn connect(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<ConnectRequest>,
) -> Result<Reply<Connected>, ApiError> {
    let (guild, token, name) = request.parse()?;
    Ok(Reply(state.core.connect(&who, &guild, &token, name).await?))
}

pub async fn connections(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<ConnectionList>, ApiError> {
    Ok(Reply(ConnectionList { connections: state.core.connections(&who).await? }))
}

pub async fn test(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
) -> Result<Reply<ConnectionTest>, ApiError> {
    let guild_name = state.core.test_connection(&who, &guild_id(&guild)?).await?;
    Ok(Reply(ConnectionTest { status: "ok".into(), guild_name }))
}

pub async fn disconnect(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
) -> Result<Reply<Disconnected>, ApiError> {
    let guild = guild_id(&guild)?;
    state.core.disconnect(&who, &guild).await?;
    Ok(Reply(Disconnected { status: "disconnected".into(), guild_id: guild.into_inner() }))
}

pub async fn channels(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
) -> Result<Reply<ChannelList>, ApiError> {
    Ok(Reply(ChannelList { channels: state.core.channels(&who, &guild_id(&guild)?).await? }))
}

pub async fn map(
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

pub async fn mappings(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<MappingList>, ApiError> {
    Ok(Reply(MappingList { mappings: state.core.mappings(&who).await? }))
}

pub async fn unmap(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(agent): Path<String>,
) -> Result<Reply<Unmapped>, ApiError> {
    let agent = AgentId::parse(&agent).map_err(|_| Error::not_found(Resource::Mapping, &agent))?;
    state.core.unmap_agent(&who, &agent).await?;
    Ok(Reply(Unmapped { status: "unmapped".into(), agent_id: agent.to_string() }))
}

pub async fn send(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(guild): Path<String>,
    Json(request): Json<SendRequest>,
) -> Result<Reply<Sent>, ApiError> {
    let guild = guild_id(&guild)?;
    let (agent, message) = request.parse()?;
    Ok(Reply(state.core.send(&who, &guild, &agent, &message).await?))
}
