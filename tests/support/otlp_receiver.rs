//! A trace collector speaking OTLP over HTTP/protobuf (`POST /v1/traces`): each request's body
//! decoded with the official protobuf definitions (`opentelemetry-proto`), its spans recorded
//! with the resource that sent them. A body that does not decode is answered 400 and counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;

/// One span as received.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// Lower-case hex, as W3C's `traceparent` writes them.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// Every attribute, its value as text (arrays as `a,b`).
    pub attributes: HashMap<String, String>,
    /// The names of its events, in order, each with its attributes.
    pub events: Vec<(String, HashMap<String, String>)>,
    /// OTLP's status code: 0 unset, 1 ok, 2 error.
    pub status: i32,
    /// The resource's `service.name`.
    pub service: String,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

#[derive(Debug, Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    requests: usize,
    undecodable: usize,
    content_types: Vec<String>,
}

#[derive(Clone)]
pub struct OtlpReceiver {
    /// `http://127.0.0.1:<port>`: what `OTEL_EXPORTER_OTLP_ENDPOINT` names.
    pub endpoint: String,
    state: Arc<Mutex<Received>>,
}

impl OtlpReceiver {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(Received::default()));
        let app = Router::new().route("/v1/traces", post(receive)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { endpoint, state }
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.state.lock().unwrap().spans.clone()
    }

    /// Spans named `name` (their OpenTelemetry name: `chat gpt-test`, ...).
    pub fn named(&self, name: &str) -> Vec<ReceivedSpan> {
        self.spans().into_iter().filter(|s| s.name == name).collect()
    }

    /// Spans whose name starts with `prefix`.
    pub fn starting(&self, prefix: &str) -> Vec<ReceivedSpan> {
        self.spans().into_iter().filter(|s| s.name.starts_with(prefix)).collect()
    }

    /// Requests received, and those whose body was not an `ExportTraceServiceRequest`.
    pub fn requests(&self) -> (usize, usize) {
        let state = self.state.lock().unwrap();
        (state.requests, state.undecodable)
    }

    pub fn content_types(&self) -> Vec<String> {
        self.state.lock().unwrap().content_types.clone()
    }
}

async fn receive(
    State(state): State<Arc<Mutex<Received>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let decoded = ExportTraceServiceRequest::decode(body);
    let mut state = state.lock().unwrap();
    state.requests += 1;
    state.content_types.push(content_type);
    let Ok(request) = decoded else {
        state.undecodable += 1;
        return StatusCode::BAD_REQUEST.into_response();
    };
    for resource_spans in request.resource_spans {
        let resource =
            resource_spans.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                let status = span.status.map_or(0, |s| s.code);
                state.spans.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name,
                    attributes: attributes(&span.attributes),
                    events: span
                        .events
                        .iter()
                        .map(|e| (e.name.clone(), attributes(&e.attributes)))
                        .collect(),
                    status,
                    service: service.clone(),
                });
            }
        }
    }
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    ([(header::CONTENT_TYPE, "application/x-protobuf")], answer).into_response()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(list: &[KeyValue]) -> HashMap<String, String> {
    list.iter()
        .map(|kv| (kv.key.clone(), kv.value.as_ref().map(text).unwrap_or_default()))
        .collect()
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::ArrayValue(array)) => {
            array.values.iter().map(text).collect::<Vec<_>>().join(",")
        }
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
