//! Where `tracing` spans meet OpenTelemetry: a span's context as a task stores it
//! ([`TraceContext`]), and a run's span continuing the stored one. Only the API crates: the
//! program that installs a subscriber (agentd) chooses the SDK and the exporter, and without
//! its OpenTelemetry layer both functions do nothing.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::domain::trace::TraceContext;

/// The target of the spans made for traces only (a run's, a request's, a schedule's look): a
/// program exports spans of this target and leaves them out of its log, whose lines carry
/// their own fields.
pub const TARGET: &str = "agentcore::otel";

/// The current span's trace and span id, when an OpenTelemetry layer records it (the
/// OpenTelemetry context the layer keeps current as its spans are entered).
pub fn current() -> Option<TraceContext> {
    let context = opentelemetry::Context::current();
    let span = context.span();
    let ids = span.span_context();
    if !ids.is_valid() {
        return None;
    }
    TraceContext::parse(&ids.trace_id().to_string(), &ids.span_id().to_string())
}

/// Makes `span` (not entered yet) a child of the stored `trace`'s span, so each run of a task
/// joins the trace it was added in. Sampled: the runs of a task are kept whatever the request
/// that added it asked for.
pub fn continue_trace(span: &tracing::Span, trace: &TraceContext) {
    let (Ok(trace_id), Ok(span_id)) =
        (TraceId::from_hex(trace.trace_id()), SpanId::from_hex(trace.parent_span_id()))
    else {
        return;
    };
    let parent = SpanContext::new(trace_id, span_id, TraceFlags::SAMPLED, true, TraceState::NONE);
    // Refused only without an OpenTelemetry layer (nothing to continue) or once the span
    // started, which a new span has not.
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
}
