//! A fake model server speaking both wire formats: OpenAI chat completions
//! (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`), tool calls
//! included. Answers are scripted, for every request or per model, or derived from the request;
//! 429 with `Retry-After`, 500, 401 and hangs are available on demand, and a latency for every
//! answer. Every request is recorded with when it arrived and when it was answered. A limit of
//! N requests per window can be enforced as providers do (see `fake_limit.rs`).
//! answer. Every request is recorded with when it arrived, when it was answered and the usage
//! the answer reported. Both formats' prompt caches are simulated (`fake_prompt_cache`): the
//! fixed prompt counts (11 for OpenAI, 13 for Anthropic) stand for the uncached part of a
//! prompt, and the cache's tokens are reported beside them as each provider does.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::fake_limit::{Verdict, refusal, with_limit};
use crate::fake_prompt_cache::PromptCaches;

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
    /// Call one tool with these arguments.
    Call {
        name: String,
        arguments: Value,
    },
    /// Call several tools in one answer, in this order.
    Calls(Vec<(String, Value)>),
    /// Call one tool with this arguments text, sent verbatim (malformed JSON, say). Anthropic
    /// sends arguments as an object, so there `input` is this text as a JSON string.
    RawCall {
        name: String,
        arguments: String,
    },
    /// Answer `Done: <content of the last tool result in the request>`.
    AnswerFromToolResult,
    /// Fail with this status, the message quoting the request's `Authorization` header, as a
    /// careless proxy does (OpenAI's format only).
    EchoKey(u16),
}

#[derive(Debug, Clone)]
pub struct Call {
    pub format: &'static str,
    pub headers: HeaderMap,
    pub body: Value,
    pub received: Instant,
    /// When the answer left; `None` while the call is open (or its client went away).
    pub answered: Option<Instant>,
    /// Refused with 429 by the enforced limit.
    pub rate_limited: bool,
    /// The `usage` object of a successful answer, as sent.
    pub usage: Option<Value>,
}

impl Call {
    /// The system prompt, in either format.
    pub fn system(&self) -> &str {
        match self.format {
            "openai" => self.body["messages"][0]["content"].as_str().unwrap_or_default(),
            // A string, or text blocks (the one this project sends).
            _ => match &self.body["system"] {
                Value::String(text) => text,
                system => system[0]["text"].as_str().unwrap_or_default(),
            },
        }
    }

    /// The first user message (the task), in either format.
    pub fn user(&self) -> &str {
        first_user(&self.body)
    }

    /// The last user message's text (a text block of it, in Anthropic's blocks), in either
    /// format: after tool results, what the caller asked last.
    pub fn last_user(&self) -> String {
        last_user(&self.body)
    }

    /// Whether the request forbids tool calls (a summary is asked for).
    pub fn forbids_tools(&self) -> bool {
        tool_choice_none(&self.body)
    }

    /// The bytes of text the request carries: the system prompt, and every string in its
    /// messages and tools (texts, calls' names and arguments, results, schemas). No tokenizer
    /// makes more tokens of a text than it has bytes, so this bounds its input tokens.
    pub fn text_bytes(&self) -> usize {
        fn strings(value: &Value) -> usize {
            match value {
                Value::String(text) => text.len(),
                Value::Array(items) => items.iter().map(strings).sum(),
                Value::Object(fields) => fields.values().map(strings).sum(),
                _ => 0,
            }
        }
        let system = if self.format == "openai" { 0 } else { strings(&self.body["system"]) };
        system + strings(&self.body["messages"]) + strings(&self.body["tools"])
    }

    /// Whether the request has a `tools` field at all.
    pub fn has_tools(&self) -> bool {
        self.body.get("tools").is_some()
    }

    /// The names of the tools offered; empty when none are.
    pub fn tools(&self) -> Vec<String> {
        let name = |tool: &Value| {
            let name =
                if self.format == "openai" { &tool["function"]["name"] } else { &tool["name"] };
            name.as_str().unwrap_or_default().to_owned()
        };
        blocks(&self.body["tools"]).iter().map(name).collect()
    }

    /// Every tool result in the request, in order: the call's id and the content.
    pub fn tool_results(&self) -> Vec<(String, String)> {
        tool_results(self.format, &self.body)
    }

    /// Every tool call of the earlier answers in the request, in order: its id and tool name.
    pub fn assistant_calls(&self) -> Vec<(String, String)> {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut calls = Vec::new();
        for message in messages(&self.body).iter().filter(|m| m["role"] == "assistant") {
            match self.format {
                "openai" => calls.extend(
                    blocks(&message["tool_calls"])
                        .iter()
                        .map(|c| (text(&c["id"]), text(&c["function"]["name"]))),
                ),
                _ => calls.extend(
                    blocks(&message["content"])
                        .iter()
                        .filter(|b| b["type"] == "tool_use")
                        .map(|b| (text(&b["id"]), text(&b["name"]))),
                ),
            }
        }
        calls
    }
}

#[derive(Debug, Default)]
struct ModelState {
    script: VecDeque<Script>,
    /// Steps for requests naming one model, by the request's `model`.
    scripts: HashMap<String, VecDeque<Script>>,
    /// The step for every request naming one model once its own steps are taken.
    repeats: HashMap<String, Script>,
    /// Steps by how far a conversation is: the nth answer of every conversation with one model
    /// is its nth step (the last one repeats); conversations may interleave.
    plans: HashMap<String, Vec<Script>>,
    calls: Vec<Call>,
    latency: Duration,
    /// A latency of its own for requests naming one model.
    latencies: HashMap<String, Duration>,
    /// Tool call ids given so far, so each is unique on this server.
    call_ids: u64,
    /// Whether answers report the requests' tokens as counted (see [`crate::fake_tokens`])
    /// rather than fixed numbers.
    count_tokens: bool,
    /// The bodies of Anthropic `count_tokens` requests, in order.
    counted: Vec<Value>,
    limit: Option<crate::fake_limit::Limit>,
    /// A hold for the first request naming one model after a request that forbids tool calls.
    after_summary: HashMap<String, Duration>,
    /// The models whose next request takes that hold.
    armed: Vec<String>,
    caches: PromptCaches,
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
            .route("/v1/messages/count_tokens", post(anthropic_count))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base, state }
    }

    pub fn openai_base(&self) -> String {
        format!("{}/v1", self.base)
    }

    /// Steps for the next requests that name a model with no script of its own.
    pub fn script(&self, steps: impl IntoIterator<Item = Script>) {
        self.state.lock().unwrap().script.extend(steps);
    }

    /// Steps for the next requests naming `model` (the provider's model name, as sent). A model
    /// with a script never takes the shared steps: once its own are taken, it answers by its
    /// [repeated step](Self::repeat_for), else by the derived answer.
    pub fn script_for(&self, model: &str, steps: impl IntoIterator<Item = Script>) {
        self.state.lock().unwrap().scripts.entry(model.to_owned()).or_default().extend(steps);
    }

    /// `step` for every request naming `model` once its scripted steps are taken.
    pub fn repeat_for(&self, model: &str, step: Script) {
        self.state.lock().unwrap().repeats.insert(model.to_owned(), step);
    }

    /// `steps` for every conversation with `model`: a request with n earlier answers of the
    /// model in it gets step n, so any number of runs may go on at once.
    pub fn plan_for(&self, model: &str, steps: Vec<Script>) {
        self.state.lock().unwrap().plans.insert(model.to_owned(), steps);
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Later answers report the tokens of their requests as counted (OpenAI's accounting,
    /// and the fake's stand-in for Anthropic's: [`crate::fake_tokens`]), not fixed numbers.
    pub fn count_tokens(&self) {
        self.state.lock().unwrap().count_tokens = true;
    }

    /// The bodies of the Anthropic `count_tokens` requests received, in order.
    pub fn counted(&self) -> Vec<Value> {
        self.state.lock().unwrap().counted.clone()
    }

    /// The first request naming `model` after one of its requests that forbids tool calls (a
    /// summary) waits `hold` before it is answered: a run is caught just after a summary.
    pub fn hold_after_summary(&self, model: &str, hold: Duration) {
        self.state.lock().unwrap().after_summary.insert(model.to_owned(), hold);
    }

    /// Every later answer waits this long first.
    pub fn set_latency(&self, latency: Duration) {
        self.state.lock().unwrap().latency = latency;
    }

    /// From now on at most `requests` requests in any `window`-long span are answered; the
    /// others get 429 with `Retry-After` and the provider's rate-limit headers.
    pub fn enforce_limit(&self, requests: usize, window: Duration) {
        self.state.lock().unwrap().limit = Some(crate::fake_limit::Limit::new(requests, window));
    }

    /// The requests the enforced limit refused.
    pub fn refused_by_limit(&self) -> usize {
        self.state.lock().unwrap().limit.as_ref().map_or(0, |limit| limit.refused)
    }

    /// A latency for requests naming `model` only.
    pub fn set_latency_for(&self, model: &str, latency: Duration) {
        self.state.lock().unwrap().latencies.insert(model.to_owned(), latency);
    }
}

type Shared = State<Arc<Mutex<ModelState>>>;

/// Records the call and takes its step and the latency; the enforced limit's verdict, if one
/// is set (a refused call takes no step).
fn begin(
    state: &Shared,
    format: &'static str,
    headers: &HeaderMap,
    body: &Value,
) -> (usize, Option<Script>, Duration, Option<Verdict>) {
    let mut s = state.lock().unwrap();
    let received = Instant::now();
    let verdict = s.limit.as_mut().map(|limit| limit.admit(received));
    let rate_limited = verdict.is_some_and(|v| !v.admitted);
    s.calls.push(Call {
        format,
        headers: headers.clone(),
        body: body.clone(),
        received,
        answered: None,
        rate_limited,
        usage: None,
    });
    if rate_limited {
        return (s.calls.len() - 1, None, Duration::ZERO, verdict);
    }
    let model = body["model"].as_str().unwrap_or_default();
    let answered = messages(body).iter().filter(|m| m["role"] == "assistant").count();
    // Asked for no tool call (a stopped run's summary), a model answers in text, as providers
    // do, whatever its script says; the script is kept for later requests.
    let step = if tool_choice_none(body) {
        Some(Script::Answer(format!("Summary: {}", last_user(body))))
    } else if let Some(plan) = s.plans.get(model).filter(|p| !p.is_empty()) {
        plan.get(answered).or(plan.last()).cloned()
    } else if s.scripts.contains_key(model) || s.repeats.contains_key(model) {
        let own = s.scripts.get_mut(model).and_then(VecDeque::pop_front);
        own.or_else(|| s.repeats.get(model).cloned())
    } else {
        s.script.pop_front()
    };
    let mut latency = s.latencies.get(model).copied().unwrap_or(s.latency);
    if tool_choice_none(body) && s.after_summary.contains_key(model) {
        s.armed.push(model.to_owned());
    } else if let Some(at) = s.armed.iter().position(|armed| armed == model) {
        s.armed.remove(at);
        latency = s.after_summary.remove(model).unwrap_or(latency);
    }
    (s.calls.len() - 1, step, latency, verdict)
}

fn end(state: &Shared, index: usize) {
    state.lock().unwrap().calls[index].answered = Some(Instant::now());
}

/// The next `count` tool call numbers of this server.
fn call_numbers(state: &Shared, count: usize) -> Vec<u64> {
    let mut s = state.lock().unwrap();
    (0..count)
        .map(|_| {
            s.call_ids += 1;
            s.call_ids
        })
        .collect()
}

fn failure(status: u16, retry_after: Option<u64>, body: Value) -> Response {
    let mut response = (StatusCode::from_u16(status).unwrap(), Json(body)).into_response();
    if let Some(seconds) = retry_after {
        response.headers_mut().insert("retry-after", seconds.to_string().parse().unwrap());
    }
    response
}

/// What a step makes of a request, in neither format yet.
enum Reply {
    Text(String),
    /// Tool calls: the name, the arguments as Anthropic's `input`, and as OpenAI's text.
    Calls(Vec<(String, Value, String)>),
    Failure(u16, Option<u64>),
}

/// The step's reply, or one derived from the task so each task's answer is its own.
async fn reply_for(step: Option<Script>, format: &str, body: &Value) -> Reply {
    let derived = || Reply::Text(format!("Answer to: {}", first_user(body)));
    let call = |name: String, arguments: Value| {
        let text = arguments.to_string();
        (name, arguments, text)
    };
    match step {
        Some(Script::Answer(text)) => Reply::Text(text),
        Some(Script::Status(status, retry_after)) => Reply::Failure(status, retry_after),
        Some(Script::EchoKey(status)) => Reply::Failure(status, None),
        Some(Script::Hang(duration)) => {
            tokio::time::sleep(duration).await;
            derived()
        }
        Some(Script::Call { name, arguments }) => Reply::Calls(vec![call(name, arguments)]),
        Some(Script::Calls(calls)) => {
            Reply::Calls(calls.into_iter().map(|(name, arguments)| call(name, arguments)).collect())
        }
        Some(Script::RawCall { name, arguments }) => {
            Reply::Calls(vec![(name, Value::String(arguments.clone()), arguments)])
        }
        Some(Script::AnswerFromToolResult) => {
            let last = tool_results(format, body).pop().map(|(_, content)| content);
            Reply::Text(format!("Done: {}", last.unwrap_or_default()))
        }
        None => derived(),
    }
}

async fn openai(state: Shared, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (index, step, latency, verdict) = begin(&state, "openai", &headers, &body);
    tokio::time::sleep(latency).await;
    let response = match verdict {
        Some(verdict) if !verdict.admitted => refusal("openai", verdict),
        _ => openai_reply(&state, index, step, &headers, &body).await,
    };
    let response = with_limit("openai", verdict, response);
    end(&state, index);
    response
}

async fn openai_reply(
    state: &Shared,
    index: usize,
    step: Option<Script>,
    headers: &HeaderMap,
    body: &Value,
) -> Response {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok());
    if bearer != Some(&*format!("Bearer {OPENAI_KEY}")) {
        return failure(
            401,
            None,
            json!({"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}}),
        );
    }
    if let Some(Script::EchoKey(status)) = &step {
        let message = format!("Incorrect API key provided: {}", bearer.unwrap_or_default());
        return failure(*status, None, json!({"error": {"message": message}}));
    }
    if body["model"] == "missing" {
        return failure(
            404,
            None,
            json!({"error": {"message": "The model `missing` does not exist.", "type": "invalid_request_error", "code": "model_not_found"}}),
        );
    }
    let (message, finish) = match reply_for(step, "openai", body).await {
        Reply::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Reply::Calls(calls) => {
            let numbers = call_numbers(state, calls.len());
            let calls: Vec<Value> = calls
                .into_iter()
                .zip(numbers)
                .map(|((name, _, arguments), n)| {
                    json!({"id": format!("call_{n}"), "type": "function",
                           "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            (json!({"role": "assistant", "content": null, "tool_calls": calls}), "tool_calls")
        }
        Reply::Failure(status, retry_after) => {
            return failure(
                status,
                retry_after,
                json!({"error": {"message": format!("scripted {status}"), "type": "server_error"}}),
            );
        }
    };
    let cached = state.lock().unwrap().caches.openai(body);
    // The prompt's tokens, cached ones included: 11 beside the cache's, unless the server
    // counts (see [`FakeModels::count_tokens`]).
    let prompt =
        if counting(state) { crate::fake_tokens::openai_prompt_tokens(body) } else { 11 + cached };
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": 22,
        "total_tokens": prompt + 22, "prompt_tokens_details": {"cached_tokens": cached}});
    state.lock().unwrap().calls[index].usage = Some(usage.clone());
    Json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage
    }))
    .into_response()
}

async fn anthropic(state: Shared, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let (index, step, latency, verdict) = begin(&state, "anthropic", &headers, &body);
    tokio::time::sleep(latency).await;
    let response = match verdict {
        Some(verdict) if !verdict.admitted => refusal("anthropic", verdict),
        _ => anthropic_reply(&state, index, step, &headers, &body).await,
    };
    let response = with_limit("anthropic", verdict, response);
    end(&state, index);
    response
}

async fn anthropic_reply(
    state: &Shared,
    index: usize,
    step: Option<Script>,
    headers: &HeaderMap,
    body: &Value,
) -> Response {
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
    let cached = state.lock().unwrap().caches.anthropic(body);
    let cached = match cached {
        Ok(cached) => cached,
        Err(message) => {
            return failure(
                400,
                None,
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
            );
        }
    };
    let (content, stop) = match reply_for(step, "anthropic", body).await {
        Reply::Text(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
        Reply::Calls(calls) => {
            let numbers = call_numbers(state, calls.len());
            let blocks: Vec<Value> = calls
                .into_iter()
                .zip(numbers)
                .map(|((name, input, _), n)| {
                    json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": input})
                })
                .collect();
            (Value::Array(blocks), "tool_use")
        }
        Reply::Failure(status, retry_after) => {
            return failure(status, retry_after, anthropic_error(status));
        }
    };
    let usage = json!({"input_tokens": anthropic_input(state, body), "output_tokens": 24,
        "cache_creation_input_tokens": cached.written, "cache_read_input_tokens": cached.read});
    state.lock().unwrap().calls[index].usage = Some(usage.clone());
    Json(json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
        "content": content, "stop_reason": stop,
        "usage": usage
    }))
    .into_response()
}

fn anthropic_input(state: &Shared, body: &Value) -> i64 {
    if counting(state) { crate::fake_tokens::anthropic_input_tokens(body) } else { 13 }
}

fn counting(state: &Shared) -> bool {
    state.lock().unwrap().count_tokens
}

/// `POST /v1/messages/count_tokens`: the request's input tokens as this server's answers
/// report them, under the same key and version checks as `/v1/messages`.
async fn anthropic_count(state: Shared, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    state.lock().unwrap().counted.push(body.clone());
    if headers.get("x-api-key").and_then(|v| v.to_str().ok()) != Some(ANTHROPIC_KEY) {
        return failure(
            401,
            None,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
        );
    }
    if body.get("max_tokens").is_some() {
        return failure(
            400,
            None,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Extra inputs are not permitted"}}),
        );
    }
    Json(json!({"input_tokens": crate::fake_tokens::anthropic_input_tokens(&body)})).into_response()
}

/// Anthropic's error body for `status`, with the type its API documents for it (529 exactly
/// as Anthropic sends it when overloaded).
fn anthropic_error(status: u16) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    let message =
        if status == 529 { "Overloaded".to_owned() } else { format!("scripted {status}") };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

fn messages(body: &Value) -> &[Value] {
    blocks(&body["messages"])
}

/// An array's items; none when it is not an array.
fn blocks(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The first user message's text, in either format (a string, or Anthropic's text block).
fn first_user(body: &Value) -> &str {
    let Some(first) = messages(body).iter().find(|m| m["role"] == "user") else {
        return "";
    };
    match &first["content"] {
        Value::String(text) => text,
        content => blocks(content)
            .iter()
            .find(|b| b["type"] == "text")
            .and_then(|b| b["text"].as_str())
            .unwrap_or_default(),
    }
}

/// The last user message's text, in either format.
fn last_user(body: &Value) -> String {
    let Some(last) = messages(body).iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &last["content"] {
        Value::String(text) => text.clone(),
        content => blocks(content)
            .iter()
            .rev()
            .find(|b| b["type"] == "text")
            .and_then(|b| b["text"].as_str())
            .unwrap_or_default()
            .to_owned(),
    }
}

/// Whether the request forbids tool calls: OpenAI's `"none"`, Anthropic's `{"type": "none"}`.
fn tool_choice_none(body: &Value) -> bool {
    body["tool_choice"] == "none" || body["tool_choice"]["type"] == "none"
}

/// Every tool result in the request, in order: the call's id and the content.
fn tool_results(format: &str, body: &Value) -> Vec<(String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    match format {
        "openai" => messages(body)
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| (text(&m["tool_call_id"]), text(&m["content"])))
            .collect(),
        _ => messages(body)
            .iter()
            .filter(|m| m["role"] == "user")
            .flat_map(|m| blocks(&m["content"]))
            .filter(|b| b["type"] == "tool_result")
            .map(|b| (text(&b["tool_use_id"]), text(&b["content"])))
            .collect(),
    }
}
