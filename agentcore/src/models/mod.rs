//! Language models behind the project's own trait.
//!
//! Two kinds of provider: any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM,
//! llama.cpp server, LM Studio, OpenRouter) and Anthropic Messages; and `echo`, which calls no
//! model and says so. Providers are configured by name ([`Models`], the registry), so OpenAI
//! and a local Ollama can serve agents side by side. The wire formats are small and their error
//! semantics matter to the runtime (which failures to retry, how long `Retry-After` says to
//! wait, which ones mean the agent can never succeed), so both are written here over `reqwest`
//! rather than through a general LLM client; see docs/decisions.md.
//!
//! Both formats carry function calling: a request offers [`ToolSpec`]s and carries the
//! conversation so far as [`Message`]s (earlier answers with their [`ToolCall`]s, and the
//! results of those calls); an answer is text, tool calls, or both.

mod anthropic;
mod echo;
mod fallbacks;
mod openai;
mod registry;
mod scrubbed;
pub mod tokens;
#[cfg(test)]
mod tokens_tests;
#[cfg(test)]
mod wire_tests;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

pub use anthropic::AnthropicProvider;
pub use echo::EchoProvider;
pub use openai::OpenAiProvider;
pub use registry::{
    Configured, EXAMPLE_PRICES, Endpoint, KINDS, Kind, ModelKind, Models, ModelsConfig,
    ProviderConfig, kind_names,
};

use crate::domain::task::Usage;

/// One call: system prompt, the conversation so far, the tools offered, a bound on the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRequest {
    /// The provider's own model name (`gpt-4o-mini`, `claude-sonnet-4-5`, `llama3.1`).
    pub model: String,
    pub system: String,
    /// The conversation after the system prompt; the task is the first `User` message.
    pub messages: Vec<Message>,
    /// The tools the model may call; empty: none offered (no `tools` field is sent at all).
    pub tools: Vec<ToolSpec>,
    /// `None`: the tools are shown but may not be called (the summary at the end of a
    /// stopped run).
    pub tool_choice: ToolChoice,
    pub max_tokens: u32,
}

/// The margin [`CompletionRequest::text_bytes`] counts for the tokens a wire format adds
/// around each message and tool (roles, separators).
pub const FRAMING_TOKENS: usize = 32;

impl CompletionRequest {
    /// The bytes of text the request carries (system prompt, conversation, tools offered),
    /// plus [`FRAMING_TOKENS`] for each message, each tool and the request itself: a bound on
    /// its input tokens, as no tokenizer makes more tokens of a text than it has bytes, and
    /// the tokens a wire format adds around each part are fewer than that margin.
    pub fn text_bytes(&self) -> usize {
        let messages: usize = self
            .messages
            .iter()
            .map(|message| match message {
                Message::User(text) => text.len(),
                Message::Assistant { text, tool_calls } => {
                    text.len()
                        + tool_calls
                            .iter()
                            .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                            .sum::<usize>()
                }
                Message::ToolResult { call_id, content, .. } => call_id.len() + content.len(),
            })
            .sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum();
        let parts = 1 + self.messages.len() + self.tools.len();
        self.system.len() + messages + tools + parts * FRAMING_TOKENS
    }
}

/// Whether the model may call the tools offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolChoice {
    #[default]
    Auto,
    None,
}

/// One turn of the conversation after the system prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    User(String),
    /// An earlier answer of the model, with the tool calls it made.
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call. Consecutive results are sent back together.
    /// `content` already says when it is an error; `is_error` is for formats that mark it.
    ToolResult {
        call_id: String,
        content: String,
        is_error: bool,
    },
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A call of a tool the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call, echoed back with its result.
    pub id: String,
    pub name: String,
    /// The arguments as JSON text, exactly as the model sent them: possibly not valid JSON.
    pub arguments: String,
}

/// The model's answer, the tools it wants called, and what it cost, when the provider says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    /// Calls to run, in the order given; empty when the model answered.
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    /// The provider's rate-limit headers said its requests or tokens are spent for this long
    /// (see `retry_after`): no call should go to it before.
    pub spent_for: Option<Duration>,
}

/// Why a call failed, sorted by what the caller should do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Try again later: a timeout, a dropped connection, 429, 5xx. `retry_after` is the
    /// provider's own advice, when it gave one; `status` its HTTP status, when it answered.
    #[error("{reason}")]
    Transient { reason: String, retry_after: Option<Duration>, status: Option<u16> },
    /// This will never work as configured: a bad key, an unknown model, a refused request.
    #[error("{reason}")]
    Permanent { reason: String },
}

impl ModelError {
    pub fn transient(reason: impl Into<String>) -> Self {
        ModelError::Transient { reason: reason.into(), retry_after: None, status: None }
    }

    pub fn permanent(reason: impl Into<String>) -> Self {
        ModelError::Permanent { reason: reason.into() }
    }
}

#[async_trait]
pub trait ModelProvider: Send + Sync + fmt::Debug {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError>;

    /// The input tokens of `request` as the provider counts them, when it can say before the
    /// call (Anthropic's `count_tokens`); `Ok(None)` when it cannot.
    async fn count_input_tokens(
        &self,
        request: &CompletionRequest,
    ) -> Result<Option<u64>, ModelError> {
        let _ = request;
        Ok(None)
    }
}

/// Both providers put a failure's explanation at `error.message`.
#[derive(Debug, Default, serde::Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: ErrorDetail,
}

#[derive(Debug, Default, serde::Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    message: String,
}

/// Sends a provider call and reads a successful answer as `T`, with how long the provider's
/// headers say its limit is spent ([`retry_after`]); any failure comes back sorted.
pub(crate) async fn send_json<T: serde::de::DeserializeOwned>(
    call: reqwest::RequestBuilder,
    provider: &str,
) -> Result<(T, Option<Duration>), ModelError> {
    let response = call.send().await.map_err(|e| transport(&e, provider))?;
    let status = response.status();
    let wait = retry_after(response.headers());
    let body = response.bytes().await.map_err(|e| transport(&e, provider))?;
    if !status.is_success() {
        let detail: ErrorBody = serde_json::from_slice(&body).unwrap_or_default();
        return Err(classify(status, wait, &detail.error.message, provider));
    }
    let answer = serde_json::from_slice(&body)
        .map_err(|e| ModelError::transient(format!("{provider} sent an unreadable answer: {e}")))?;
    Ok((answer, wait))
}

/// Sorts an HTTP failure of a provider by what the caller should do about it.
pub(crate) fn classify(
    status: reqwest::StatusCode,
    retry_after: Option<Duration>,
    detail: &str,
    provider: &str,
) -> ModelError {
    let detail = if detail.is_empty() { String::new() } else { format!(": {detail}") };
    match status.as_u16() {
        401 | 403 => {
            ModelError::permanent(format!("{provider} rejected the API key ({status}){detail}"))
        }
        404 => ModelError::permanent(format!(
            "{provider} does not know this model or endpoint ({status}){detail}"
        )),
        408 | 409 | 425 | 429 => ModelError::Transient {
            reason: format!("{provider} answered {status}{detail}"),
            retry_after,
            status: Some(status.as_u16()),
        },
        s if s >= 500 => ModelError::Transient {
            reason: format!("{provider} answered {status}{detail}"),
            retry_after,
            status: Some(status.as_u16()),
        },
        _ => ModelError::permanent(format!("{provider} refused the request ({status}){detail}")),
    }
}

/// The rate-limit headers that say how many requests or tokens are left, each with the one
/// that says when they are back: OpenAI's (a duration: `1s`, `6m0s`, `20ms`) and Anthropic's
/// (an RFC 3339 time).
const LIMIT_HEADERS: [(&str, &str); 4] = [
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
];

/// How long the provider says to wait before its next call: `Retry-After` in seconds, as
/// providers send it; else, when its rate-limit headers say no requests or tokens are left,
/// until the latest of them is back. The one place providers' wait signals are read.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let seconds = header("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    seconds.or_else(|| {
        LIMIT_HEADERS
            .iter()
            .filter(|(remaining, _)| header(remaining) == Some("0"))
            .filter_map(|(_, reset)| header(reset).and_then(reset_in))
            .max()
    })
}

/// How long until a reset header's moment: an RFC 3339 time (Anthropic), or a duration in
/// Go's form (OpenAI: `1h2m3.5s`, `20ms`).
fn reset_in(text: &str) -> Option<Duration> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        let left = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
        return Some(left.to_std().unwrap_or_default());
    }
    let mut seconds = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, tail) = rest.split_at(number_end);
        let unit_end = tail.find(|c: char| c.is_ascii_digit()).unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let scale = match unit {
            "h" => 3_600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        seconds += number.parse::<f64>().ok()? * scale;
        rest = next;
    }
    if text.is_empty() { None } else { Duration::try_from_secs_f64(seconds).ok() }
}

pub(crate) fn transport(error: &reqwest::Error, provider: &str) -> ModelError {
    let what = if error.is_timeout() { "timed out" } else { "could not be reached" };
    ModelError::transient(format!("{provider} {what}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_sorted_by_what_to_do() {
        use reqwest::StatusCode as S;
        assert!(matches!(classify(S::UNAUTHORIZED, None, "", "p"), ModelError::Permanent { .. }));
        assert!(matches!(classify(S::NOT_FOUND, None, "", "p"), ModelError::Permanent { .. }));
        assert!(matches!(classify(S::BAD_REQUEST, None, "", "p"), ModelError::Permanent { .. }));
        let limited = classify(S::TOO_MANY_REQUESTS, Some(Duration::from_secs(3)), "", "p");
        assert_eq!(
            limited,
            ModelError::Transient {
                reason: "p answered 429 Too Many Requests".into(),
                retry_after: Some(Duration::from_secs(3)),
                status: Some(429),
            }
        );
        assert!(matches!(
            classify(S::from_u16(529).unwrap(), None, "", "p"),
            ModelError::Transient { .. }
        ));
    }

    #[test]
    fn waits_are_read_from_retry_after_or_a_spent_rate_limit() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let headers = |pairs: &[(&'static str, String)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            map
        };
        let secs = Duration::from_secs;
        assert_eq!(retry_after(&headers(&[("retry-after", "3".into())])), Some(secs(3)));
        let openai = headers(&[
            ("x-ratelimit-remaining-requests", "0".into()),
            ("x-ratelimit-reset-requests", "1m30.5s".into()),
            ("x-ratelimit-remaining-tokens", "1200".into()),
            ("x-ratelimit-reset-tokens", "2h".into()),
        ]);
        assert_eq!(retry_after(&openai), Some(Duration::from_millis(90_500)), "tokens are left");
        let ms = headers(&[
            ("x-ratelimit-remaining-requests", "0".into()),
            ("x-ratelimit-reset-requests", "20ms".into()),
        ]);
        assert_eq!(retry_after(&ms), Some(Duration::from_millis(20)));
        let reset = (chrono::Utc::now() + chrono::Duration::seconds(30)).to_rfc3339();
        let anthropic = headers(&[
            ("anthropic-ratelimit-requests-remaining", "0".into()),
            ("anthropic-ratelimit-requests-reset", reset),
        ]);
        let wait = retry_after(&anthropic).unwrap();
        assert!(wait > secs(28) && wait <= secs(30), "{wait:?}");
        let left = headers(&[
            ("anthropic-ratelimit-requests-remaining", "7".into()),
            ("anthropic-ratelimit-requests-reset", "2030-01-01T00:00:00Z".into()),
        ]);
        assert_eq!(retry_after(&left), None);
        let garbled = headers(&[
            ("x-ratelimit-remaining-requests", "0".into()),
            ("x-ratelimit-reset-requests", "soon".into()),
        ]);
        assert_eq!(retry_after(&garbled), None);
    }
}
