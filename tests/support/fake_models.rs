//! A fake model server speaking both wire formats: OpenAI chat completions
//! (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`). Answers are
//! scripted, or derived from the request; 429 with `Retry-After`, 500, 401 and hangs are
//! available on demand, and a latency for every answer. Every request is recorded with when it
//! arrived and when it was answered.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

pub const OPENAI_KEY: &str = "sk-test-openai";
pub const ANTHROPIC_KEY: &str = "sk-ant-test";

/// What to do with the next request.
#[derive(Debug, Clone)]
pub enum Script {
    Answer(String),
    /// An error status, with `Retry-After` seconds when given.
    Status(u16, Option<u64>),
    /// Hold the request this long before answering normally.
    Hang(Duration),
}

#[derive(Debug, Clone)]
pub struct Call {
    pub format: &'static str,
    pub headers: HeaderMap,
    pub body: Value,
    pub received: Instant,
    /// When the answer left; `None` while the call is open (or its client went away).
    pub answered: Option<Instant>,
}

impl Call {
    /// The system prompt, in either format.
    pub fn system(&self) -> &str {
        match self.format {
            "openai" => self.body["messages"][0]["content"].as_str().unwrap_or_default(),
            _ => self.body["system"].as_str().unwrap_or_default(),
        }
    }

    /// The user message, in either format.
    pub fn user(&self) -> &str {
        let messages = self.body["messages"].as_array().unwrap();
        messages.last().unwrap()["content"].as_str().unwrap_or_default()
    }
}

#[derive(Debug, Default)]
struct ModelState {
    script: VecDeque<Script>,
    calls: Vec<Call>,
    latency: Duration,
}

#[derive(Clone)]
pub struct FakeModels {
    /// `http://127.0.0.1:<port>`: Anthropic's base URL; OpenAI's is this plus `/v1`.
    pub base: String,
    state: Arc<Mutex<ModelState>>,
}

impl FakeModels {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(ModelState::default()));
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base, state }
    }

    pub fn openai_base(&self) -> String {
        format!("{}/v1", self.base)
    }

    pub fn script(&self, steps: impl IntoIterator<Item = Script>) {
        self.state.lock().unwrap().script.extend(steps);
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Every later answer waits this long first.
    pub fn set_latency(&self, latency: Duration) {
        self.state.lock().unwrap().latency = latency;
    }
}

type Shared = State<Arc<Mutex<ModelState>>>;

/// Records the call and takes the next scripted step and the latency.
fn begin(
    state: &Shared,
    format: &'static str,
    headers: &HeaderMap,
    body: &Value,
) -> (usize, Option<Script>, Duration) {
    let mut s = state.lock().unwrap();
    s.calls.push(Call {
        format,
        headers: headers.clone(),
        body: body.clone(),
        received: Instant::now(),
        answered: None,
    });
    (s.calls.len() - 1, s.script.pop_front(), s.latency)
}

fn end(state: &Shared, index: usize) {
    state.lock().unwrap().calls[index].answered = Some(Instant::now());
}

fn failure(status: u16, retry_after: Option<u64>, body: Value) -> Response {
    let mut response = (StatusCode::from_u16(status).unwrap(), Json(body)).into_response();
    if let Some(seconds) = retry_after {
        response.headers_mut().insert("retry-after", seconds.to_string().parse().unwrap());
    }
    response
}

/// The scripted answer, or one derived from the task so each task's answer is its own.
async fn answer_for(step: Option<Script>, user: &str) -> Result<String, (u16, Option<u64>)> {
    match step {
        Some(Script::Answer(text)) => Ok(text),
        Some(Script::Status(status, retry_after)) => Err((status, retry_after)),
        Some(Script::Hang(duration)) => {
            tokio::time::sleep(duration).await;
            Ok(format!("Answer to: {user}"))
        }
        None => Ok(format!("Answer to: {user}")),
    }
}

async fn openai(state: Shared, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (index, step, latency) = begin(&state, "openai", &headers, &body);
    tokio::time::sleep(latency).await;
    let response = openai_reply(step, &headers, &body).await;
    end(&state, index);
    response
}

async fn openai_reply(step: Option<Script>, headers: &HeaderMap, body: &Value) -> Response {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok());
    if bearer != Some(&*format!("Bearer {OPENAI_KEY}")) {
        return failure(
            401,
            None,
            json!({"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}}),
        );
    }
    if body["model"] == "missing" {
        return failure(
            404,
            None,
            json!({"error": {"message": "The model `missing` does not exist.", "type": "invalid_request_error", "code": "model_not_found"}}),
        );
    }
    let user = body["messages"][1]["content"].as_str().unwrap_or_default().to_owned();
    match answer_for(step, &user).await {
        Ok(text) => Json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}
        }))
        .into_response(),
        Err((status, retry_after)) => failure(status, retry_after, json!({"error": {"message": format!("scripted {status}"), "type": "server_error"}})),
    }
}

async fn anthropic(state: Shared, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (index, step, latency) = begin(&state, "anthropic", &headers, &body);
    tokio::time::sleep(latency).await;
    let response = anthropic_reply(step, &headers, &body).await;
    end(&state, index);
    response
}

async fn anthropic_reply(step: Option<Script>, headers: &HeaderMap, body: &Value) -> Response {
    if headers.get("x-api-key").and_then(|v| v.to_str().ok()) != Some(ANTHROPIC_KEY) {
        return failure(
            401,
            None,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
        );
    }
    if headers.get("anthropic-version").is_none() {
        return failure(
            400,
            None,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "anthropic-version header is required"}}),
        );
    }
    let user = body["messages"][0]["content"].as_str().unwrap_or_default().to_owned();
    match answer_for(step, &user).await {
        Ok(text) => Json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 13, "output_tokens": 24}
        }))
        .into_response(),
        Err((status, retry_after)) => failure(
            status,
            retry_after,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": format!("scripted {status}")}}),
        ),
    }
}
