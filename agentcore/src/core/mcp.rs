//! MCP servers: the ones users add (HTTP only, checked like `http_fetch`'s addresses, tokens
//! sealed), the operator's from the configuration, and their tools as agents get them.

use secrecy::ExposeSecret;

use super::{Core, Principal};
use crate::api::{McpServerList, ToolList};
use crate::domain::mcp::{McpServer, McpServerName, McpServerSet, McpServerTools, NewMcpServer};
use crate::domain::now;
use crate::domain::workspace::Need;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Result, ValidationErrors};
use crate::mcp::ServerRef;
use crate::store::McpServerRecord;
use crate::tools::builtin;

/// Servers `GET /api/tools` asks at once: a user with many servers opens that many sessions
/// at a time, not all of them.
const LISTINGS_AT_ONCE: usize = 8;

impl Core {
    /// Adds a streamable HTTP server of the caller's. Its URL must reach a public address
    /// (unless the operator allows private ones), checked after DNS resolution here and again
    /// on every connection; its token is sealed at rest and never shown again.
    pub async fn add_mcp_server(&self, who: &Principal, server: NewMcpServer) -> Result<McpServer> {
        who.require(Need::Manage)?;
        if self.mcp().is_operator(&server.name) {
            return Err(ValidationErrors::single(
                "name",
                format!("'{}' is the name of a server the operator configured", server.name),
            )
            .into());
        }
        self.check_mcp_server_room(&who.workspace).await?;
        if let Err(problem) = self.mcp().check_user_url(server.url.as_str()).await {
            return Err(ValidationErrors::single("url", problem).into());
        }
        let sealed_token = server
            .token
            .as_ref()
            .map(|token| {
                self.secrets()
                    .seal(token.expose_secret(), &token_context(&who.workspace, &server.name))
            })
            .transpose()?;
        let record = McpServerRecord {
            name: server.name,
            url: server.url.as_str().to_owned(),
            sealed_token,
            created_at: now(),
        };
        self.store().insert_mcp_server(&who.workspace, &record).await?;
        tracing::info!(workspace = %who.workspace, server = %record.name, "MCP server added");
        let after = serde_json::to_value(record.public()).ok();
        self.record(who, "mcp_server.added", ("mcp_server", record.name.as_str()), None, after)
            .await;
        Ok(record.public())
    }

    /// The caller's servers, and the operator's names.
    pub async fn mcp_servers(&self, who: &Principal) -> Result<McpServerList> {
        let servers = self.store().mcp_servers(&who.workspace).await?;
        Ok(McpServerList {
            servers: servers.iter().map(McpServerRecord::public).collect(),
            operator_servers: self.mcp().operator_names().cloned().collect(),
        })
    }

    /// Removes one of the caller's servers and closes this node's connection to it. Agents
    /// that name it keep the name: their runs go on without its tools.
    pub async fn delete_mcp_server(&self, who: &Principal, name: &McpServerName) -> Result<()> {
        who.require(Need::Manage)?;
        let before = self.store().mcp_server(&who.workspace, name).await?;
        self.store().delete_mcp_server(&who.workspace, name).await?;
        self.mcp().forget_user(&who.workspace, name).await;
        let was = serde_json::to_value(before.public()).ok();
        self.record(who, "mcp_server.deleted", ("mcp_server", name.as_str()), was, None).await;
        Ok(())
    }

    /// Connects to a server (the caller's or the operator's) and lists its tools, afresh.
    pub async fn test_mcp_server(
        &self,
        who: &Principal,
        name: &McpServerName,
    ) -> Result<McpServerTools> {
        who.require(Need::Manage)?;
        let server = self.server_ref(&who.workspace, name).await?;
        Ok(self.mcp().listing(&server, true).await)
    }

    /// Every built-in tool, and the tools of every server the caller's agents may use.
    pub async fn tool_list(&self, who: &Principal) -> Result<ToolList> {
        let mut servers: Vec<ServerRef> =
            self.mcp().operator_names().map(|name| ServerRef::operator(name.clone())).collect();
        for record in self.store().mcp_servers(&who.workspace).await? {
            servers.push(self.user_server(&who.workspace, record)?);
        }
        let gate = tokio::sync::Semaphore::new(LISTINGS_AT_ONCE);
        let listings = servers.iter().map(|server| async {
            let _turn = gate.acquire().await;
            self.mcp().listing(server, false).await
        });
        let mcp_servers = futures_util::future::join_all(listings).await;
        Ok(ToolList { tools: builtin::catalog(), mcp_servers })
    }

    /// An agent may name the operator's servers and its owner's own; any other name is a
    /// validation error on `mcp_servers` that lists the names there are.
    pub(super) async fn check_mcp_servers(
        &self,
        owner: &WorkspaceId,
        set: Option<&McpServerSet>,
    ) -> Result<()> {
        let Some(set) = set.filter(|s| !s.servers().is_empty()) else { return Ok(()) };
        let own = self.store().mcp_servers(owner).await?;
        let known = |name: &McpServerName| {
            self.mcp().is_operator(name) || own.iter().any(|r| r.name == *name)
        };
        let unknown: Vec<String> =
            set.servers().iter().filter(|n| !known(n)).map(|n| format!("'{n}'")).collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let mut names: Vec<String> = self.mcp().operator_names().map(ToString::to_string).collect();
        names.extend(own.iter().map(|r| r.name.to_string()));
        let there = if names.is_empty() { "there are none".into() } else { names.join(", ") };
        Err(ValidationErrors::single(
            "mcp_servers",
            format!("unknown MCP server {}; the servers are: {there}", unknown.join(", ")),
        )
        .into())
    }

    /// The servers `names` of an agent of `owner`, for a run: each one's connection key, or why
    /// it cannot be used (removed since, or its token cannot be opened).
    pub(crate) async fn agent_servers(
        &self,
        owner: &WorkspaceId,
        names: &[McpServerName],
    ) -> Vec<std::result::Result<ServerRef, String>> {
        let mut own = None;
        let mut servers = Vec::with_capacity(names.len());
        for name in names {
            if self.mcp().is_operator(name) {
                servers.push(Ok(ServerRef::operator(name.clone())));
                continue;
            }
            if own.is_none() {
                own = Some(self.store().mcp_servers(owner).await.map_err(|e| e.public_message()));
            }
            let found = match own.as_ref() {
                Some(Ok(records)) => match records.iter().find(|r| r.name == *name) {
                    Some(record) => self
                        .user_server(owner, record.clone())
                        .map_err(|e| format!("MCP server '{name}': {}", e.public_message())),
                    None => Err(format!("MCP server '{name}' no longer exists")),
                },
                Some(Err(error)) => Err(format!("MCP server '{name}': {error}")),
                None => Err(format!("MCP server '{name}' could not be read")),
            };
            servers.push(found);
        }
        servers
    }

    async fn server_ref(&self, owner: &WorkspaceId, name: &McpServerName) -> Result<ServerRef> {
        if self.mcp().is_operator(name) {
            return Ok(ServerRef::operator(name.clone()));
        }
        let record = self.store().mcp_server(owner, name).await?;
        self.user_server(owner, record)
    }

    fn user_server(&self, owner: &WorkspaceId, record: McpServerRecord) -> Result<ServerRef> {
        let token = record
            .sealed_token
            .as_deref()
            .map(|sealed| self.secrets().open(sealed, &token_context(owner, &record.name)))
            .transpose()?;
        Ok(ServerRef::user(owner.clone(), record.name, record.url, token))
    }
}

/// What a token is sealed to: its owner and server, so a row copied elsewhere does not open.
fn token_context(owner: &WorkspaceId, name: &McpServerName) -> String {
    format!("mcp:{owner}:{name}")
}
