//! `agentd`: the agent service over HTTP.
//!
//! [`router`] builds the axum application from an [`AppState`]; [`serve`] runs it on a bound
//! listener until a shutdown future completes. Tests start it in-process on port 0; the binary
//! adds configuration, logging and signal handling around the same two functions.

mod access_log;
mod backup;
pub mod cli;
pub mod config;
pub mod error;
mod etag;
mod extract;
mod limits;
mod logging;
mod metrics;
pub mod openapi;
mod read_cache;
pub mod request_id;
mod routes;
mod sse;
mod telemetry;
mod ui;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tower::ServiceExt;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use agentcore::Core;

use crate::config::{HttpConfig, LimitsConfig};
use crate::error::ApiError;

/// The request-body decoder every JSON route uses (public for the fuzz targets).
pub use crate::extract::decode as decode_json_body;

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    pub core: Core,
    pub(crate) http: Arc<Http>,
}

/// The HTTP layer's settings and its abuse limits' state.
#[derive(Debug)]
pub(crate) struct Http {
    config: HttpConfig,
    limits: limits::Limits,
    /// The access log's queue, when `http.access_log` is on.
    access_log: Option<access_log::AccessLog>,
    metrics: metrics::HttpMetrics,
    /// The polled reads' answers (`http.read_cache`).
    read_cache: read_cache::ReadCache,
}

impl AppState {
    /// The service over `core` with the default HTTP settings and limits.
    pub fn new(core: Core) -> Self {
        Self::configured(core, HttpConfig::default(), LimitsConfig::default())
    }

    pub fn configured(core: Core, http: HttpConfig, limits: LimitsConfig) -> Self {
        let limits = limits::Limits::new(limits, http.trust_forwarded_for);
        let metrics = metrics::HttpMetrics::default();
        let access_log = http.access_log.then(|| access_log::AccessLog::start(http.log_json));
        let read_cache = read_cache::ReadCache::new(http.read_cache);
        let http = Http { config: http, limits, access_log, metrics, read_cache };
        Self { core, http: Arc::new(http) }
    }
}

/// The whole HTTP application.
pub fn router(state: AppState) -> Router {
    let http = &state.http.config;
    let router = routes::routes(&state)
        .layer(axum::middleware::from_fn(etag::conditional))
        .layer(DefaultBodyLimit::max(http.body_limit_bytes))
        .layer(axum::middleware::from_fn_with_state(state.clone(), deadline))
        // Outside the deadline: a write it cuts off moves the read cache's generation too (one
        // that commits later still is bounded by the cache's age).
        .layer(axum::middleware::from_fn_with_state(state.clone(), read_cache::note_writes))
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::count))
        .layer(axum::middleware::from_fn(telemetry::request_span))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &Request| {
                    let route = request
                        .extensions()
                        .get::<MatchedPath>()
                        .map_or(request.uri().path(), MatchedPath::as_str);
                    let request_id = request
                        .headers()
                        .get(request_id::HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    tracing::info_span!("request", method = %request.method(), route, request_id)
                })
                // A line per request written on the serving thread cost a quarter of the
                // simplest request's time with the log on a terminal: at DEBUG only.
                // `http.access_log` writes one off the serving threads (`access_log`).
                .on_response(DefaultOnResponse::new().level(Level::DEBUG)),
        )
        .layer(CatchPanicLayer::custom(|_: Box<dyn std::any::Any + Send>| {
            tracing::error!("a request handler panicked");
            error::ApiError::Core(agentcore::Error::internal("handler panicked")).into_response()
        }));
    // Outside the deadline and the panic catcher, so a 408 and a 500 are logged too.
    let router = match &state.http.access_log {
        Some(_) => {
            router.layer(axum::middleware::from_fn_with_state(state.clone(), access_log::record))
        }
        None => router,
    };
    let router = router.layer(axum::middleware::from_fn(request_id::assign));
    // Around every layer that can answer an error, so a browser never gets JSON.
    let router = if http.ui {
        router.layer(axum::middleware::from_fn_with_state(state.clone(), ui::errors_as_pages))
    } else {
        router
    };
    let router = match cors(&http.cors_origins) {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router.layer(axum::middleware::map_response(nosniff)).with_state(state)
}

/// `X-Content-Type-Options: nosniff` on every answer (the API's, the dashboard's, the errors of
/// every layer), so a browser never reads a JSON or text body as a page or a script.
async fn nosniff(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// Answers 408 for a request that outlives `http.request_timeout_seconds` (a slow body
/// included), so a client cannot hold a handler forever.
async fn deadline(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limit = state.http.config.request_timeout;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::Timeout.into_response(),
    }
}

/// CORS for the configured origins; none configured, none sent (browsers then refuse
/// cross-origin calls, the safe default).
fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    let request_id = HeaderName::from_static(request_id::HEADER);
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::IF_NONE_MATCH,
                request_id.clone(),
            ])
            .expose_headers([request_id, header::RETRY_AFTER, header::ETAG])
            .max_age(std::time::Duration::from_secs(3600)),
    )
}

/// Serves `router(state)` on `listener`, runs the agents and delivers their posts until
/// `shutdown` completes. Then it stops taking requests and tasks, lets requests and tasks in
/// flight finish (tasks within the runtime's grace period), gives back its leases and stops the
/// delivery.
///
/// Connections are served by hyper directly rather than `axum::serve`, which has no timer and
/// so would wait forever for a client that sends its headers a byte at a time: here headers
/// must arrive within `http.request_timeout_seconds`, and the rest of the request is bounded
/// by the same deadline in the router.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let outbox = agentcore::OutboxWorker::start(&state.core);
    let runtime = agentcore::Runtime::start(&state.core);
    let webhooks = agentcore::WebhookWorker::start(&state.core);
    let header_timeout = state.http.config.request_timeout;
    let core = state.core.clone();
    let app = router(state);
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, most likely: give connections time to close.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let mut request = request.map(axum::body::Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            app.clone().oneshot(request)
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(stream), service);
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        });
    }
    runtime.stopper().stop();
    drop(listener);
    // Event streams never end by themselves: they end here, so the drain below does not wait.
    core.close_event_streams();
    connections.shutdown().await;
    runtime.shutdown().await;
    webhooks.shutdown().await;
    outbox.shutdown().await;
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM. The handlers are installed when this is called, not when
/// the future is first polled: a signal that arrives while the server is already answering
/// (before its accept loop got round to polling the future) must not meet the default action,
/// which kills the process.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let (interrupt, terminate) = {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &'static str| match signal(kind) {
            Ok(signal) => Some(signal),
            Err(error) => {
                tracing::error!(%error, "cannot listen for {name}");
                None
            }
        };
        (listen(SignalKind::interrupt(), "Ctrl-C"), listen(SignalKind::terminate(), "SIGTERM"))
    };
    async move {
        #[cfg(unix)]
        {
            let wait = |signal: Option<tokio::signal::unix::Signal>| async move {
                match signal {
                    Some(mut signal) => drop(signal.recv().await),
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = wait(interrupt) => tracing::info!("Ctrl-C received, shutting down"),
                () = wait(terminate) => tracing::info!("SIGTERM received, shutting down"),
            }
        }
        #[cfg(not(unix))]
        {
            if let Err(error) = tokio::signal::ctrl_c().await {
                tracing::error!(%error, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await;
            }
            tracing::info!("Ctrl-C received, shutting down");
        }
    }
}
