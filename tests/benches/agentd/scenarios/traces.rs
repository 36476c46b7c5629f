//! Section 11: the runtime's speed with traces exported to a live collector and to a dead one
//! (a closed port), against no exporter: export must not slow a run.

use super::*;
use crate::otlp_receiver::OtlpReceiver;
use support::closed_port::ClosedPort;

const AGENTS: usize = 100;
const TASKS: usize = 20;

/// What the process exports to.
#[derive(Clone, Copy)]
enum Collector {
    None,
    Live,
    Dead,
}

pub(crate) async fn traces(backend: Backend, report: &mut Report) {
    let label = name(backend);
    let mut baseline = None;
    for collector in [Collector::None, Collector::Live, Collector::Dead] {
        let receiver = OtlpReceiver::start().await;
        let refusing = ClosedPort::new();
        let mut env = Vec::new();
        let what = match collector {
            Collector::None => "none",
            Collector::Live => {
                env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.clone()));
                "live receiver"
            }
            Collector::Dead => {
                let closed = format!("http://{}", refusing.address());
                env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", closed));
                "dead receiver (closed port)"
            }
        };
        env.push(("OTEL_BSP_SCHEDULE_DELAY", "200".into()));
        let server = Agentd::start(fresh(backend).await, &env).await;
        let token = server.register(EMAIL).await;
        agents(&server, &token, "traced", AGENTS, TASKS, json!({})).await;
        let (seconds, rate, _) =
            started_rate(&server, &token, "traced", AGENTS, AGENTS * TASKS).await;
        let of = *baseline.get_or_insert(rate);
        let exported = server.metric("agentd_trace_spans_exported_total").await;
        let dropped =
            server.metric("agentd_trace_spans_dropped_total{reason=\"queue_full\"}").await
                + server.metric("agentd_trace_spans_dropped_total{reason=\"export_failed\"}").await;
        report.row(
            Section::Traces,
            vec![
                what.into(),
                label.into(),
                (AGENTS * TASKS).to_string(),
                format!("{seconds:.2}"),
                whole(rate),
                format!("{:.0}%", 100.0 * rate / of),
                whole(exported),
                whole(dropped),
            ],
        );
        if !matches!(collector, Collector::None) {
            report.target(
                format!("Runtime with a {what} ≥ 90% of no exporter ({label})"),
                format!("{:.0}%", 100.0 * rate / of),
                rate >= 0.9 * of,
            );
        }
        server.stop().await;
    }
}
