//! A test MCP server built with `rmcp`'s server side: tools `add`, `slow`, `fail`, `crash` and
//! `learn` (which adds `mul` and sends `notifications/tools/list_changed`), `learn_quietly`
//! (which adds `mul` and says nothing),
//! served over streamable HTTP in this process (`McpHttpServer`) or over stdio by the
//! `mcp-test-server` binary. It counts the requests it received, so a test can check that a
//! client initialises once and lists the tools once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

/// What the server received.
#[derive(Debug, Default)]
pub struct Counts {
    pub initialize: AtomicUsize,
    pub list_tools: AtomicUsize,
    pub calls: AtomicUsize,
}

/// The server's tools and behaviour; clones share the counts.
#[derive(Debug, Clone, Default)]
pub struct TestMcp {
    pub counts: Arc<Counts>,
    /// Whether `crash` ends the process (stdio) or only fails the call (in a test process).
    pub may_exit: bool,
    /// Set by `learn`, which adds the tool `mul` and tells the client its tools changed.
    pub learned: Arc<std::sync::atomic::AtomicBool>,
    /// Set: `tools/list` answers with these pages instead of the tools above.
    pub paging: Option<Paging>,
}

/// A tool list of `pages` pages (the cursor is the next page's number), each of `per_page`
/// tools `p<page>_<n>` whose descriptions are `description_bytes` long.
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    pub pages: usize,
    pub per_page: usize,
    pub description_bytes: usize,
}

impl Paging {
    fn page(&self, cursor: Option<&str>) -> ListToolsResult {
        let page: usize = cursor.and_then(|c| c.parse().ok()).unwrap_or(0);
        let description = "d".repeat(self.description_bytes);
        let tools = (0..self.per_page)
            .map(|n| Tool::new(format!("p{page}_{n}"), description.clone(), schema(json!({}), &[])))
            .collect();
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = (page + 1 < self.pages).then(|| (page + 1).to_string());
        result
    }
}

fn schema(properties: Value, required: &[&str]) -> Arc<serde_json::Map<String, Value>> {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

/// The tools, with their JSON Schemas.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "add",
            "Adds two integers.",
            schema(json!({"a": {"type": "integer"}, "b": {"type": "integer"}}), &["a", "b"]),
        ),
        Tool::new(
            "slow",
            "Waits `seconds`, then answers.",
            schema(json!({"seconds": {"type": "number"}}), &["seconds"]),
        ),
        Tool::new("fail", "Always fails.", schema(json!({}), &[])),
        Tool::new("crash", "Ends the server's process.", schema(json!({}), &[])),
        Tool::new("learn", "Adds the tool `mul`.", schema(json!({}), &[])),
        Tool::new("learn_quietly", "Adds the tool `mul` without telling.", schema(json!({}), &[])),
    ]
}

/// The tool `learn` adds.
fn mul() -> Tool {
    Tool::new(
        "mul",
        "Multiplies two integers.",
        schema(json!({"a": {"type": "integer"}, "b": {"type": "integer"}}), &["a", "b"]),
    )
}

fn text(result: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(result.into())])
}

impl TestMcp {
    async fn run(
        &self,
        name: &str,
        args: &serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let int = |key: &str| args.get(key).and_then(Value::as_i64);
        match name {
            "learn" => {
                self.learned.store(true, Ordering::SeqCst);
                match context.peer.notify_tool_list_changed().await {
                    Ok(()) => text("learned mul"),
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
                }
            }
            "learn_quietly" => {
                self.learned.store(true, Ordering::SeqCst);
                text("learned mul")
            }
            "mul" if self.learned.load(Ordering::SeqCst) => match (int("a"), int("b")) {
                (Some(a), Some(b)) => text(format!("{}", a * b)),
                _ => CallToolResult::error(vec![ContentBlock::text("a and b must be integers")]),
            },
            "add" => match (int("a"), int("b")) {
                (Some(a), Some(b)) => text(format!("{}", a + b)),
                _ => CallToolResult::error(vec![ContentBlock::text("a and b must be integers")]),
            },
            "slow" => {
                let seconds = args.get("seconds").and_then(Value::as_f64).unwrap_or(1.0);
                tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
                text("done waiting")
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("the tool failed on purpose")]),
            "crash" if self.may_exit => std::process::exit(3),
            "crash" => CallToolResult::error(vec![ContentBlock::text("not a process to end")]),
            other => CallToolResult::error(vec![ContentBlock::text(format!("no tool {other}"))]),
        }
    }
}

impl ServerHandler for TestMcp {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_tool_list_changed();
        InitializeResult::new(capabilities.build())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.counts.initialize.fetch_add(1, Ordering::SeqCst);
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.counts.list_tools.fetch_add(1, Ordering::SeqCst);
        if let Some(paging) = &self.paging {
            return Ok(paging.page(request.as_ref().and_then(|r| r.cursor.as_deref())));
        }
        let mut listed = tools();
        if self.learned.load(Ordering::SeqCst) {
            listed.push(mul());
        }
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.counts.calls.fetch_add(1, Ordering::SeqCst);
        let args = request.arguments.unwrap_or_default();
        Ok(self.run(&request.name, &args, &context).await.into())
    }
}

/// The server over streamable HTTP at `url` (`http://127.0.0.1:<port>/mcp`).
pub struct McpHttpServer {
    pub url: String,
    pub counts: Arc<Counts>,
    /// The `Authorization` header of every request (empty when there was none).
    pub authorizations: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl McpHttpServer {
    pub async fn start() -> Self {
        Self::serve(TestMcp::default()).await
    }

    /// `server` over streamable HTTP.
    pub async fn serve(server: TestMcp) -> Self {
        let counts = Arc::clone(&server.counts);
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&authorizations);
        let record = move |request: axum::extract::Request, next: axum::middleware::Next| {
            let header = request.headers().get("authorization");
            let value = header.and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(value);
            next.run(request)
        };
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(record));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let url = format!("http://{}/mcp", listener.local_addr().expect("an address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { url, counts, authorizations, task }
    }

    pub fn initialized(&self) -> usize {
        self.counts.initialize.load(Ordering::SeqCst)
    }

    pub fn listed(&self) -> usize {
        self.counts.list_tools.load(Ordering::SeqCst)
    }

    pub fn calls(&self) -> usize {
        self.counts.calls.load(Ordering::SeqCst)
    }
}

impl Drop for McpHttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
