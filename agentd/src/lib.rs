//! `agentd`: the agent service over HTTP.
//!
//! [`router`] builds the axum application from an [`AppState`]; [`serve`] runs it on a bound
//! listener until a shutdown future completes. Tests start it in-process on port 0; the binary
//! adds configuration, logging and signal handling around the same two functions.

pub mod cli;
pub mod config;
pub mod error;
mod extract;
pub mod request_id;
mod routes;

use std::future::Future;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::response::IntoResponse;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use agentcore::Core;

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    pub core: Core,
}

/// The whole HTTP application.
pub fn router(state: AppState) -> Router {
    routes::routes()
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
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
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        .layer(CatchPanicLayer::custom(|_: Box<dyn std::any::Any + Send>| {
            tracing::error!("a request handler panicked");
            error::ApiError::Core(agentcore::Error::internal("handler panicked")).into_response()
        }))
        .layer(axum::middleware::from_fn(request_id::assign))
        .with_state(state)
}

/// Serves `router(state)` on `listener`, runs the agents and delivers their posts until
/// `shutdown` completes. Then it stops taking requests and tasks, lets requests and tasks in
/// flight finish (tasks within the runtime's grace period), gives back its leases and stops the
/// delivery.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let outbox = state.core.start_outbox();
    let runtime = state.core.start_runtime();
    let stop_claiming = runtime.stopper();
    let served = axum::serve(listener, router(state))
        .with_graceful_shutdown(async move {
            shutdown.await;
            stop_claiming.stop();
        })
        .await;
    runtime.shutdown().await;
    outbox.shutdown().await;
    served
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("Ctrl-C received, shutting down"),
        () = terminate => tracing::info!("SIGTERM received, shutting down"),
    }
}
