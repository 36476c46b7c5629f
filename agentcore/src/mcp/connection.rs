//! One MCP server's connection on this node: opened on first use, kept while it works, opened
//! again (once per call) when it died; its tool list cached until the server says it changed.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientCacheConfig, ClientHandler, RoleClient, ServiceExt};
use secrecy::{ExposeSecret, SecretString};
use tokio::io::AsyncBufReadExt;

use super::ServerCalls;
use super::content::render;
use super::listing::{self, Listing};
use crate::domain::mcp::{McpServerName, McpToolInfo};
use crate::domain::tool_result::{ToolError, ToolResult};

/// How to reach the server.
#[derive(Debug)]
pub(super) enum Spec {
    Stdio { command: String, args: Vec<String>, env: BTreeMap<String, SecretString> },
    Http { url: String, headers: BTreeMap<String, SecretString>, client: reqwest::Client },
}

/// A tool of the server, with the name the model calls it by.
#[derive(Debug, Clone)]
pub struct McpTool {
    pub info: McpToolInfo,
}

/// Of agentd's environment, what a stdio server is given (besides its own `env`): enough to
/// find programs and a home, none of agentd's settings or secrets.
const PASSED_ENV: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR"];

#[derive(Debug)]
pub(super) struct Connection {
    name: McpServerName,
    spec: Spec,
    timeout: Duration,
    calls: Arc<ServerCalls>,
    /// The open session; one task at a time opens it.
    live: tokio::sync::Mutex<Option<Arc<Live>>>,
    /// When opening it last failed, and why.
    failed: std::sync::Mutex<Option<(Instant, String)>>,
}

/// How long a failed opening is not tried again.
const RECONNECT_PAUSE: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Live {
    service: RunningService<RoleClient, Handler>,
    tools: std::sync::RwLock<Arc<Listing>>,
}

impl Live {
    fn is_open(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }

    fn tools(&self) -> Arc<Listing> {
        Arc::clone(&crate::sync::read(&self.tools))
    }
}

/// The client side of the session: notes `tools/list_changed`.
#[derive(Debug, Clone)]
struct Handler {
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::Release);
    }

    fn get_info(&self) -> ClientConfig {
        let agentd = Implementation::new("agentd", env!("CARGO_PKG_VERSION"));
        ClientConfig::new(ClientCapabilities::default(), agentd)
    }
}

impl Connection {
    pub(super) fn new(
        name: McpServerName,
        spec: Spec,
        timeout: Duration,
        calls: Arc<ServerCalls>,
    ) -> Self {
        let live = tokio::sync::Mutex::new(None);
        Self { name, spec, timeout, calls, live, failed: std::sync::Mutex::new(None) }
    }

    /// Whether this connection goes to `url` with `token` (a user's server, as stored now).
    pub(super) fn same_endpoint(&self, url: &str, token: Option<&SecretString>) -> bool {
        let Spec::Http { url: own, headers, .. } = &self.spec else { return false };
        let bearer = headers.get("authorization").map(|b| b.expose_secret().to_owned());
        own == url && bearer == token.map(|t| format!("Bearer {}", t.expose_secret()))
    }

    /// The tools, listed when the session opened or again since the server said they changed;
    /// `fresh` reopens the session first.
    pub(super) async fn tools(&self, fresh: bool) -> Result<Arc<Listing>, String> {
        if fresh {
            self.reset(None).await;
            *self.lock_failure() = None;
        }
        let live = self.live().await?;
        let stale = live.service.service().stale.swap(false, Ordering::AcqRel);
        if stale {
            self.list_again(&live).await?;
        }
        Ok(live.tools())
    }

    /// The tools, listed again now whatever the cache says: the model named a tool of this
    /// server that the cache lacks, and the server's `tools/list_changed` may still be on its
    /// way (the client handles it apart from the call that caused it).
    pub(super) async fn tools_listed_again(&self) -> Result<Arc<Listing>, String> {
        let live = self.live().await?;
        live.service.service().stale.store(false, Ordering::Release);
        self.list_again(&live).await?;
        Ok(live.tools())
    }

    async fn list_again(&self, live: &Arc<Live>) -> Result<(), String> {
        match self.list(&live.service).await {
            Ok(tools) => {
                *crate::sync::write(&live.tools) = Arc::new(tools);
                Ok(())
            }
            Err(error) => {
                self.reset(Some(live)).await;
                Err(error)
            }
        }
    }

    /// One call; a session found dead is opened again and the call made once more.
    pub(super) async fn call(&self, tool: &str, arguments: &str) -> ToolResult {
        let arguments = match serde_json::from_str::<serde_json::Value>(arguments) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(serde_json::Value::Null) => serde_json::Map::new(),
            _ => return Err(ToolError::invalid_arguments("not a JSON object")),
        };
        let started = Instant::now();
        self.calls.calls.fetch_add(1, Ordering::Relaxed);
        let mut outcome = self.call_once(tool, &arguments).await;
        if let Err(Failure::Closed(_)) = &outcome {
            tracing::info!(server = %self.name, "MCP session closed; opening it again for one retry");
            outcome = self.call_once(tool, &arguments).await;
        }
        self.calls.latency.observe(started.elapsed());
        let answer = match outcome {
            Ok(answer) => answer,
            Err(Failure::Closed(why) | Failure::Other(why)) => Err(ToolError::Failed(why)),
        };
        if answer.is_err() {
            self.calls.errors.fetch_add(1, Ordering::Relaxed);
        }
        answer
    }

    async fn call_once(
        &self,
        tool: &str,
        arguments: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<ToolResult, Failure> {
        let live = self.live().await.map_err(Failure::Other)?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments.clone());
        let called =
            tokio::time::timeout(self.timeout, live.service.peer().call_tool(params)).await;
        match called {
            Ok(Ok(result)) => Ok(render(result)),
            Ok(Err(ServiceError::McpError(error))) => Ok(Err(ToolError::Failed(format!(
                "the server refused the call: {}",
                error.message
            )))),
            Ok(Err(error @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                self.reset(Some(&live)).await;
                Err(Failure::Closed(format!(
                    "the server closed the connection: {}",
                    describe(&error)
                )))
            }
            Ok(Err(error)) => {
                self.reset(Some(&live)).await;
                Err(Failure::Other(format!("the call failed: {}", describe(&error))))
            }
            Err(_) => Err(Failure::Other(format!(
                "timed out: the server did not answer within {} s",
                self.timeout.as_secs_f64()
            ))),
        }
    }

    /// The open session, opening it (and listing the tools) when there is none or it died.
    /// After a failed opening, uses within [`RECONNECT_PAUSE`] get that failure at once instead
    /// of waiting on the server again: a dead server does not slow every run that names it.
    async fn live(&self) -> Result<Arc<Live>, String> {
        let mut slot = self.live.lock().await;
        if let Some(live) = slot.as_ref().filter(|live| live.is_open()) {
            return Ok(Arc::clone(live));
        }
        if let Some(dead) = slot.take() {
            tokio::spawn(close_live(dead, super::CLOSE_TIMEOUT));
        }
        if let Some((at, why)) = self.failure() {
            let left = RECONNECT_PAUSE.saturating_sub(at.elapsed()).as_secs() + 1;
            return Err(format!("{why} (not tried again for {left} s)"));
        }
        let opened = tokio::time::timeout(self.timeout, self.open()).await.unwrap_or_else(|_| {
            Err(format!("timed out: could not connect within {} s", self.timeout.as_secs_f64()))
        });
        let failed = |why: String| format!("MCP server '{}': {why}", self.name);
        let live = match opened {
            Ok(live) => Arc::new(live),
            Err(why) => {
                let why = failed(why);
                *self.lock_failure() = Some((Instant::now(), why.clone()));
                return Err(why);
            }
        };
        *self.lock_failure() = None;
        *slot = Some(Arc::clone(&live));
        Ok(live)
    }

    /// The last failed opening, while it is recent.
    fn failure(&self) -> Option<(Instant, String)> {
        self.lock_failure().clone().filter(|(at, _)| at.elapsed() < RECONNECT_PAUSE)
    }

    fn lock_failure(&self) -> std::sync::MutexGuard<'_, Option<(Instant, String)>> {
        crate::sync::lock(&self.failed)
    }

    async fn open(&self) -> Result<Live, String> {
        let handler = Handler { stale: Arc::new(AtomicBool::new(false)) };
        let service = match &self.spec {
            Spec::Stdio { command, args, env } => {
                let transport = self.spawn(command, args, env)?;
                handler
                    .serve(transport)
                    .await
                    .map_err(|e| format!("cannot initialise: {}", describe(&e)))?
            }
            Spec::Http { url, headers, client } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .max_sse_event_size(listing::MAX_RESPONSE_BYTES);
                config.max_json_response_size = listing::MAX_RESPONSE_BYTES;
                let mut custom = std::collections::HashMap::new();
                for (name, value) in headers {
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|e| format!("header {name}: {e}"))?;
                    let value = reqwest::header::HeaderValue::from_str(value.expose_secret())
                        .map_err(|_| format!("header {name}: not a valid value"))?;
                    custom.insert(name, value);
                }
                config = config.custom_headers(custom);
                let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
                handler
                    .serve(transport)
                    .await
                    .map_err(|e| format!("cannot initialise: {}", describe(&e)))?
            }
        };
        // The node keeps its own list (below): the SDK's response cache would keep every page
        // of every listing besides, and serve a stale one when a listing fails.
        service.peer().set_response_cache_config(ClientCacheConfig::disabled()).await;
        let tools = self.list(&service).await?;
        tracing::info!(server = %self.name, tools = tools.tools.len(), "MCP session opened");
        Ok(Live { service, tools: std::sync::RwLock::new(Arc::new(tools)) })
    }

    fn spawn(
        &self,
        command: &str,
        args: &[String],
        env: &BTreeMap<String, SecretString>,
    ) -> Result<TokioChildProcess, String> {
        let mut child = tokio::process::Command::new(command);
        child.args(args).env_clear().kill_on_drop(true);
        for name in PASSED_ENV {
            if let Some(value) = std::env::var_os(name) {
                child.env(name, value);
            }
        }
        for (name, value) in env {
            child.env(name, value.expose_secret());
        }
        let mut wrapped = process_wrap::tokio::CommandWrap::from(child);
        wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
        let (transport, stderr) = TokioChildProcess::builder(wrapped)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start '{command}': {e}"))?;
        if let Some(stderr) = stderr {
            let server = self.name.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::info!(server = %server, "MCP server: {line}");
                }
            });
        }
        Ok(transport)
    }

    async fn list(&self, service: &RunningService<RoleClient, Handler>) -> Result<Listing, String> {
        tokio::time::timeout(self.timeout, listing::list(&self.name, service.peer()))
            .await
            .map_err(|_| "timed out listing the tools".to_owned())?
            .map_err(|e| format!("cannot list the tools: {}", describe(&e)))
    }

    /// Drops the session `failed` (any when `None`) so the next use opens a new one.
    async fn reset(&self, failed: Option<&Arc<Live>>) {
        let mut slot = self.live.lock().await;
        let matches = match (slot.as_ref(), failed) {
            (Some(current), Some(failed)) => Arc::ptr_eq(current, failed),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if matches && let Some(dead) = slot.take() {
            tokio::spawn(close_live(dead, super::CLOSE_TIMEOUT));
        }
    }

    /// Closes the session (a stdio server is asked to stop, then killed), within `bound`.
    pub(super) async fn close(&self, bound: Duration) {
        let live = self.live.lock().await.take();
        if let Some(live) = live {
            close_live(live, bound).await;
        }
    }
}

/// Why a call got no answer: the session closed (worth one retry on a new one), or else.
enum Failure {
    Closed(String),
    Other(String),
}

async fn close_live(live: Arc<Live>, bound: Duration) {
    match Arc::try_unwrap(live) {
        Ok(mut live) => {
            if let Err(error) = live.service.close_with_timeout(bound).await {
                tracing::warn!(%error, "MCP session did not close cleanly");
            }
        }
        // A call still holds it; its drop guard cancels the session when the last one ends.
        Err(shared) => shared.service.cancellation_token().cancel(),
    }
}

/// An SDK error as a user reads it: the SDK names its transports by their Rust type
/// (`Transport [rmcp::transport::worker::WorkerTransport<…>] error: …`), which says nothing to
/// a user and much about the build; those bracketed type names are left out.
pub(super) fn describe(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(open) = rest.find('[') {
        let Some(close) = matching_bracket(&rest[open..]).map(|c| open + c) else { break };
        let inner = &rest[open + 1..close];
        out.push_str(&rest[..open]);
        if is_type_name(inner) {
            if out.ends_with(' ') && rest[close + 1..].starts_with(' ') {
                out.pop();
            }
        } else {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Where the `[` that `text` starts with is closed.
fn matching_bracket(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            _ => {}
        }
    }
    None
}

/// A Rust path (`crate::module::Type<…>`), not an IPv6 address (`[::1]`, `[fe80::1]`).
fn is_type_name(inner: &str) -> bool {
    inner.contains("::") && inner.chars().any(|c| !(c.is_ascii_hexdigit() || ":.%".contains(c)))
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn type_names_are_left_out_of_errors_and_addresses_kept() {
        let sdk = "Transport [rmcp::transport::worker::WorkerTransport<rmcp::transport::streamable_http_client::StreamableHttpClientWorker<reqwest::async_impl::client::Client>>] error: Client error: error sending request for url (http://[::1]:9/mcp)";
        assert_eq!(
            describe(&sdk),
            "Transport error: Client error: error sending request for url (http://[::1]:9/mcp)"
        );
        assert_eq!(describe(&"refused [fe80::1] and [a]"), "refused [fe80::1] and [a]");
        assert_eq!(describe(&"unclosed [x::Y"), "unclosed [x::Y");
    }
}
