//! `GET /metrics` in Prometheus' text format (version 0.0.4): the HTTP layer's own counts, and
//! the node's from [`agentcore::telemetry`]. Requests are labelled by route template, never by
//! raw path, so unknown paths cannot grow the label set.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;

use agentcore::telemetry::{
    Histogram, HistogramSnapshot, LATENCY_BUCKETS, Metrics, ModelCallMetrics,
};

use crate::AppState;
use crate::error::ApiError;

/// Requests answered, by route template, then method. Nested so that counting a request
/// looks its entry up by `&str` without allocating a key.
#[derive(Debug, Default)]
pub(crate) struct HttpMetrics {
    routes: RwLock<HashMap<String, HashMap<Method, Arc<RouteMetrics>>>>,
}

#[derive(Debug, Default)]
struct RouteMetrics {
    latency: Histogram,
    statuses: Mutex<BTreeMap<u16, u64>>,
}

impl HttpMetrics {
    fn entry(&self, route: &str, method: &Method) -> Arc<RouteMetrics> {
        if let Some(entry) =
            agentcore::sync::read(&self.routes).get(route).and_then(|methods| methods.get(method))
        {
            return entry.clone();
        }
        let mut routes = agentcore::sync::write(&self.routes);
        routes.entry(route.to_owned()).or_default().entry(method.clone()).or_default().clone()
    }
}

/// Middleware: counts each answer and its latency under its route template.
pub(crate) async fn count(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    let response = next.run(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let entry = state.http.metrics.entry(route, &method);
    entry.latency.observe(started.elapsed());
    *agentcore::sync::lock(&entry.statuses).entry(response.status().as_u16()).or_default() += 1;
    response
}

/// `GET /metrics`; with `http.metrics_token` set, only for `Authorization: Bearer <token>`.
#[utoipa::path(
    get, path = "/metrics", operation_id = "metrics", tag = "operations",
    security((), ("bearer" = [])),
    responses((status = 200, description = "Prometheus text format 0.0.4.",
               content_type = "text/plain; version=0.0.4", body = String))
)]
pub(crate) async fn show(State(state): State<AppState>, request: Request) -> Response {
    if let Some(token) = &state.http.config.metrics_token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        let expected = token.expose_secret().as_bytes();
        let matches = given.is_some_and(|given| {
            given.len() == expected.len()
                && given.bytes().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
        });
        if !matches {
            return ApiError::Core(agentcore::Error::Unauthorized).into_response();
        }
    }
    let node = match state.core.metrics().await {
        Ok(node) => node,
        Err(error) => return ApiError::Core(error).into_response(),
    };
    let mut text = String::with_capacity(8192);
    render_http(&mut text, &state.http.metrics);
    render_node(&mut text, &node);
    header(
        &mut text,
        "agentd_log_lines_dropped_total",
        "counter",
        "Log lines that could not be written (a full disk under the log, a closed pipe).",
    );
    let _ = writeln!(text, "agentd_log_lines_dropped_total {}", crate::logging::lines_dropped());
    render_spans(&mut text, crate::telemetry::span_counts());
    render_read_cache(&mut text, state.http.read_cache.counts());
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// The trace exporter's counts (all zero when the process does not trace).
fn render_spans(out: &mut String, spans: crate::telemetry::SpanCounts) {
    header(
        out,
        "agentd_trace_spans_exported_total",
        "counter",
        "Trace spans the OTLP collector accepted.",
    );
    let _ = writeln!(out, "agentd_trace_spans_exported_total {}", spans.exported);
    header(
        out,
        "agentd_trace_spans_dropped_total",
        "counter",
        "Trace spans dropped, by reason (queue_full: the collector slower than the spans; export_failed: the collector gone, refusing or too slow).",
    );
    for (reason, count) in
        [("queue_full", spans.queue_full), ("export_failed", spans.export_failed)]
    {
        let _ = writeln!(out, "agentd_trace_spans_dropped_total{{reason=\"{reason}\"}} {count}");
    }
}

/// The read cache's answers (`http.read_cache`; both zero when it is off).
fn render_read_cache(out: &mut String, (hits, misses): (u64, u64)) {
    header(
        out,
        "agentd_read_cache_answers_total",
        "counter",
        "Polled reads (the agent list and view) answered with the cache on, by whether a kept answer served (hit) or the database was read (miss).",
    );
    let _ = writeln!(out, "agentd_read_cache_answers_total{{result=\"hit\"}} {hits}");
    let _ = writeln!(out, "agentd_read_cache_answers_total{{result=\"miss\"}} {misses}");
}

fn render_http(out: &mut String, metrics: &HttpMetrics) {
    let mut routes: Vec<_> = agentcore::sync::read(&metrics.routes)
        .iter()
        .flat_map(|(route, methods)| {
            let entries = methods.iter();
            entries.map(|(method, entry)| (route.clone(), method.to_string(), entry.clone()))
        })
        .collect();
    routes.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    header(
        out,
        "agentd_http_requests_total",
        "counter",
        "HTTP requests answered, by route template, method and status.",
    );
    for (route, method, entry) in &routes {
        let statuses = agentcore::sync::lock(&entry.statuses);
        for (status, count) in statuses.iter() {
            let labels =
                format!("route=\"{}\",method=\"{method}\",status=\"{status}\"", escape(route));
            let _ = writeln!(out, "agentd_http_requests_total{{{labels}}} {count}");
        }
    }
    header(
        out,
        "agentd_http_request_duration_seconds",
        "histogram",
        "Time to answer HTTP requests, by route template and method.",
    );
    for (route, method, entry) in &routes {
        let labels = format!("route=\"{}\",method=\"{method}\"", escape(route));
        histogram(out, "agentd_http_request_duration_seconds", &labels, &entry.latency.snapshot());
    }
}

fn render_node(out: &mut String, node: &Metrics) {
    header(
        out,
        "agentd_tasks_total",
        "counter",
        "Tasks this node finished, by outcome (dropped: the task or its agent was gone; cancelled: its run was stopped by a cancel).",
    );
    for (outcome, count) in [
        ("completed", node.runtime.tasks_completed),
        ("failed", node.runtime.tasks_failed),
        ("dropped", node.runtime.results_dropped),
        ("cancelled", node.runtime.tasks_cancelled),
    ] {
        let _ = writeln!(out, "agentd_tasks_total{{outcome=\"{outcome}\"}} {count}");
    }
    header(
        out,
        "agentd_runs_interrupted_total",
        "counter",
        "Runs this node stopped because the database stayed out of reach for a read they needed; their tasks run again.",
    );
    let _ = writeln!(out, "agentd_runs_interrupted_total {}", node.runtime.runs_interrupted);
    header(
        out,
        "agentd_webhook_attempts_total",
        "counter",
        "Webhook delivery attempts this node made, by outcome (delivered: a 2xx answer).",
    );
    for (outcome, count) in
        [("delivered", node.webhooks.delivered), ("failed", node.webhooks.failed_attempts)]
    {
        let _ = writeln!(out, "agentd_webhook_attempts_total{{outcome=\"{outcome}\"}} {count}");
    }
    header(
        out,
        "agentd_webhook_deliveries_failed_total",
        "counter",
        "Webhook deliveries this node gave up on after the last attempt of the schedule.",
    );
    let _ =
        writeln!(out, "agentd_webhook_deliveries_failed_total {}", node.webhooks.failed_deliveries);
    gauge(
        out,
        "agentd_agents_running",
        "Active agents this node runs now.",
        node.runtime.agents_running,
    );
    gauge(
        out,
        "agentd_task_adds_waiting",
        "Adds to backlogs waiting on this node for their agent's adds in flight, to be committed together next (PostgreSQL).",
        node.adds_waiting,
    );
    gauge(
        out,
        "agentd_audit_entries_waiting",
        "Audit entries waiting on this node for their workspace's entries in flight, to be committed together next (PostgreSQL).",
        node.audit_entries_waiting,
    );
    gauge(
        out,
        "agentd_task_finishes_waiting",
        "Finished tasks waiting on this node for a transaction of finishes in flight, to be committed together next.",
        node.finishes_waiting,
    );
    header(
        out,
        "agentd_task_finish_transactions_total",
        "counter",
        "Transactions of finished tasks this node committed (finishes waiting meanwhile share the next).",
    );
    let _ = writeln!(out, "agentd_task_finish_transactions_total {}", node.finish_transactions);
    let backlog = [
        (
            "agentd_tasks_queued",
            "Tasks waiting in every backlog (queue depth, all nodes).",
            node.queued_tasks,
        ),
        ("agentd_tasks_in_progress", "Tasks being worked on (all nodes).", node.tasks_in_progress),
        (
            "agentd_outbox_pending",
            "Discord posts not yet delivered (all nodes).",
            node.outbox_pending,
        ),
    ];
    // Left out while the database cannot be read, rather than reported as zero.
    for (name, help, value) in backlog {
        if let Some(value) = value {
            gauge(out, name, help, value);
        }
    }
    header(
        out,
        "agentd_storage_faults_total",
        "counter",
        "Writes the database refused for a storage fault (full: no disk space; unavailable: unreachable, restarting or locked).",
    );
    for (kind, count) in
        [("full", node.storage_faults.full), ("unavailable", node.storage_faults.unavailable)]
    {
        let _ = writeln!(out, "agentd_storage_faults_total{{kind=\"{kind}\"}} {count}");
    }
    if let Some(skew) = node.clock_skew_seconds {
        gauge(
            out,
            "agentd_clock_skew_seconds",
            "This node's clock minus the database's (positive: ahead), measured every 5 minutes.",
            skew,
        );
    }
    gauge(
        out,
        "agentd_storage_writable",
        "1 while writes to the database work, 0 from a refused write until one succeeds.",
        u8::from(node.storage_fault.is_none()),
    );
    header(
        out,
        "agentd_model_call_duration_seconds",
        "histogram",
        "Model calls by provider, answered or failed.",
    );
    for calls in &node.model_calls {
        histogram(
            out,
            "agentd_model_call_duration_seconds",
            &format!("provider=\"{}\"", calls.provider),
            &calls.latency,
        );
    }
    header(
        out,
        "agentd_model_call_errors_total",
        "counter",
        "Failed model calls by provider and kind (transient: retried; permanent: the task fails).",
    );
    for calls in &node.model_calls {
        for (kind, count) in
            [("transient", calls.transient_errors), ("permanent", calls.permanent_errors)]
        {
            let _ = writeln!(
                out,
                "agentd_model_call_errors_total{{provider=\"{}\",kind=\"{kind}\"}} {count}",
                calls.provider
            );
        }
    }
    per_provider(
        out,
        "agentd_model_rate_limit_waits_total",
        "Model calls that waited for their provider's shared rate limit (models.rate_limits).",
        node,
        |calls| calls.rate_waits,
    );
    per_provider(
        out,
        "agentd_model_rate_limit_wait_seconds_total",
        "Seconds model calls waited for their provider's shared rate limit.",
        node,
        |calls| calls.rate_wait_seconds,
    );
    model_health(out, node);
    model_costs(out, &node.model_costs);
    mcp_calls(out, &node.mcp_calls);
    header(out, "agentd_discord_rate_limited_total", "counter", "429 answers from Discord.");
    let _ = writeln!(out, "agentd_discord_rate_limited_total {}", node.discord_rate_limited);
    header(
        out,
        "agentd_trigger_calls_total",
        "counter",
        "Calls to triggers (POST /hooks/{id}) by outcome: accepted or duplicate, else refused \
         (not_found, too_large, invalid_signature, bad_body, disabled, limited, failed).",
    );
    for (outcome, count) in &node.trigger_calls {
        let _ =
            writeln!(out, "agentd_trigger_calls_total{{outcome=\"{}\"}} {count}", outcome.as_str());
    }
}

/// Models in cool-down (shared by every node), and the calls this node skipped for it.
fn model_health(out: &mut String, node: &Metrics) {
    header(
        out,
        "agentd_model_cooldown",
        "gauge",
        "1 while a model is cooling down for every agent (calls skip to their fallback), else 0; \
         model=\"other\" counts those beyond the 20 no setting names.",
    );
    for (model, cooling) in &node.model_cooldowns {
        let _ = writeln!(out, "agentd_model_cooldown{{model=\"{}\"}} {cooling}", escape(model));
    }
    per_provider(
        out,
        "agentd_model_calls_skipped_total",
        "Calls not sent to a model of the provider: it was cooling down or being probed.",
        node,
        |calls| calls.cooldown_skips,
    );
}

/// What answered model calls cost, by priced model (and `unpriced`).
fn model_costs(out: &mut String, costs: &[agentcore::telemetry::ModelCost]) {
    header(
        out,
        "agentd_model_cost_usd_total",
        "counter",
        "Dollars spent on answered model calls by model (its price from models.prices; \
         model=\"unpriced\": calls of models without a price, counted at 0).",
    );
    for cost in costs {
        let usd = cost.micros as f64 / 1e6;
        let _ = writeln!(out, "agentd_model_cost_usd_total{{model=\"{}\"}} {usd}", cost.model);
    }
    header(out, "agentd_model_priced_calls_total", "counter", "Answered model calls by model.");
    for cost in costs {
        let _ = writeln!(
            out,
            "agentd_model_priced_calls_total{{model=\"{}\"}} {}",
            cost.model, cost.calls
        );
    }
}

/// MCP tool calls by operator server (its name, `origin="operator"`), and of all users'
/// servers together (`origin="user"`, no name: a tenant's names stay out of public metrics).
fn mcp_calls(out: &mut String, servers: &[agentcore::mcp::McpCallMetrics]) {
    let labels = |s: &agentcore::mcp::McpCallMetrics| match &s.server {
        Some(name) => format!("server=\"{}\",origin=\"{}\"", name, s.origin.as_str()),
        None => format!("origin=\"{}\"", s.origin.as_str()),
    };
    header(out, "agentd_mcp_calls_total", "counter", "MCP tool calls by server.");
    for server in servers {
        let _ = writeln!(out, "agentd_mcp_calls_total{{{}}} {}", labels(server), server.calls);
    }
    header(
        out,
        "agentd_mcp_call_errors_total",
        "counter",
        "MCP tool calls that ended in an error (refused, failed, timed out, unreachable).",
    );
    for server in servers {
        let _ =
            writeln!(out, "agentd_mcp_call_errors_total{{{}}} {}", labels(server), server.errors);
    }
    header(out, "agentd_mcp_call_duration_seconds", "histogram", "MCP tool calls by server.");
    for server in servers {
        histogram(out, "agentd_mcp_call_duration_seconds", &labels(server), &server.latency);
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A counter with one line per model provider, `value` of its calls.
fn per_provider<D: std::fmt::Display>(
    out: &mut String,
    name: &str,
    help: &str,
    node: &Metrics,
    value: impl Fn(&ModelCallMetrics) -> D,
) {
    header(out, name, "counter", help);
    for calls in &node.model_calls {
        let _ = writeln!(out, "{name}{{provider=\"{}\"}} {}", calls.provider, value(calls));
    }
}

fn gauge(out: &mut String, name: &str, help: &str, value: impl std::fmt::Display) {
    header(out, name, "gauge", help);
    let _ = writeln!(out, "{name} {value}");
}

fn histogram(out: &mut String, name: &str, labels: &str, snapshot: &HistogramSnapshot) {
    let bounds = LATENCY_BUCKETS.iter().map(f64::to_string).chain(["+Inf".to_owned()]);
    for (bound, count) in bounds.zip(&snapshot.cumulative) {
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {count}");
    }
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", snapshot.sum_seconds);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", snapshot.count());
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
