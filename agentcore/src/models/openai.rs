//! OpenAI-compatible chat completions: OpenAI, Ollama, vLLM, llama.cpp server, LM Studio,
//! OpenRouter. `POST {base_url}/chat/completions`.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Completion, CompletionRequest, Endpoint, Kind, Message, ModelError, ModelProvider, ToolCall,
    ToolChoice, send_json,
};
use crate::domain::budget::CacheRates;
use crate::domain::task::Usage;

const NAME: &str = "the OpenAI-compatible provider";

/// `kind = "openai"`.
pub(super) const KIND: Kind = Kind {
    name: "openai",
    default_base_url: "https://api.openai.com/v1",
    // A local OpenAI-compatible server (Ollama, llama.cpp, vLLM) takes calls without a key.
    keyless_elsewhere: true,
    build: |endpoint: Endpoint| {
        std::sync::Arc::new(OpenAiProvider::new(
            endpoint.http,
            &endpoint.base_url,
            endpoint.api_key,
        ))
    },
    // OpenAI's cached input is half the input rate for its older models and less for newer
    // ones: half never under-counts. Writes cost nothing extra. Local servers report none.
    cache_rates: CacheRates { read_percent: 50, write_percent: 100 },
};

#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    http: reqwest::Client,
    url: String,
    /// Local servers (Ollama, llama.cpp) need none.
    api_key: Option<SecretString>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Answer {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<TokenCounts>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: AnswerMessage,
}

#[derive(Debug, Deserialize)]
struct AnswerMessage {
    /// `null` when the model only calls tools.
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireCall>>,
}

#[derive(Debug, Deserialize)]
struct WireCall {
    #[serde(default)]
    id: String,
    function: WireFunction,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    name: String,
    /// JSON text as OpenAI sends it; some compatible servers (older Ollama) send the object.
    #[serde(default)]
    arguments: Value,
}

/// OpenAI's `prompt_tokens` includes the `cached_tokens` read from its prompt cache.
#[derive(Debug, Deserialize)]
struct TokenCounts {
    prompt_tokens: i64,
    completion_tokens: i64,
    /// Absent from older models' answers and most compatible servers'.
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<i64>,
}

impl TokenCounts {
    /// As [`Usage`] counts them: the cached tokens apart from the rest of the prompt. OpenAI
    /// writes into its cache at no extra charge and reports no writes.
    fn usage(self) -> Usage {
        let cached = self.prompt_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0);
        let cached = cached.clamp(0, self.prompt_tokens.max(0));
        Usage {
            input_tokens: self.prompt_tokens - cached,
            output_tokens: self.completion_tokens,
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        }
    }
}

impl OpenAiProvider {
    pub fn new(http: reqwest::Client, base_url: &str, api_key: Option<SecretString>) -> Self {
        Self { http, url: format!("{}/chat/completions", base_url.trim_end_matches('/')), api_key }
    }
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        let mut call = self.http.post(&self.url).json(&request_body(request));
        if let Some(key) = &self.api_key {
            call = call.bearer_auth(key.expose_secret());
        }
        let (answer, spent_for) = send_json(call, NAME).await?;
        Ok(Completion { spent_for, ..read_answer(answer)? })
    }
}

/// The JSON body of a chat completion for `request`. OpenAI caches the longest prefix it saw
/// recently on its own; the body keeps that prefix stable: the system prompt first (nothing
/// in it changes within a run), the tools in the run's order, the conversation only appended
/// to. No `prompt_cache_key` is sent (see docs/decisions.md).
pub(super) fn request_body(request: &CompletionRequest) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    messages.extend(request.messages.iter().map(message));
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens,
    });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }})
            })
            .collect();
        body["tools"] = Value::Array(tools);
        if request.tool_choice == ToolChoice::None {
            body["tool_choice"] = json!("none");
        }
    }
    body
}

fn message(message: &Message) -> Value {
    match message {
        Message::User(text) => json!({"role": "user", "content": text}),
        Message::Assistant { text, tool_calls } => {
            let content = if text.is_empty() { Value::Null } else { json!(text) };
            let mut turn = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|call| {
                        json!({"id": call.id, "type": "function", "function": {
                            "name": call.name,
                            "arguments": call.arguments,
                        }})
                    })
                    .collect();
                turn["tool_calls"] = Value::Array(calls);
            }
            turn
        }
        // OpenAI has no error flag for a result: its content says so.
        Message::ToolResult { call_id, content, is_error: _ } => {
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    }
}

/// The completion in a successful answer: its text and tool calls, as sent.
pub(super) fn read_answer(answer: Answer) -> Result<Completion, ModelError> {
    let usage = answer.usage.map(TokenCounts::usage);
    let message = answer.choices.into_iter().next().map(|choice| choice.message);
    let (content, calls) =
        message.map_or((None, Vec::new()), |m| (m.content, m.tool_calls.unwrap_or_default()));
    if content.is_none() && calls.is_empty() {
        return Err(ModelError::transient(format!("{NAME} answered without a message")));
    }
    let tool_calls = calls
        .into_iter()
        .map(|call| ToolCall {
            id: call.id,
            name: call.function.name,
            arguments: match call.function.arguments {
                Value::String(text) => text,
                // No arguments at all: the empty arguments object.
                Value::Null => "{}".to_owned(),
                object => object.to_string(),
            },
        })
        .collect();
    Ok(Completion { text: content.unwrap_or_default(), tool_calls, usage, spent_for: None })
}
