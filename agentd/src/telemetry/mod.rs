//! Traces over OTLP: the OpenTelemetry layer of the process's subscriber, configured by the
//! standard `OTEL_*` variables and off unless an endpoint is named.
//!
//! The spans are the request spans (`lib.rs`, continuing a caller's `traceparent`) and the
//! runs' (`agentcore::workers::runtime::trace`). Finished spans go to a bounded queue
//! ([`queue`]) that a task exports in batches over HTTP/protobuf with the service's own reqwest
//! client ([`client`]); a slow or absent collector costs dropped spans (counted in
//! `/metrics`), never a run's time.

mod client;
mod queue;
mod settings;

use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Instrument as _;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

pub(crate) use queue::{SpanCounts, span_counts};
pub(crate) use settings::{Settings, SettingsError, capture_content};

/// The exporter, made before the async runtime starts (the subscriber is installed first);
/// its export task starts with [`Tracing::start`].
#[derive(Debug)]
pub(crate) struct Tracing {
    provider: SdkTracerProvider,
    export: queue::Export,
}

/// The running export task, to be flushed on shutdown.
#[derive(Debug)]
pub(crate) struct Exporting {
    provider: SdkTracerProvider,
    running: queue::Running,
}

impl Tracing {
    /// The provider and its queue, or why the settings cannot make one.
    pub(crate) fn new(settings: &Settings) -> Result<Self, SettingsError> {
        agentcore::install_tls_provider();
        let client = client::ReqwestClient::new(settings.timeout)?;
        let exporter = {
            use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_timeout(settings.timeout)
                .with_http_client(client)
                .build()
                .map_err(|error| {
                    SettingsError(format!("cannot build the OTLP exporter: {error}"))
                })?
        };
        let mut resource = Resource::builder();
        if !settings.names_service {
            resource = resource.with_service_name("agentd");
        }
        let resource = resource
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        let (processor, export) = queue::channel(&settings.batch, exporter, &resource);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource)
            .build();
        Ok(Self { provider, export })
    }

    /// The tracer the subscriber's OpenTelemetry layer records with.
    pub(crate) fn tracer(&self) -> opentelemetry_sdk::trace::Tracer {
        self.provider.tracer("agentd")
    }

    /// Starts exporting (inside the async runtime).
    pub(crate) fn start(self) -> Exporting {
        Exporting { provider: self.provider, running: self.export.start() }
    }
}

impl Exporting {
    /// Exports what is queued, for at most `within`, and stops.
    pub(crate) async fn shutdown(self, within: Duration) {
        self.running.flush_and_stop(within).await;
        // The processor holds nothing more: the provider's own shutdown only marks it shut.
        let _ = self.provider.shutdown_with_timeout(within);
    }
}

/// Middleware: the request's trace span (`<method> <route>`, kind server), a child of the
/// caller's W3C `traceparent` when it sent a valid one. A span of its own beside the log's
/// `request` span, so the log's lines keep their fields and the trace gets the conventions'
/// (see [`agentcore::otel::TARGET`]).
pub(crate) async fn request_span(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let method = request.method().as_str().to_owned();
    let span = tracing::info_span!(
        target: agentcore::otel::TARGET,
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    );
    if span.is_disabled() {
        return next.run(request).await;
    }
    if request.headers().contains_key("traceparent") {
        let caller = TraceContextPropagator::new()
            .extract(&opentelemetry_http::HeaderExtractor(request.headers()));
        let _ = span.set_parent(caller);
    }
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("http.response.status_code", i64::from(status));
    if status >= 500 {
        span.record("error.type", status.to_string().as_str());
        span.record("otel.status_code", "ERROR");
    }
    response
}
