//! Discord: the owner's connections to servers (guilds) and the agent-to-channel mappings.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::agent::AgentId;
use crate::domain::chat::{AllowedRoles, Connection, Mapping};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};
use crate::store::db::{SqlStore, query, query_as};
use crate::store::rows::{self, ConnectionRow, MappingRow};
use crate::store::shared::{lock_agent, watched};

/// Connections and mappings, each scoped to its owner.
#[async_trait]
pub trait ChatStore: Send + Sync {
    /// Stores a connection, replacing the credentials of an earlier one to the same guild.
    async fn upsert_connection(
        &self,
        owner: &WorkspaceId,
        record: &ConnectionRecord,
    ) -> Result<Connection>;
    async fn connections(&self, owner: &WorkspaceId) -> Result<Vec<Connection>>;
    /// Fails with `connection_not_found`.
    async fn connection(&self, owner: &WorkspaceId, guild_id: &str) -> Result<ConnectionRecord>;
    async fn set_channel_count(
        &self,
        owner: &WorkspaceId,
        guild_id: &str,
        count: i64,
    ) -> Result<()>;
    /// Removes the connection with its mappings and pending posts.
    async fn delete_connection(&self, owner: &WorkspaceId, guild_id: &str) -> Result<()>;
    /// Maps the agent, replacing its earlier mapping.
    async fn upsert_mapping(&self, owner: &WorkspaceId, mapping: &Mapping) -> Result<Mapping>;
    async fn mappings(&self, owner: &WorkspaceId) -> Result<Vec<Mapping>>;
    /// Fails with `mapping_not_found`.
    async fn delete_mapping(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<()>;
    /// Replaces the roles allowed to run commands that change something.
    async fn set_allowed_roles(
        &self,
        owner: &WorkspaceId,
        guild_id: &str,
        roles: &AllowedRoles,
    ) -> Result<Connection>;
    /// The connection an interaction came through: by its id (a user's own bot's endpoint),
    /// whoever owns it.
    async fn connection_by_id(&self, id: &str) -> Result<Option<ConnectionRecord>>;
    /// The oldest connection of `guild_id` through the service's bot (its shared endpoint).
    async fn service_connection(&self, guild_id: &str) -> Result<Option<ConnectionRecord>>;
    /// Spends the OAuth state `id` (valid until `expires_at`): true the first time, false
    /// ever after. Spent states past their expiry are forgotten here too: they no longer
    /// verify, so they need no record.
    async fn spend_oauth_state(&self, id: &str, expires_at: DateTime<Utc>) -> Result<bool>;
}

/// A connection row with its sealed bot token (`None` for OAuth connections).
#[derive(Debug, Clone)]
pub struct ConnectionRecord {
    pub connection: Connection,
    pub sealed_token: Option<String>,
    pub owner_id: String,
}

#[async_trait::async_trait]
impl<S: SqlStore> ChatStore for S {
    async fn upsert_connection(
        &self,
        owner: &WorkspaceId,
        record: &ConnectionRecord,
    ) -> Result<Connection> {
        watched(self.storage_health(), async {
            let c = &record.connection;
            let row: ConnectionRow = query_as(sql::UPSERT_CONNECTION)
                .bind(owner.as_str())
                .bind(&c.guild_id)
                .bind(&c.id)
                .bind(&c.guild_name)
                .bind(c.kind.as_str())
                .bind(&record.sealed_token)
                .bind(c.channel_count)
                .bind(c.connected_at)
                .bind(&c.application_id)
                .bind(&c.public_key)
                .fetch_one(self.writer())
                .await?;
            row.try_into()
        })
        .await
    }

    async fn connections(&self, owner: &WorkspaceId) -> Result<Vec<Connection>> {
        let rows: Vec<ConnectionRow> = query_as(&sql::select_connections())
            .bind(owner.as_str())
            .fetch_all(&mut self.read().await?)
            .await?;
        rows::convert(rows)
    }

    async fn connection(&self, owner: &WorkspaceId, guild_id: &str) -> Result<ConnectionRecord> {
        let row: Option<ConnectionRow> = query_as(&sql::select_connection())
            .bind(owner.as_str())
            .bind(guild_id)
            .fetch_optional(&mut self.read().await?)
            .await?;
        row.ok_or_else(|| Error::not_found(Resource::Connection, guild_id))?.try_into()
    }

    async fn set_channel_count(
        &self,
        owner: &WorkspaceId,
        guild_id: &str,
        count: i64,
    ) -> Result<()> {
        watched(self.storage_health(), async {
            query(sql::UPDATE_CHANNEL_COUNT)
                .bind(owner.as_str())
                .bind(guild_id)
                .bind(count)
                .execute(self.writer())
                .await?;
            Ok(())
        })
        .await
    }

    async fn delete_connection(&self, owner: &WorkspaceId, guild_id: &str) -> Result<()> {
        watched(self.storage_health(), async {
            let done = query(sql::DELETE_CONNECTION)
                .bind(owner.as_str())
                .bind(guild_id)
                .execute(self.writer())
                .await?;
            if done.rows_affected() == 0 {
                return Err(Error::not_found(Resource::Connection, guild_id));
            }
            Ok(())
        })
        .await
    }

    async fn upsert_mapping(&self, owner: &WorkspaceId, mapping: &Mapping) -> Result<Mapping> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_agent(&mut tx, owner, &mapping.agent_id).await?;
            let row: MappingRow = query_as(sql::UPSERT_MAPPING)
                .bind(owner.as_str())
                .bind(mapping.agent_id.as_str())
                .bind(&mapping.id)
                .bind(&mapping.guild_id)
                .bind(&mapping.channel_id)
                .bind(&mapping.channel_name)
                .bind(mapping.created_at)
                .fetch_one(&mut tx)
                .await?;
            tx.commit().await?;
            row.try_into()
        })
        .await
    }

    async fn mappings(&self, owner: &WorkspaceId) -> Result<Vec<Mapping>> {
        let rows: Vec<MappingRow> = query_as(sql::SELECT_MAPPINGS)
            .bind(owner.as_str())
            .fetch_all(&mut self.read().await?)
            .await?;
        rows::convert(rows)
    }

    async fn delete_mapping(&self, owner: &WorkspaceId, agent: &AgentId) -> Result<()> {
        watched(self.storage_health(), async {
            let done = query(sql::DELETE_MAPPING)
                .bind(owner.as_str())
                .bind(agent.as_str())
                .execute(self.writer())
                .await?;
            if done.rows_affected() == 0 {
                return Err(Error::not_found(Resource::Mapping, agent.as_str()));
            }
            Ok(())
        })
        .await
    }

    async fn set_allowed_roles(
        &self,
        owner: &WorkspaceId,
        guild_id: &str,
        roles: &AllowedRoles,
    ) -> Result<Connection> {
        watched(self.storage_health(), async {
            let row: Option<ConnectionRow> = query_as(sql::SET_ALLOWED_ROLES)
                .bind(owner.as_str())
                .bind(guild_id)
                .bind(roles.to_json())
                .fetch_optional(self.writer())
                .await?;
            row.ok_or_else(|| Error::not_found(Resource::Connection, guild_id))?.try_into()
        })
        .await
    }

    async fn connection_by_id(&self, id: &str) -> Result<Option<ConnectionRecord>> {
        let row: Option<ConnectionRow> = query_as(sql::SELECT_CONNECTION_BY_ID)
            .bind(id)
            .fetch_optional(&mut self.read().await?)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn service_connection(&self, guild_id: &str) -> Result<Option<ConnectionRecord>> {
        let row: Option<ConnectionRow> = query_as(sql::SELECT_SERVICE_CONNECTION)
            .bind(guild_id)
            .fetch_optional(&mut self.read().await?)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn spend_oauth_state(
        &self,
        id: &str,
        expires_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool> {
        watched(self.storage_health(), async {
            let now = crate::domain::now();
            let mut tx = self.begin_write().await?;
            query(sql::FORGET_EXPIRED_STATES).bind(now).execute(&mut tx).await?;
            let spent = query(sql::SPEND_STATE)
                .bind(id)
                .bind(expires_at)
                .execute(&mut tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            Ok(spent == 1)
        })
        .await
    }
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    /// A connection's columns, in the order `rows::ConnectionRow` reads them.
    macro_rules! columns {
        () => {
            "owner_id, id, guild_id, guild_name, kind, bot_token, channel_count, connected_at, \
             application_id, public_key, allowed_role_ids"
        };
    }
    pub(crate) const UPSERT_CONNECTION: &str = concat!(
        "INSERT INTO chat_connections \
        (owner_id, guild_id, id, guild_name, kind, bot_token, channel_count, connected_at, \
        application_id, public_key) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
        ON CONFLICT (owner_id, guild_id) DO UPDATE SET guild_name = excluded.guild_name, \
        kind = excluded.kind, bot_token = excluded.bot_token, \
        channel_count = excluded.channel_count, connected_at = excluded.connected_at, \
        application_id = excluded.application_id, public_key = excluded.public_key \
        RETURNING ",
        columns!()
    );
    pub(crate) const CONNECTION_COLUMNS: &str =
        concat!("SELECT ", columns!(), " FROM chat_connections WHERE owner_id = $1");
    pub(crate) const SET_ALLOWED_ROLES: &str = concat!(
        "UPDATE chat_connections SET allowed_role_ids = $3 \
        WHERE owner_id = $1 AND guild_id = $2 RETURNING ",
        columns!()
    );
    pub(crate) const SELECT_CONNECTION_BY_ID: &str =
        concat!("SELECT ", columns!(), " FROM chat_connections WHERE id = $1");
    pub(crate) const SELECT_SERVICE_CONNECTION: &str = concat!(
        "SELECT ",
        columns!(),
        " FROM chat_connections WHERE guild_id = $1 AND kind = 'oauth' \
        ORDER BY connected_at, owner_id LIMIT 1"
    );
    pub(crate) fn select_connections() -> String {
        format!("{CONNECTION_COLUMNS} ORDER BY connected_at, guild_id")
    }
    pub(crate) fn select_connection() -> String {
        format!("{CONNECTION_COLUMNS} AND guild_id = $2")
    }
    pub(crate) const UPDATE_CHANNEL_COUNT: &str =
        "UPDATE chat_connections SET channel_count = $3 WHERE owner_id = $1 AND guild_id = $2";
    pub(crate) const DELETE_CONNECTION: &str =
        "DELETE FROM chat_connections WHERE owner_id = $1 AND guild_id = $2";
    pub(crate) const UPSERT_MAPPING: &str = "INSERT INTO chat_mappings \
        (owner_id, agent_id, id, guild_id, channel_id, channel_name, created_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7) \
        ON CONFLICT (owner_id, agent_id) DO UPDATE SET id = excluded.id, \
        guild_id = excluded.guild_id, channel_id = excluded.channel_id, \
        channel_name = excluded.channel_name, created_at = excluded.created_at \
        RETURNING id, agent_id, guild_id, channel_id, channel_name, created_at";
    pub(crate) const SELECT_MAPPINGS: &str = "SELECT id, agent_id, guild_id, channel_id, channel_name, \
        created_at FROM chat_mappings WHERE owner_id = $1 ORDER BY created_at, agent_id";
    pub(crate) const DELETE_MAPPING: &str =
        "DELETE FROM chat_mappings WHERE owner_id = $1 AND agent_id = $2";
    pub(crate) const FORGET_EXPIRED_STATES: &str =
        "DELETE FROM oauth_states_spent WHERE expires_at < $1";
    pub(crate) const SPEND_STATE: &str = "INSERT INTO oauth_states_spent (id, expires_at) \
        VALUES ($1, $2) ON CONFLICT (id) DO NOTHING";
}
