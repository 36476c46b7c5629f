//! A webhook receiver on loopback: records every request (method, path, headers, body) and
//! answers as scripted (a queue of statuses, then 200), so tests see exactly what a team's
//! service would get. [`verify_all`] checks each received webhook with the Standard Webhooks
//! reference library.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::Value;

use crate::standard_webhooks;

/// A scripted "answer" that records the request and then holds it open without answering (for
/// five minutes, or until the sender goes away): an attempt in flight.
pub const HOLD: u16 = 0;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Names in lowercase, as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// The `webhook-id` header.
    pub fn id(&self) -> &str {
        self.header("webhook-id").expect("a webhook-id header")
    }
}

#[derive(Default)]
struct Recorded {
    received: Vec<Received>,
    /// Statuses to answer with, in order; 200 once they are used up.
    script: VecDeque<u16>,
}

/// The running receiver; it stops when dropped.
pub struct WebhookReceiver {
    pub address: SocketAddr,
    /// `http://127.0.0.1:<port>/hooks`.
    pub url: String,
    state: Arc<Mutex<Recorded>>,
    task: tokio::task::JoinHandle<()>,
}

impl WebhookReceiver {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(Recorded::default()));
        let router = axum::Router::new().fallback(record).with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let address = listener.local_addr().expect("an address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { address, url: format!("http://{address}/hooks"), state, task }
    }

    /// The next answers, in order (then 200 again); [`HOLD`] answers nothing.
    pub fn answer(&self, statuses: &[u16]) {
        self.lock().script.extend(statuses);
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// Waits until `count` requests arrived, and returns them.
    pub async fn wait_for(&self, count: usize, deadline: Duration) -> Vec<Received> {
        crate::eventually(deadline, &format!("{count} webhooks received"), || async {
            self.lock().received.len() >= count
        })
        .await;
        self.received()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn record(
    State(state): State<Arc<Mutex<Recorded>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    let headers = headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let status = {
        let mut state = state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.received.push(Received {
            method: method.to_string(),
            path: uri.path().to_owned(),
            headers,
            body: body.to_vec(),
        });
        state.script.pop_front().unwrap_or(200)
    };
    if status == HOLD {
        tokio::time::sleep(Duration::from_secs(300)).await;
    }
    (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), "answered by the test receiver")
}

/// Checks every webhook in `received` with the reference library under `secret`; fails the
/// test on the first that does not verify. Without the library (not set up, not required)
/// it checks nothing and says so.
pub async fn verify_all(secret: &str, received: &[Received]) {
    let Some(python) = standard_webhooks::python() else { return };
    for webhook in received {
        if let Err(refusal) =
            standard_webhooks::verify(&python, secret, &webhook.headers, &webhook.body).await
        {
            panic!(
                "the webhook {} did not verify with the reference library: {refusal}",
                webhook.header("webhook-id").unwrap_or("(no id)")
            );
        }
    }
}
