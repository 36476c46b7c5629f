//! Discord's rows: connections, mappings, and the outbox's posts and lanes.

use chrono::{DateTime, Utc};

use super::corrupt;
use crate::domain::agent::AgentId;
use crate::domain::chat::{Connection, ConnectionKind, Mapping, OutboxLane, OutboxPost};
use crate::domain::message::MessageBody;
use crate::error::{Error, Result};
use crate::store::ConnectionRecord;

#[derive(Debug, sqlx::FromRow)]
pub(in crate::store) struct ConnectionRow {
    owner_id: String,
    id: String,
    guild_id: String,
    guild_name: String,
    kind: String,
    bot_token: Option<String>,
    channel_count: i64,
    connected_at: DateTime<Utc>,
    application_id: Option<String>,
    public_key: Option<String>,
    allowed_role_ids: String,
}

impl TryFrom<ConnectionRow> for ConnectionRecord {
    type Error = Error;

    fn try_from(row: ConnectionRow) -> Result<Self> {
        let kind = match row.kind.as_str() {
            "bot_token" => ConnectionKind::BotToken,
            "oauth" => ConnectionKind::Oauth,
            other => return Err(corrupt("chat_connections.kind")(other.to_owned())),
        };
        Ok(ConnectionRecord {
            connection: Connection {
                id: row.id,
                guild_id: row.guild_id,
                guild_name: row.guild_name,
                kind,
                connected_at: row.connected_at,
                channel_count: row.channel_count,
                application_id: row.application_id,
                public_key: row.public_key,
                allowed_role_ids: crate::domain::chat::AllowedRoles::from_json(
                    &row.allowed_role_ids,
                )
                .ids()
                .to_vec(),
            },
            sealed_token: row.bot_token,
            owner_id: row.owner_id,
        })
    }
}

impl TryFrom<ConnectionRow> for Connection {
    type Error = Error;

    fn try_from(row: ConnectionRow) -> Result<Self> {
        ConnectionRecord::try_from(row).map(|record| record.connection)
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(in crate::store) struct MappingRow {
    id: String,
    agent_id: String,
    guild_id: String,
    channel_id: String,
    channel_name: String,
    created_at: DateTime<Utc>,
}

impl TryFrom<MappingRow> for Mapping {
    type Error = Error;

    fn try_from(row: MappingRow) -> Result<Self> {
        Ok(Mapping {
            id: row.id,
            agent_id: AgentId::parse(&row.agent_id).map_err(corrupt("chat_mappings.agent_id"))?,
            guild_id: row.guild_id,
            channel_id: row.channel_id,
            channel_name: row.channel_name,
            created_at: row.created_at,
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(in crate::store) struct OutboxRow {
    id: i64,
    owner_id: String,
    agent_id: String,
    guild_id: String,
    channel_id: String,
    nonce: String,
    payload: String,
    attempts: i32,
}

impl TryFrom<OutboxRow> for OutboxPost {
    type Error = Error;

    fn try_from(row: OutboxRow) -> Result<Self> {
        Ok(OutboxPost {
            id: row.id,
            owner_id: row.owner_id,
            agent_id: AgentId::parse(&row.agent_id).map_err(corrupt("outbox.agent_id"))?,
            guild_id: row.guild_id,
            channel_id: row.channel_id,
            nonce: row.nonce,
            body: post_body(&row.payload)?,
            attempts: row.attempts,
        })
    }
}

/// A queued post's body as stored (`outbox.payload`).
pub(in crate::store) fn post_body(payload: &str) -> Result<MessageBody> {
    serde_json::from_str(payload).map_err(|e| corrupt("outbox.payload")(e.to_string()))
}

/// A user's queue of posts to one channel.
#[derive(sqlx::FromRow)]
pub(in crate::store) struct OutboxLaneRow {
    owner_id: String,
    channel_id: String,
}

impl From<OutboxLaneRow> for OutboxLane {
    fn from(row: OutboxLaneRow) -> Self {
        OutboxLane { owner_id: row.owner_id, channel_id: row.channel_id }
    }
}
