//! MCP servers users add: their URL and sealed bearer token, scoped to their owner. The
//! operator's servers live in the configuration, not here.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::db::{SqlStore, query, query_as};
use super::db_error;
use super::shared::watched;
use crate::domain::mcp::{McpServer, McpServerName};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Conflict, Error, Resource, Result};

/// Users' MCP servers, each scoped to its owner.
#[async_trait]
pub trait McpStore: Send + Sync {
    /// Fails with `mcp_server_exists` when the owner has a server of that name.
    async fn insert_mcp_server(&self, owner: &WorkspaceId, record: &McpServerRecord) -> Result<()>;
    /// The owner's servers by name.
    async fn mcp_servers(&self, owner: &WorkspaceId) -> Result<Vec<McpServerRecord>>;
    /// Fails with `mcp_server_not_found`.
    async fn mcp_server(
        &self,
        owner: &WorkspaceId,
        name: &McpServerName,
    ) -> Result<McpServerRecord>;
    /// Fails with `mcp_server_not_found`. Agents naming it keep the name; their runs say
    /// the server is gone.
    async fn delete_mcp_server(&self, owner: &WorkspaceId, name: &McpServerName) -> Result<()>;
}

/// A server row with its sealed token.
#[derive(Debug, Clone)]
pub struct McpServerRecord {
    pub name: McpServerName,
    pub url: String,
    pub sealed_token: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl McpServerRecord {
    /// As the API shows it: never the token.
    pub fn public(&self) -> McpServer {
        McpServer {
            name: self.name.clone(),
            url: self.url.clone(),
            has_token: self.sealed_token.is_some(),
            created_at: self.created_at,
        }
    }
}

/// A stored row; its name is checked again when it is read.
#[derive(sqlx::FromRow)]
pub(super) struct McpServerRow {
    name: String,
    url: String,
    token: Option<String>,
    created_at: DateTime<Utc>,
}

impl TryFrom<McpServerRow> for McpServerRecord {
    type Error = crate::error::Error;

    fn try_from(row: McpServerRow) -> Result<Self> {
        Ok(McpServerRecord {
            name: McpServerName::parse(&row.name).map_err(crate::error::Error::internal)?,
            url: row.url,
            sealed_token: row.token,
            created_at: row.created_at,
        })
    }
}

#[async_trait::async_trait]
impl<S: SqlStore> McpStore for S {
    async fn insert_mcp_server(&self, owner: &WorkspaceId, record: &McpServerRecord) -> Result<()> {
        watched(self.storage_health(), async {
            query(sql::INSERT)
                .bind(owner.as_str())
                .bind(record.name.as_str())
                .bind(&record.url)
                .bind(&record.sealed_token)
                .bind(record.created_at)
                .execute(self.writer())
                .await
                .map_err(|e| {
                    let message =
                        format!("You already have an MCP server called '{}'.", record.name);
                    db_error(e, Some(Error::conflict(Conflict::McpServerExists, message)))
                })?;
            Ok(())
        })
        .await
    }

    async fn mcp_servers(&self, owner: &WorkspaceId) -> Result<Vec<McpServerRecord>> {
        let rows: Vec<McpServerRow> = query_as(sql::SELECT_ALL)
            .bind(owner.as_str())
            .fetch_all(&mut self.read().await?)
            .await?;
        rows.into_iter().map(McpServerRecord::try_from).collect()
    }

    async fn mcp_server(
        &self,
        owner: &WorkspaceId,
        name: &McpServerName,
    ) -> Result<McpServerRecord> {
        let row: Option<McpServerRow> = query_as(sql::SELECT_ONE)
            .bind(owner.as_str())
            .bind(name.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        row.ok_or_else(|| Error::not_found(Resource::McpServer, name.as_str()))?.try_into()
    }

    async fn delete_mcp_server(&self, owner: &WorkspaceId, name: &McpServerName) -> Result<()> {
        watched(self.storage_health(), async {
            let done = query(sql::DELETE)
                .bind(owner.as_str())
                .bind(name.as_str())
                .execute(self.writer())
                .await?;
            if done.rows_affected() == 0 {
                return Err(Error::not_found(Resource::McpServer, name.as_str()));
            }
            Ok(())
        })
        .await
    }
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) const INSERT: &str = "INSERT INTO mcp_servers (owner_id, name, url, token, \
        created_at) VALUES ($1, $2, $3, $4, $5)";
    pub(crate) const SELECT_ALL: &str = "SELECT name, url, token, created_at FROM mcp_servers \
        WHERE owner_id = $1 ORDER BY name";
    pub(crate) const SELECT_ONE: &str = "SELECT name, url, token, created_at FROM mcp_servers \
        WHERE owner_id = $1 AND name = $2";
    pub(crate) const DELETE: &str = "DELETE FROM mcp_servers WHERE owner_id = $1 AND name = $2";
}
