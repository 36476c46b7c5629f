//! `http_fetch`: the tool that lets an agent fetch a URL (GET or POST) and read the answer as
//! text.
//!
//! The model chooses the URL, so every fetch is guarded against server-side request forgery:
//! loopback, private, link-local (cloud metadata), shared, unique-local, multicast and other
//! non-public addresses are refused unless the [`AddressPolicy`] allows them. The check runs
//! on the addresses actually connected to: IP literals before sending and on every redirect,
//! host names after DNS resolution (so a name that resolves to 127.0.0.1 is refused too), and
//! no proxy is ever used. Answers are bounded: 15 seconds, 1 MB of body, 5 redirects.

mod address;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Request, Response, Url};
use serde_json::json;

use self::address::{Explained, GuardedResolver};
use super::html;
use crate::domain::tool_result::{ToolError, ToolResult};
use crate::error::{Error, Result};

/// What the tool does and its limits, for the model.
pub const DESCRIPTION: &str = "Fetches a URL over HTTP(S): a web page or an HTTP API. GET by \
default, or POST with a text body; optional request headers. Returns the status line, the \
content type, a blank line, then the body as text: HTML is reduced to its readable text, each \
link followed by its address; binary content is not shown. Limits: 15 seconds, the first 1 MB \
of the body, at most 5 redirects. Only http and https URLs on public addresses: local and \
private network addresses are refused unless the operator allowed them.";

/// The whole fetch, redirects and body included.
const TIMEOUT: Duration = Duration::from_secs(15);
/// The body is read up to this many bytes.
const MAX_BODY: usize = 1024 * 1024;
/// Redirects followed, at most.
const MAX_REDIRECTS: usize = 5;
/// The last line of a body cut at [`MAX_BODY`].
const CUT_MARKER: &str = "[cut: the response was longer than 1 MB]";
/// Headers the HTTP client sets itself; a model that sets them could garble the request.
const RESERVED_HEADERS: [&str; 5] =
    ["host", "content-length", "transfer-encoding", "connection", "upgrade"];

/// Which addresses a fetch may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Loopback, private, link-local (cloud metadata), unique-local, CGNAT... allowed too:
    /// for a local Ollama or an intranet. Off by default.
    pub allow_private: bool,
    /// Specific `ip:port` socket addresses allowed even when private (an operator's intranet
    /// service). They match exactly, whether the URL names the IP or a host that resolves to
    /// it (`http://localhost:11434/` reaches an allowed `127.0.0.1:11434`).
    pub allowed: Vec<SocketAddr>,
}

/// The arguments the model sends. Unknown fields are refused (deny_unknown_fields).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchArgs {
    /// The `http` or `https` URL to fetch.
    pub url: String,
    /// `GET` (the default) or `POST`, in any case.
    pub method: Option<String>,
    /// Request headers, name to value.
    pub headers: Option<BTreeMap<String, String>>,
    /// The request body, with `POST` only.
    pub body: Option<String>,
}

/// The JSON Schema of [`FetchArgs`], for the model.
pub fn parameters() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "url": { "type": "string", "description": "The http or https URL to fetch." },
            "method": {
                "type": "string",
                "enum": ["GET", "POST"],
                "description": "GET (the default) or POST."
            },
            "headers": {
                "type": "object",
                "additionalProperties": { "type": "string" },
                "description": "Request headers, name to value."
            },
            "body": { "type": "string", "description": "The request body, sent with POST." }
        },
        "required": ["url"],
        "additionalProperties": false
    })
}

/// The `http_fetch` tool: one HTTP client bound to an [`AddressPolicy`]. Clones share it.
#[derive(Debug, Clone)]
pub struct HttpFetch {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
    timeout: Duration,
}

impl HttpFetch {
    /// A fetcher that reaches what `policy` allows. Fails only if the HTTP client cannot be
    /// built (no TLS roots).
    pub fn new(policy: AddressPolicy) -> Result<Self> {
        Self::with_timeout(policy, TIMEOUT)
    }

    fn with_timeout(policy: AddressPolicy, timeout: Duration) -> Result<Self> {
        crate::tls::install_provider();
        let policy = Arc::new(policy);
        let client = reqwest::Client::builder()
            .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .timeout(timeout)
            .no_proxy()
            .referer(false)
            .redirect(Arc::clone(&policy).redirect_policy())
            .dns_resolver(GuardedResolver(Arc::clone(&policy)))
            .build()
            .map_err(|e| Error::internal(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self { client, policy, timeout })
    }

    /// The addresses it may reach.
    pub fn policy(&self) -> &Arc<AddressPolicy> {
        &self.policy
    }

    /// Performs the request. Ok: the text for the model (first line `HTTP <status>`, the
    /// content type, a blank line, then the body as readable text). Err: a one-line
    /// explanation for the model (refused address, bad URL, method not GET/POST, timeout, ...).
    pub async fn fetch(&self, args: &FetchArgs) -> ToolResult {
        let (request, port) =
            self.request(args).map_err(|Explained(why)| ToolError::Failed(why))?;
        let exchange = address::scoped(port, self.exchange(request));
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(outcome) => outcome.map_err(ToolError::Failed),
            Err(_) => Err(ToolError::Failed(self.timed_out())),
        }
    }

    /// The request `args` describe, and the port it goes to, once checked.
    fn request(&self, args: &FetchArgs) -> std::result::Result<(Request, u16), Explained> {
        let url = Url::parse(args.url.trim())
            .map_err(|e| Explained(format!("bad URL '{}': {e}", args.url)))?;
        let port = self.policy.check_url(&url)?;
        let method = method(args)?;
        let mut request = Request::new(method, url);
        *request.headers_mut() = headers(args.headers.as_ref())?;
        if let Some(body) = &args.body {
            *request.body_mut() = Some(body.clone().into());
        }
        Ok((request, port))
    }

    async fn exchange(&self, request: Request) -> std::result::Result<String, String> {
        let response = self.client.execute(request).await.map_err(|e| self.explain(&e))?;
        let status = response.status();
        // Links are resolved against the page's own address, after redirects.
        let page = response.url().clone();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).trim().to_owned());
        let (body, cut) = read_capped(response).await.map_err(|e| self.explain(&e))?;
        Ok(render(status, content_type.as_deref(), &body, cut, &page))
    }

    /// A one-line explanation of a failed request: the tool's own reason when one of its checks
    /// refused (from the resolver or the redirect policy, deep in the error's sources).
    fn explain(&self, error: &reqwest::Error) -> String {
        let mut causes = Vec::new();
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(current) = cause {
            if let Some(Explained(why)) = current.downcast_ref::<Explained>() {
                return why.clone();
            }
            causes.push(current.to_string());
            cause = current.source();
        }
        if error.is_timeout() {
            return self.timed_out();
        }
        causes.dedup();
        format!("request failed: {}", causes.join(": ").replace('\n', " "))
    }

    fn timed_out(&self) -> String {
        format!("timeout: no complete answer within {} s", self.timeout.as_secs_f32())
    }
}

/// Runs `request` (everything one request does) with `port` as the port its host names are
/// resolved for, so an exact `ip:port` of [`AddressPolicy::allowed`] admits a host name that
/// resolves to it (a guarded client's resolver sees no port otherwise, and fails closed).
pub(crate) async fn with_target_port<F: Future>(port: u16, request: F) -> F::Output {
    address::scoped(port, request).await
}

/// GET unless the model asked for POST; a body only with POST.
fn method(args: &FetchArgs) -> std::result::Result<Method, Explained> {
    let method = match args.method.as_deref().map(str::trim) {
        None => Method::GET,
        Some(m) if m.eq_ignore_ascii_case("get") => Method::GET,
        Some(m) if m.eq_ignore_ascii_case("post") => Method::POST,
        Some(other) => {
            return Err(Explained(format!("method '{other}' is not supported: use GET or POST")));
        }
    };
    if method == Method::GET && args.body.is_some() {
        return Err(Explained("a body is sent with POST only; use method POST".into()));
    }
    Ok(method)
}

/// The model's headers, checked: valid names and values, none the client sets itself.
fn headers(given: Option<&BTreeMap<String, String>>) -> std::result::Result<HeaderMap, Explained> {
    let mut headers = HeaderMap::new();
    for (name, value) in given.into_iter().flatten() {
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| Explained(format!("'{name}' is not a valid header name")))?;
        if RESERVED_HEADERS.contains(&name.as_str()) {
            return Err(Explained(format!("header '{name}' is set by the tool; leave it out")));
        }
        let value = HeaderValue::from_str(value)
            .map_err(|_| Explained(format!("the value of header '{name}' is not valid")))?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// The body, read as it arrives up to [`MAX_BODY`] bytes; `true` when there was more.
async fn read_capped(mut response: Response) -> reqwest::Result<(Vec<u8>, bool)> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_BODY - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The text the model reads: status, content type, blank line, body.
fn render(
    status: reqwest::StatusCode,
    content_type: Option<&str>,
    body: &[u8],
    cut: bool,
    page: &Url,
) -> String {
    let reason = status.canonical_reason().unwrap_or("");
    let shown_type = content_type.unwrap_or("(none)");
    let mut text = format!("HTTP {} {reason}", status.as_str()).trim_end().to_owned();
    text.push_str(&format!("\nContent-Type: {shown_type}\n\n"));
    text.push_str(&body_text(content_type, body, page));
    if cut {
        text.push('\n');
        text.push_str(CUT_MARKER);
    }
    text
}

/// The body as readable text, or a line saying what binary content was left out.
fn body_text(content_type: Option<&str>, body: &[u8], page: &Url) -> String {
    let essence = content_type
        .and_then(|t| t.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if !is_textual(&essence, body) {
        let shown = if essence.is_empty() { "unknown" } else { &essence };
        return format!("[binary content of type {shown}, {} bytes, not shown]", body.len());
    }
    let text = String::from_utf8_lossy(body);
    if is_html(&essence, &text) { html::to_text(&text, page) } else { text.into_owned() }
}

/// Text types by name; without a type, a body with no NUL byte in its first KiB.
fn is_textual(essence: &str, body: &[u8]) -> bool {
    if essence.is_empty() {
        return !body.iter().take(1024).any(|&b| b == 0);
    }
    let (kind, subtype) = essence.split_once('/').unwrap_or((essence, ""));
    kind == "text"
        || subtype.ends_with("+json")
        || subtype.ends_with("+xml")
        || matches!(
            subtype,
            "json"
                | "xml"
                | "javascript"
                | "x-javascript"
                | "ecmascript"
                | "yaml"
                | "x-yaml"
                | "toml"
                | "csv"
                | "x-ndjson"
                | "x-www-form-urlencoded"
                | "graphql"
                | "sql"
        )
}

/// HTML by type, or by how the text starts.
fn is_html(essence: &str, text: &str) -> bool {
    if matches!(essence, "text/html" | "application/xhtml+xml") {
        return true;
    }
    let start = text.trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n']);
    let starts = |prefix: &str| {
        let head = start.as_bytes().get(..prefix.len());
        head.is_some_and(|head| head.eq_ignore_ascii_case(prefix.as_bytes()))
    };
    starts("<!doctype html") || starts("<html")
}
