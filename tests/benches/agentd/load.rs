//! The load generator: a fixed number of keep-alive HTTP/1.1 connections, each sending its next
//! request as soon as the last answer is read (a closed loop, as `wrk` does), with every
//! latency kept for exact percentiles. Built on hyper's client connection, so the generator
//! costs as little CPU as the server's own HTTP stack.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;

/// What each request of a run is: given the run's request counter, the method, path and body.
pub(crate) type MakeRequest = Arc<dyn Fn(u64) -> (Method, String, Option<String>) + Send + Sync>;

/// How a run goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub connections: usize,
    /// Requests before this are sent but not counted: connections open, caches warm.
    pub warmup: Duration,
    pub measure: Duration,
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct Measured {
    /// Successful (2xx) answers in the measured window.
    pub ok: u64,
    /// Other answers and transport errors in the measured window.
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
    /// Latency of every counted answer, in microseconds, sorted.
    pub latencies_us: Vec<u32>,
}

impl Measured {
    pub(crate) fn per_second(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q` quantile (0..=1) of the latencies, in milliseconds.
    pub(crate) fn quantile_ms(&self, q: f64) -> f64 {
        quantile_ms(&self.latencies_us, q)
    }
}

pub(crate) fn quantile_ms(sorted_us: &[u32], q: f64) -> f64 {
    if sorted_us.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted_us.len() as f64 * q).ceil() as usize).clamp(1, sorted_us.len());
    f64::from(sorted_us[rank - 1]) / 1000.0
}

/// Runs `shape.connections` connections against `address` until the window closes.
pub(crate) async fn closed_loop(
    address: SocketAddr,
    token: Option<&str>,
    shape: Shape,
    make: MakeRequest,
) -> Measured {
    let started = Instant::now();
    let window = (started + shape.warmup, started + shape.warmup + shape.measure);
    let counter = Arc::new(AtomicU64::new(0));
    let authorization = token.map(|t| format!("Bearer {t}"));
    let mut connections = tokio::task::JoinSet::new();
    for _ in 0..shape.connections {
        let (make, counter, authorization) = (make.clone(), counter.clone(), authorization.clone());
        connections.spawn(connection(address, authorization, window, make, counter));
    }
    let mut measured = Measured { elapsed: shape.measure, ..Measured::default() };
    while let Some(done) = connections.join_next().await {
        let one = done.expect("a load connection panicked");
        measured.ok += one.ok;
        measured.errors += one.errors;
        measured.first_error = measured.first_error.or(one.first_error);
        measured.latencies_us.extend(one.latencies_us);
    }
    measured.latencies_us.sort_unstable();
    measured
}

/// One connection's loop; it reconnects if the server closes the connection.
async fn connection(
    address: SocketAddr,
    authorization: Option<String>,
    (from, until): (Instant, Instant),
    make: MakeRequest,
    counter: Arc<AtomicU64>,
) -> Measured {
    let mut measured = Measured::default();
    let mut sender = None;
    loop {
        let now = Instant::now();
        if now >= until {
            return measured;
        }
        let counted = now >= from;
        if sender.is_none() {
            sender = Some(connect(address).await);
        }
        let Some(open) = sender.as_mut() else { continue };
        let (method, path, body) = make(counter.fetch_add(1, Ordering::Relaxed));
        let request = build(method, &path, body, authorization.as_deref(), address);
        let sent = Instant::now();
        let answer = match open.send_request(request).await {
            Ok(response) => {
                let status = response.status();
                match response.into_body().collect().await {
                    Ok(_) if status.is_success() => Ok(()),
                    Ok(body) => {
                        Err(format!("{status}: {}", String::from_utf8_lossy(&body.to_bytes())))
                    }
                    Err(error) => Err(error.to_string()),
                }
            }
            Err(error) => Err(error.to_string()),
        };
        let latency = sent.elapsed();
        if answer.is_err() || open.is_closed() {
            sender = None;
        }
        if !counted || Instant::now() > until {
            continue;
        }
        match answer {
            Ok(()) => {
                measured.ok += 1;
                measured.latencies_us.push(u32::try_from(latency.as_micros()).unwrap_or(u32::MAX));
            }
            Err(error) => {
                measured.errors += 1;
                measured.first_error.get_or_insert(error);
            }
        }
    }
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(address: SocketAddr) -> Sender {
    let stream = tokio::net::TcpStream::connect(address).await.expect("the server accepts");
    stream.set_nodelay(true).expect("TCP_NODELAY");
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("an HTTP/1.1 connection");
    tokio::spawn(connection);
    sender
}

fn build(
    method: Method,
    path: &str,
    body: Option<String>,
    authorization: Option<&str>,
    address: SocketAddr,
) -> Request<Full<Bytes>> {
    let mut request =
        Request::builder().method(method).uri(path).header("host", address.to_string());
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    let body = match body {
        Some(body) => {
            request = request.header("content-type", "application/json");
            Full::new(Bytes::from(body))
        }
        None => Full::new(Bytes::new()),
    };
    request.body(body).expect("a valid request")
}
