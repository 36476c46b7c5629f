//! One client, two transports: a running `agentd` over HTTP, or the service in this process.
//!
//! Local mode opens the database with `agentcore` and sends each request through `agentd`'s
//! router in process (no socket, no server): the same validation, the same answers and the
//! same error bodies as a server, so every command prints the same bytes in both modes.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode, header};
use futures_util::StreamExt as _;
use serde_json::Value;
use tower::ServiceExt;

use agentcore::Core;

use crate::failure::Failure;

/// Bodies the in-process router may answer; far above anything the service sends.
const MAX_LOCAL_BODY: usize = 64 * 1024 * 1024;

/// A stream that sends nothing, not even its 15-second keep-alive, for this long is dead.
const STREAM_SILENCE: Duration = Duration::from_secs(45);

/// The header naming the workspace a request acts in (its id).
const WORKSPACE_HEADER: &str = "X-Workspace";

/// Who a request is from and where it acts: the bearer token and the workspace id, if any.
#[derive(Debug, Clone, Copy)]
struct Caller<'a> {
    token: Option<&'a str>,
    workspace: Option<&'a str>,
}

#[derive(Debug, Clone)]
pub enum Transport {
    Remote {
        base: String,
        http: reqwest::Client,
        /// For event streams: no overall deadline, a deadline per read instead.
        streams: reqwest::Client,
    },
    Local {
        core: Core,
        router: axum::Router,
    },
}

impl Transport {
    pub fn remote(base: &str) -> Result<Self, Failure> {
        let user_agent = concat!("agentctl/", env!("CARGO_PKG_VERSION"));
        let built = |builder: reqwest::ClientBuilder| {
            builder
                .user_agent(user_agent)
                .build()
                .map_err(|e| Failure::network(format!("cannot build the HTTP client: {e}")))
        };
        let http = built(reqwest::Client::builder().timeout(Duration::from_secs(60)))?;
        let streams = built(
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .read_timeout(STREAM_SILENCE),
        )?;
        Ok(Transport::Remote { base: base.trim_end_matches('/').to_owned(), http, streams })
    }

    pub fn local(core: Core) -> Self {
        let router = agentd::router(agentd::AppState::new(core.clone()));
        Transport::Local { core, router }
    }

    /// Where requests go, for messages.
    pub fn describe(&self) -> String {
        match self {
            Transport::Remote { base, .. } => base.clone(),
            Transport::Local { core, .. } => format!("the local {} database", core.backend()),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        caller: Caller<'_>,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Vec<u8>), Failure> {
        match self {
            Transport::Remote { base, http, .. } => {
                let method = reqwest::Method::from_bytes(method.as_str().as_bytes())
                    .map_err(|e| Failure::network(e.to_string()))?;
                let mut request = http.request(method, format!("{base}{path}"));
                if let Some(token) = caller.token {
                    request = request.bearer_auth(token);
                }
                if let Some(workspace) = caller.workspace {
                    request = request.header(WORKSPACE_HEADER, workspace);
                }
                if let Some(body) = body {
                    request = request.json(body);
                }
                let response = request.send().await.map_err(|e| {
                    Failure::network(format!(
                        "cannot reach the server at {base}: {}",
                        root_cause(&e)
                    ))
                })?;
                let status = StatusCode::from_u16(response.status().as_u16())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let bytes = response
                    .bytes()
                    .await
                    .map_err(|e| Failure::network(format!("the answer was cut off: {e}")))?;
                Ok((status, bytes.to_vec()))
            }
            Transport::Local { router, .. } => {
                let mut request = Request::builder().method(method).uri(path);
                if let Some(token) = caller.token {
                    request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
                }
                if let Some(workspace) = caller.workspace {
                    request = request.header(WORKSPACE_HEADER, workspace);
                }
                let payload = match body {
                    Some(body) => {
                        request = request.header(header::CONTENT_TYPE, "application/json");
                        Body::from(serde_json::to_vec(body).map_err(Failure::internal)?)
                    }
                    None => Body::empty(),
                };
                let request = request.body(payload).map_err(Failure::internal)?;
                let response = router.clone().oneshot(request).await.map_err(Failure::internal)?;
                let status = response.status();
                let bytes = axum::body::to_bytes(response.into_body(), MAX_LOCAL_BODY)
                    .await
                    .map_err(Failure::internal)?;
                Ok((status, bytes.to_vec()))
            }
        }
    }

    /// Opens a `GET` whose answer streams (Server-Sent Events), sending `Last-Event-ID` when
    /// given: its status, and its body to read as it comes.
    async fn open(
        &self,
        path: &str,
        caller: Caller<'_>,
        last_event_id: Option<i64>,
    ) -> Result<(StatusCode, Incoming), Failure> {
        match self {
            Transport::Remote { base, streams, .. } => {
                let mut request = streams
                    .get(format!("{base}{path}"))
                    .header(reqwest::header::ACCEPT, "text/event-stream");
                if let Some(token) = caller.token {
                    request = request.bearer_auth(token);
                }
                if let Some(workspace) = caller.workspace {
                    request = request.header(WORKSPACE_HEADER, workspace);
                }
                if let Some(id) = last_event_id {
                    request = request.header("Last-Event-ID", id.to_string());
                }
                let response = request.send().await.map_err(|e| {
                    Failure::network(format!(
                        "cannot reach the server at {base}: {}",
                        root_cause(&e)
                    ))
                })?;
                let status = StatusCode::from_u16(response.status().as_u16())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                Ok((status, Incoming::Remote(response)))
            }
            Transport::Local { router, .. } => {
                let mut request = Request::builder()
                    .method(Method::GET)
                    .uri(path)
                    .header(header::ACCEPT, "text/event-stream");
                if let Some(token) = caller.token {
                    request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
                }
                if let Some(workspace) = caller.workspace {
                    request = request.header(WORKSPACE_HEADER, workspace);
                }
                if let Some(id) = last_event_id {
                    request = request.header("last-event-id", id.to_string());
                }
                let request = request.body(Body::empty()).map_err(Failure::internal)?;
                let response = router.clone().oneshot(request).await.map_err(Failure::internal)?;
                let status = response.status();
                Ok((status, Incoming::Local(response.into_body().into_data_stream())))
            }
        }
    }

    /// Closes the local database pool; a no-op remotely.
    pub async fn close(&self) {
        if let Transport::Local { core, .. } = self {
            core.close().await;
        }
    }
}

/// The transport with the caller's token, if any, and the workspace its requests act in.
#[derive(Debug, Clone)]
pub struct Client {
    pub transport: Transport,
    /// A session token or an API key (`agk_...`).
    pub token: Option<String>,
    /// The workspace id sent as `X-Workspace`; `None`: the caller's personal workspace (an API
    /// key's own).
    pub workspace: Option<String>,
}

impl Client {
    fn caller(&self) -> Caller<'_> {
        Caller { token: self.token.as_deref(), workspace: self.workspace.as_deref() }
    }

    /// Sends a request and returns the service's JSON answer, or the failure its error body
    /// describes.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Answer, Failure> {
        let (status, bytes) =
            self.transport.send(method, path, self.caller(), body.as_ref()).await?;
        let value = self.json(status, &bytes)?;
        if !status.is_success() {
            return Err(Failure::from_response(status, &value));
        }
        Ok(Answer { raw: String::from_utf8_lossy(&bytes).into_owned(), value })
    }

    /// Opens an event stream at `path` (after `last_event_id`, when given); a refusal is the
    /// failure its error body describes.
    pub async fn stream(
        &self,
        path: &str,
        last_event_id: Option<i64>,
    ) -> Result<Incoming, Failure> {
        let (status, mut incoming) =
            self.transport.open(path, self.caller(), last_event_id).await?;
        if status.is_success() {
            return Ok(incoming);
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = incoming.chunk().await? {
            bytes.extend_from_slice(&chunk);
        }
        Err(Failure::from_response(status, &self.json(status, &bytes)?))
    }

    fn json(&self, status: StatusCode, bytes: &[u8]) -> Result<Value, Failure> {
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(bytes).map_err(|_| {
            Failure::network(format!(
                "{} answered {status} with a body that is not JSON; is it an agentd server?",
                self.transport.describe()
            ))
        })
    }
}

/// A streaming answer's body, read as it arrives (never collected whole).
pub enum Incoming {
    Remote(reqwest::Response),
    Local(axum::body::BodyDataStream),
}

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Incoming::Remote(response) => f.debug_tuple("Remote").field(response).finish(),
            Incoming::Local(_) => f.write_str("Local(..)"),
        }
    }
}

impl Incoming {
    /// The next piece of the body; `None` once it ended.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Failure> {
        match self {
            Incoming::Remote(response) => response
                .chunk()
                .await
                .map_err(|e| Failure::network(format!("the stream broke: {}", root_cause(&e)))),
            Incoming::Local(body) => match body.next().await {
                None => Ok(None),
                Some(Ok(bytes)) => Ok(Some(bytes)),
                Some(Err(e)) => Err(Failure::network(format!("the stream broke: {e}"))),
            },
        }
    }
}

/// A successful answer: the body as the service sent it, and parsed.
#[derive(Debug, Clone)]
pub struct Answer {
    pub raw: String,
    pub value: Value,
}

/// A path segment, percent-encoded.
pub fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
