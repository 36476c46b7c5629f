//! Model Context Protocol servers: this node's clients, built on the official SDK (`rmcp`).
//!
//! One connection per server per node (per user for the servers users add), opened on first
//! use and kept: the tool list is fetched when it connects and again after the server says it
//! changed (`notifications/tools/list_changed`) or after a failure, never per step. A call is
//! bounded by the server's timeout; a connection found dead is opened again once and the call
//! retried once. Stdio servers run as child processes in their own process group, killed with
//! the node. Users' servers are reached only through a client that refuses non-public
//! addresses after DNS resolution, as `http_fetch` does.

mod connection;
mod content;
mod listing;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use crate::domain::mcp::{McpOrigin, McpServerName, McpServerTools};
use crate::domain::tool_result::{ToolError, ToolResult};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Result};
use crate::scrub::Scrubber;
use crate::telemetry::Histogram;
pub use crate::telemetry::McpCallMetrics;
use crate::tools::http_fetch::AddressPolicy;
use connection::{Connection, Spec};

pub use connection::McpTool;
pub use listing::Listing;

/// The operator's MCP servers (`mcp.servers.<name>` in agentd's configuration).
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    pub servers: BTreeMap<McpServerName, McpServerConfig>,
}

/// One operator server: how to reach it, and how long a call may take.
#[derive(Debug, Clone)]
pub struct McpServerConfig {
    pub transport: McpTransport,
    pub timeout: Duration,
}

impl McpServerConfig {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
}

/// How a server is reached.
#[derive(Debug, Clone)]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin and stdout. It gets `env` and, of agentd's
    /// own environment, only `PATH`, `HOME`, `USER`, `LANG`, `LC_ALL`, `TZ` and `TMPDIR`.
    Stdio { command: String, args: Vec<String>, env: BTreeMap<String, SecretString> },
    /// Streamable HTTP, with these headers on every request.
    Http { url: String, headers: BTreeMap<String, SecretString> },
}

/// Which server a run or a request means, with what connecting to it needs.
#[derive(Debug, Clone)]
pub enum ServerRef {
    Operator(McpServerName),
    User { owner: WorkspaceId, name: McpServerName, url: String, token: Option<SecretString> },
}

impl ServerRef {
    pub fn operator(name: McpServerName) -> Self {
        ServerRef::Operator(name)
    }

    pub fn user(
        owner: WorkspaceId,
        name: McpServerName,
        url: String,
        token: Option<SecretString>,
    ) -> Self {
        ServerRef::User { owner, name, url, token }
    }

    pub fn name(&self) -> &McpServerName {
        match self {
            ServerRef::Operator(name) | ServerRef::User { name, .. } => name,
        }
    }

    pub fn origin(&self) -> McpOrigin {
        match self {
            ServerRef::Operator(_) => McpOrigin::Operator,
            ServerRef::User { .. } => McpOrigin::User,
        }
    }
}

/// Calls of one operator server, or of all users' servers, for metrics.
#[derive(Debug, Default)]
pub(crate) struct ServerCalls {
    pub(crate) calls: std::sync::atomic::AtomicU64,
    pub(crate) errors: std::sync::atomic::AtomicU64,
    pub(crate) latency: Histogram,
}

/// Whose calls an entry of the metrics counts: an operator server's, or (no name) all users'.
type StatsKey = (McpOrigin, Option<McpServerName>);

/// This node's MCP clients.
#[derive(Debug)]
pub struct McpClients {
    operator: BTreeMap<McpServerName, Arc<Connection>>,
    users: Mutex<HashMap<(WorkspaceId, McpServerName), Arc<Connection>>>,
    /// Reaches public addresses only (unless the operator allows private ones).
    user_http: reqwest::Client,
    user_policy: Arc<AddressPolicy>,
    /// Masks the operator's header and environment secrets (and key shapes) in servers'
    /// error texts, which users and their models read.
    scrubber: Scrubber,
    /// By operator server, and one entry (no name) for all users' servers.
    stats: Mutex<BTreeMap<StatsKey, Arc<ServerCalls>>>,
}

/// Bounds closing every connection when the node stops.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an API request waits for a server's tool list.
pub const LISTING_TIMEOUT: Duration = Duration::from_secs(10);

impl McpClients {
    /// Clients for the operator's servers (nothing connects yet) and for users' servers under
    /// `user_policy`.
    pub fn new(config: &McpConfig, user_policy: AddressPolicy) -> Result<Self> {
        crate::tls::install_provider();
        let user_policy = Arc::new(user_policy);
        let user_http = user_policy
            .guarded_client(McpServerConfig::DEFAULT_TIMEOUT)
            .map_err(|e| Error::internal(format!("cannot build the MCP HTTP client: {e}")))?;
        let operator_http = reqwest::Client::builder()
            .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(McpServerConfig::DEFAULT_TIMEOUT)
            .build()
            .map_err(|e| Error::internal(format!("cannot build the MCP HTTP client: {e}")))?;
        let stats = Mutex::new(BTreeMap::new());
        let secrets = config.servers.values().flat_map(|server| match &server.transport {
            McpTransport::Stdio { env, .. } => env.values().collect::<Vec<_>>(),
            McpTransport::Http { headers, .. } => headers.values().collect(),
        });
        let scrubber = Scrubber::new(secrets.flat_map(|s| {
            let value = s.expose_secret();
            // A header's credential without its scheme (`Bearer x` → `x`) too.
            [value.to_owned(), value.split_once(' ').map(|(_, v)| v.to_owned()).unwrap_or_default()]
        }));
        let mut clients = Self {
            scrubber,
            operator: BTreeMap::new(),
            users: Mutex::default(),
            user_http,
            user_policy,
            stats,
        };
        for (name, server) in &config.servers {
            let spec = match &server.transport {
                McpTransport::Stdio { command, args, env } => {
                    Spec::Stdio { command: command.clone(), args: args.clone(), env: env.clone() }
                }
                McpTransport::Http { url, headers } => Spec::Http {
                    url: url.clone(),
                    headers: headers.clone(),
                    client: operator_http.clone(),
                },
            };
            let calls = clients.calls(McpOrigin::Operator, Some(name));
            let connection = Connection::new(name.clone(), spec, server.timeout, calls);
            clients.operator.insert(name.clone(), Arc::new(connection));
        }
        Ok(clients)
    }

    /// Whether a user's server at `url` may be reached: its scheme, and every address its
    /// host resolves to now, under the users' policy. The same policy guards every connection
    /// (IP literals before it is made, host names in the resolver), so a URL accepted here is
    /// refused later only if its name moves to a refused address or the operator changes the
    /// policy.
    pub async fn check_user_url(&self, url: &str) -> std::result::Result<(), String> {
        self.user_policy.check_host(url).await
    }

    pub fn operator_names(&self) -> impl Iterator<Item = &McpServerName> {
        self.operator.keys()
    }

    pub fn is_operator(&self, name: &McpServerName) -> bool {
        self.operator.contains_key(name)
    }

    /// The server's tools as the model is offered them (`<server>__<tool>`); the error says
    /// why there are none.
    pub async fn tools(&self, server: &ServerRef) -> std::result::Result<Arc<Listing>, String> {
        self.connection(server)?.tools(false).await.map_err(|e| self.scrubber.scrub(&e))
    }

    /// A server's tools, listed again now (see `Connection::tools_listed_again`).
    pub async fn tools_listed_again(
        &self,
        server: &ServerRef,
    ) -> std::result::Result<Arc<Listing>, String> {
        self.connection(server)?.tools_listed_again().await.map_err(|e| self.scrubber.scrub(&e))
    }

    /// A server's tools for `GET /api/tools` (`fresh`: reconnect and list again, for a test),
    /// waiting at most [`LISTING_TIMEOUT`] so a request is not held by a slow server.
    pub async fn listing(&self, server: &ServerRef, fresh: bool) -> McpServerTools {
        let listed = match self.connection(server) {
            Ok(connection) => tokio::time::timeout(LISTING_TIMEOUT, connection.tools(fresh))
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "MCP server '{}': no tool list within {} s",
                        server.name(),
                        LISTING_TIMEOUT.as_secs()
                    ))
                }),
            Err(error) => Err(error),
        };
        let (tools, warning, error) = match listed {
            Ok(listing) => {
                let tools = listing.tools.iter().map(|t| t.info.clone()).collect();
                (tools, listing.warning.clone(), None)
            }
            Err(error) => (Vec::new(), None, Some(self.scrubber.scrub(&error))),
        };
        McpServerTools {
            server: server.name().clone(),
            origin: server.origin(),
            tools,
            warning,
            error,
        }
    }

    /// Calls `tool` (the server's own name for it) with `arguments` (a JSON object, as the
    /// model wrote it); the text for the model, or the error it is told.
    pub async fn call(&self, server: &ServerRef, tool: &str, arguments: &str) -> ToolResult {
        let connection = self.connection(server).map_err(ToolError::Failed)?;
        connection.call(tool, arguments).await.map_err(|error| match error {
            // A server's or a transport's words may quote a secret: scrubbed.
            ToolError::Failed(words) => ToolError::Failed(self.scrubber.scrub(&words)),
            other => other,
        })
    }

    /// Forgets this node's connection to a user's server (it was removed).
    pub async fn forget_user(&self, owner: &WorkspaceId, name: &McpServerName) {
        let removed = self.lock_users().remove(&(owner.clone(), name.clone()));
        if let Some(connection) = removed {
            connection.close(CLOSE_TIMEOUT).await;
        }
    }

    /// Closes every connection, stopping stdio servers, each within a bound.
    pub async fn close(&self) {
        let users: Vec<Arc<Connection>> = self.lock_users().drain().map(|(_, c)| c).collect();
        let all = self.operator.values().chain(users.iter());
        futures_util::future::join_all(all.map(|c| c.close(CLOSE_TIMEOUT))).await;
    }

    /// Calls per server since the node started.
    pub fn metrics(&self) -> Vec<McpCallMetrics> {
        use std::sync::atomic::Ordering::Relaxed;
        let stats = crate::sync::lock(&self.stats);
        stats
            .iter()
            .map(|((origin, server), calls)| McpCallMetrics {
                server: server.as_ref().map(ToString::to_string),
                origin: *origin,
                calls: calls.calls.load(Relaxed),
                errors: calls.errors.load(Relaxed),
                latency: calls.latency.snapshot(),
            })
            .collect()
    }

    fn calls(&self, origin: McpOrigin, name: Option<&McpServerName>) -> Arc<ServerCalls> {
        let mut stats = crate::sync::lock(&self.stats);
        Arc::clone(stats.entry((origin, name.cloned())).or_default())
    }

    fn lock_users(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(WorkspaceId, McpServerName), Arc<Connection>>> {
        crate::sync::lock(&self.users)
    }

    /// The connection for `server`: the operator's, or the user's, opened anew when its URL or
    /// token changed (removed and added again, possibly on another node).
    fn connection(&self, server: &ServerRef) -> std::result::Result<Arc<Connection>, String> {
        match server {
            ServerRef::Operator(name) => self
                .operator
                .get(name)
                .cloned()
                .ok_or_else(|| format!("MCP server '{name}' is not configured")),
            ServerRef::User { owner, name, url, token } => {
                self.user_policy
                    .check_literal(url)
                    .map_err(|why| format!("MCP server '{name}': {why}"))?;
                let calls = self.calls(McpOrigin::User, None);
                let mut users = self.lock_users();
                let key = (owner.clone(), name.clone());
                if let Some(existing) = users.get(&key)
                    && existing.same_endpoint(url, token.as_ref())
                {
                    return Ok(Arc::clone(existing));
                }
                let mut headers = BTreeMap::new();
                if let Some(token) = token {
                    let bearer = format!("Bearer {}", token.expose_secret());
                    headers.insert("authorization".to_owned(), SecretString::from(bearer));
                }
                let spec = Spec::Http { url: url.clone(), headers, client: self.user_http.clone() };
                let timeout = McpServerConfig::DEFAULT_TIMEOUT;
                let connection = Arc::new(Connection::new(name.clone(), spec, timeout, calls));
                if let Some(replaced) = users.insert(key, Arc::clone(&connection)) {
                    tokio::spawn(async move { replaced.close(CLOSE_TIMEOUT).await });
                }
                Ok(connection)
            }
        }
    }
}
