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

/// Sends a provider call and reads a successful answer as `T`; any failure comes back sorted.
pub(crate) async fn send_json<T: serde::de::DeserializeOwned>(
    call: reqwest::RequestBuilder,
    provider: &str,
) -> Result<T, ModelError> {
    let response = call.send().await.map_err(|e| transport(&e, provider))?;
    let status = response.status();
    let wait = retry_after(response.headers());
    let body = response.bytes().await.map_err(|e| transport(&e, provider))?;
    if !status.is_success() {
        let detail: ErrorBody = serde_json::from_slice(&body).unwrap_or_default();
        return Err(classify(status, wait, &detail.error.message, provider));
    }
    serde_json::from_slice(&body)
        .map_err(|e| ModelError::transient(format!("{provider} sent an unreadable answer: {e}")))
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

/// `Retry-After` in seconds, as providers send it.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
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
}
