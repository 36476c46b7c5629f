//! The span queue: a span processor that never blocks the code ending a span, and one task
//! that exports the queue in batches.
//!
//! The SDK's `BatchSpanProcessor` exports from a thread of its own with a blocking client
//! (our reqwest is async), and keeps its count of dropped spans to itself; this queue is the
//! same idea, small: `try_send` into a bounded channel (a full queue drops the span and
//! counts it), batches of at most `max_batch` spans sent at most `delay` after their first
//! span, each export bounded by the client's timeout.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_otlp::SpanExporter;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter as _, SpanProcessor};
use tokio::sync::{mpsc, oneshot};

use super::settings::Batch;

/// What became of the spans since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SpanCounts {
    pub(crate) exported: u64,
    /// Dropped because the queue was full (the collector slower than the spans).
    pub(crate) queue_full: u64,
    /// Dropped because their export failed (the collector gone, refusing, or too slow).
    pub(crate) export_failed: u64,
}

// Process-wide like the subscriber the queue serves (one per process), read by `/metrics`.
static EXPORTED: AtomicU64 = AtomicU64::new(0);
static QUEUE_FULL: AtomicU64 = AtomicU64::new(0);
static EXPORT_FAILED: AtomicU64 = AtomicU64::new(0);

pub(crate) fn span_counts() -> SpanCounts {
    SpanCounts {
        exported: EXPORTED.load(Ordering::Relaxed),
        queue_full: QUEUE_FULL.load(Ordering::Relaxed),
        export_failed: EXPORT_FAILED.load(Ordering::Relaxed),
    }
}

/// The processor the tracer provider calls as spans end.
#[derive(Debug)]
pub(super) struct Queue {
    spans: mpsc::Sender<SpanData>,
}

/// The exporting side, before its task starts.
#[derive(Debug)]
pub(super) struct Export {
    spans: mpsc::Receiver<SpanData>,
    exporter: SpanExporter,
    batch: Batch,
    /// After a failed export, batches are dropped unsent (not even encoded) until then: a
    /// collector that is gone costs the node nothing but the count.
    resting_until: Option<tokio::time::Instant>,
    rest: Duration,
}

/// The first rest after a failed export, doubled after each failure that follows, up to
/// [`LONGEST_REST`].
const FIRST_REST: Duration = Duration::from_secs(1);
const LONGEST_REST: Duration = Duration::from_secs(60);

/// The export task, running.
#[derive(Debug)]
pub(super) struct Running {
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

pub(super) fn channel(
    batch: &Batch,
    mut exporter: SpanExporter,
    resource: &Resource,
) -> (Queue, Export) {
    exporter.set_resource(resource);
    let (sender, receiver) = mpsc::channel(batch.max_queue);
    let export = Export {
        spans: receiver,
        exporter,
        batch: batch.clone(),
        resting_until: None,
        rest: FIRST_REST,
    };
    (Queue { spans: sender }, export)
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if span.span_context.is_sampled() && self.spans.try_send(span).is_err() {
            QUEUE_FULL.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Nothing waits here: the export task sends each batch within its delay.
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

impl Export {
    pub(super) fn start(self) -> Running {
        let (stop, stopped) = oneshot::channel();
        let done = tokio::spawn(self.run(stopped));
        Running { stop, done }
    }

    async fn run(mut self, mut stopped: oneshot::Receiver<()>) {
        let mut batch = Vec::with_capacity(self.batch.max_batch);
        loop {
            tokio::select! {
                span = self.spans.recv() => match span {
                    Some(span) => batch.push(span),
                    None => return,
                },
                _ = &mut stopped => break,
            }
            let due = tokio::time::Instant::now() + self.batch.delay;
            while batch.len() < self.batch.max_batch {
                match tokio::time::timeout_at(due, self.spans.recv()).await {
                    Ok(Some(span)) => batch.push(span),
                    Ok(None) | Err(_) => break,
                }
            }
            self.export(&mut batch).await;
        }
        // Stopping: what is queued now, in batches, tried whatever the rest (the collector may
        // be back; the stop is bounded by its caller).
        self.resting_until = None;
        while let Ok(span) = self.spans.try_recv() {
            batch.push(span);
            if batch.len() == self.batch.max_batch {
                self.export(&mut batch).await;
            }
        }
        self.export(&mut batch).await;
    }

    async fn export(&mut self, batch: &mut Vec<SpanData>) {
        if batch.is_empty() {
            return;
        }
        let count = batch.len() as u64;
        let spans = std::mem::replace(batch, Vec::with_capacity(self.batch.max_batch));
        if self.resting_until.is_some_and(|until| tokio::time::Instant::now() < until) {
            EXPORT_FAILED.fetch_add(count, Ordering::Relaxed);
            return;
        }
        match self.exporter.export(spans).await {
            Ok(()) => {
                EXPORTED.fetch_add(count, Ordering::Relaxed);
                (self.resting_until, self.rest) = (None, FIRST_REST);
            }
            Err(error) => {
                tracing::debug!(%error, spans = count, rest = ?self.rest, "cannot export spans; they are dropped");
                EXPORT_FAILED.fetch_add(count, Ordering::Relaxed);
                self.resting_until = Some(tokio::time::Instant::now() + self.rest);
                self.rest = (self.rest * 2).min(LONGEST_REST);
            }
        }
    }
}

impl Running {
    /// Exports what is queued, then stops, within `within`.
    pub(super) async fn flush_and_stop(self, within: Duration) {
        let _ = self.stop.send(());
        let mut done = self.done;
        if tokio::time::timeout(within, &mut done).await.is_err() {
            done.abort();
        }
    }
}
