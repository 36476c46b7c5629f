//! The access log (`http.access_log`): one line per answered request, off the serving threads.
//!
//! A serving thread only hands over what the line says (when, the method, the route, the
//! status, the time taken, the request id) to a bounded queue; a thread of its own formats the
//! lines and writes them to standard error in batches, every 50 ms at most. A line the queue has no room for is
//! dropped and counted (`agentd_log_lines_dropped_total`): a burst never makes requests wait for
//! the log. Without the setting nothing is queued at all, and the request's `tracing` line is at
//! DEBUG (see `router`).

use std::io::Write as _;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;

use crate::AppState;

/// Lines waiting to be written before new ones are dropped.
const QUEUE: usize = 8_192;
/// The most lines written in one write to standard error.
const BATCH: usize = 256;
/// How long the writer sleeps when the queue is empty: a line waits this long at most before it
/// is written, and the queue holds a pause's worth of lines at over 100,000 requests a second.
const PAUSE: Duration = Duration::from_millis(50);

/// One answered request, as the serving thread hands it over (nothing formatted yet).
struct Entry {
    at: SystemTime,
    method: Method,
    route: Option<MatchedPath>,
    status: u16,
    took: Duration,
    request_id: Option<HeaderValue>,
}

/// The queue to the access log's writer; the writer stops when the last sender is dropped.
#[derive(Debug, Clone)]
pub(crate) struct AccessLog {
    queue: SyncSender<Entry>,
}

impl AccessLog {
    /// Starts the writer thread: text lines, or JSON objects when `json`.
    pub(crate) fn start(json: bool) -> Self {
        let (queue, lines) = sync_channel(QUEUE);
        let spawned = std::thread::Builder::new()
            .name("agentd-access-log".into())
            .spawn(move || write_lines(&lines, json));
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start the access log's writer; its lines are dropped");
        }
        Self { queue }
    }

    fn queue(&self, entry: Entry) {
        match self.queue.try_send(entry) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                crate::logging::count_dropped();
            }
        }
    }
}

/// Middleware: queues the request's line once it is answered.
pub(crate) async fn record(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(log) = &state.http.access_log else { return next.run(request).await };
    let (at, started) = (SystemTime::now(), Instant::now());
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let request_id = request.headers().get(crate::request_id::HEADER).cloned();
    let response = next.run(request).await;
    log.queue(Entry {
        at,
        method,
        route,
        status: response.status().as_u16(),
        took: started.elapsed(),
        request_id,
    });
    response
}

/// The writer: takes whatever is queued (up to [`BATCH`] lines at a time) and writes it with
/// one write; with nothing queued, it sleeps [`PAUSE`] rather than waiting on the queue. A
/// writer that waits would be woken by every request (a futex wake-up and a context switch
/// each: measured, that cost a quarter of `/healthz`'s throughput on two cores); one that
/// sleeps is never woken by a request. It stops once the queue's senders are gone.
fn write_lines(lines: &Receiver<Entry>, json: bool) {
    let mut buffer = String::new();
    loop {
        buffer.clear();
        let mut taken = 0;
        let mut gone = false;
        while taken < BATCH {
            match lines.try_recv() {
                Ok(entry) => {
                    format_line(&mut buffer, &entry, json);
                    taken += 1;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    gone = true;
                    break;
                }
            }
        }
        if !buffer.is_empty() {
            let mut out = crate::logging::LossyStderr;
            let _ = out.write_all(buffer.as_bytes());
        }
        if gone {
            return;
        }
        if taken < BATCH {
            std::thread::sleep(PAUSE);
        }
    }
}

/// Appends `entry`'s line to `out`.
fn format_line(out: &mut String, entry: &Entry, json: bool) {
    use std::fmt::Write as _;
    let at = chrono::DateTime::<chrono::Utc>::from(entry.at)
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let route = entry.route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let request_id = entry.request_id.as_ref().and_then(|id| id.to_str().ok()).unwrap_or("");
    let ms = entry.took.as_secs_f64() * 1_000.0;
    if json {
        let line = serde_json::json!({
            "timestamp": at,
            "level": "INFO",
            "target": "access",
            "fields": {
                "method": entry.method.as_str(),
                "route": route,
                "status": entry.status,
                "ms": (ms * 1_000.0).round() / 1_000.0,
                "request_id": request_id,
            },
        });
        let _ = writeln!(out, "{line}");
    } else {
        let _ = writeln!(
            out,
            "{at}  INFO access: {} {route} {} {ms:.3}ms request_id={request_id}",
            entry.method, entry.status
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            at: SystemTime::UNIX_EPOCH + Duration::from_micros(1_764_300_000_123_456),
            method: Method::POST,
            route: None,
            status: 201,
            took: Duration::from_micros(1_500),
            request_id: Some(HeaderValue::from_static("req-1")),
        }
    }

    #[test]
    fn a_line_says_when_what_how_and_which_request() {
        let mut text = String::new();
        format_line(&mut text, &entry(), false);
        assert_eq!(
            text,
            "2025-11-28T03:20:00.123456Z  INFO access: POST unmatched 201 1.500ms request_id=req-1\n"
        );
        let mut json = String::new();
        format_line(&mut json, &entry(), true);
        let line: serde_json::Value = serde_json::from_str(json.trim_end()).unwrap();
        assert_eq!(line["fields"]["status"], 201);
        assert_eq!(line["fields"]["ms"], 1.5);
        assert_eq!(line["fields"]["request_id"], "req-1");
        assert_eq!(line["target"], "access");
    }

    #[test]
    fn a_full_queue_drops_the_line_and_counts_it() {
        let (queue, _lines) = sync_channel(1);
        let log = AccessLog { queue };
        let before = crate::logging::lines_dropped();
        log.queue(entry());
        log.queue(entry());
        assert!(crate::logging::lines_dropped() > before);
    }
}
