//! A Server-Sent Events client for the tests: connects to an event stream, reads its messages
//! as they come, each within a deadline.

use std::time::Duration;

use serde_json::Value;

/// One message of a stream.
#[derive(Debug, Clone)]
pub struct Message {
    pub id: Option<i64>,
    pub event: String,
    pub data: Value,
}

/// An open stream.
pub struct Sse {
    response: reqwest::Response,
    buffer: String,
    /// Comment lines seen (heartbeats).
    pub comments: usize,
}

impl Sse {
    /// Opens `path` on `address` with `token`, sending `Last-Event-ID` when given; panics unless
    /// the answer is 200 `text/event-stream`.
    pub async fn connect(
        address: &str,
        path: &str,
        token: &str,
        last_event_id: Option<i64>,
    ) -> Sse {
        let response = Self::open(address, path, token, last_event_id).await;
        let status = response.status();
        assert_eq!(status, 200, "{path}: {}", response.text().await.unwrap_or_default());
        let kind = response.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(kind.starts_with("text/event-stream"), "{path}: {kind}");
        Sse { response, buffer: String::new(), comments: 0 }
    }

    /// The answer to opening `path`, whatever it is (for refusals).
    pub async fn open(
        address: &str,
        path: &str,
        token: &str,
        last_event_id: Option<i64>,
    ) -> reqwest::Response {
        // No overall timeout: a stream lasts as long as the test reads it.
        let client = reqwest::Client::builder().build().unwrap();
        let mut request = client.get(format!("{address}{path}")).bearer_auth(token);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        request.send().await.expect("stream request sent")
    }

    /// The next message within `within`; `None` when none came (or the stream ended).
    pub async fn next(&mut self, within: Duration) -> Option<Message> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(message) = self.take() {
                return Some(message);
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk()).await.ok()?;
            match chunk {
                Ok(Some(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// Messages until one for which `last` holds (included), each within `within` of the one
    /// before; panics when the stream goes quiet first, naming `what`.
    pub async fn until(
        &mut self,
        within: Duration,
        what: &str,
        last: impl Fn(&Message) -> bool,
    ) -> Vec<Message> {
        let mut seen = Vec::new();
        loop {
            let Some(message) = self.next(within).await else {
                let kinds: Vec<&str> = seen.iter().map(|m: &Message| m.event.as_str()).collect();
                panic!("no {what} within {within:?}; saw {kinds:?}");
            };
            let done = last(&message);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// A whole message from the buffer, if one arrived.
    fn take(&mut self) -> Option<Message> {
        loop {
            let end = self.buffer.find("\n\n")?;
            let block: String = self.buffer.drain(..end + 2).collect();
            let (mut id, mut event, mut data) = (None, String::from("message"), String::new());
            let mut fields = false;
            for line in block.lines() {
                // The block's last line break leaves an empty line: no field.
                if line.is_empty() {
                    continue;
                }
                if line.starts_with(':') {
                    self.comments += 1;
                    continue;
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                fields = true;
                match field {
                    "id" => id = value.parse().ok(),
                    "event" => event = value.to_owned(),
                    "data" => {
                        if !data.is_empty() {
                            data.push('\n');
                        }
                        data.push_str(value);
                    }
                    _ => {}
                }
            }
            if fields {
                let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Some(Message { id, event, data });
            }
        }
    }
}
