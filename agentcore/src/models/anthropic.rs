//! Anthropic Messages: `POST {base_url}/v1/messages`.

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

const NAME: &str = "Anthropic";
const API_VERSION: &str = "2023-06-01";

/// `kind = "anthropic"`.
pub(super) const KIND: Kind = Kind {
    name: "anthropic",
    default_base_url: "https://api.anthropic.com",
    keyless_elsewhere: false,
    build: |endpoint: Endpoint| {
        std::sync::Arc::new(AnthropicProvider::new(
            endpoint.http,
            &endpoint.base_url,
            endpoint.api_key,
        ))
    },
    // Reads a tenth of the input rate, 5-minute writes a quarter more (Anthropic's pricing).
    cache_rates: CacheRates { read_percent: 10, write_percent: 125 },
};

#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    http: reqwest::Client,
    url: String,
    api_key: Option<SecretString>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Answer {
    content: Vec<Block>,
    #[serde(default)]
    usage: Option<TokenCounts>,
}

#[derive(Debug, Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: String,
    /// The rest are a `tool_use` block's.
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    input: Value,
}

/// Anthropic's `input_tokens` excludes the prompt tokens read from or written into the cache.
#[derive(Debug, Deserialize)]
struct TokenCounts {
    input_tokens: i64,
    output_tokens: i64,
    #[serde(default)]
    cache_read_input_tokens: Option<i64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<i64>,
}

impl AnthropicProvider {
    pub fn new(http: reqwest::Client, base_url: &str, api_key: Option<SecretString>) -> Self {
        Self { http, url: format!("{}/v1/messages", base_url.trim_end_matches('/')), api_key }
    }
}

#[async_trait]
impl ModelProvider for AnthropicProvider {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        let Some(key) = &self.api_key else {
            return Err(ModelError::permanent(
                "Anthropic needs models.anthropic_api_key (or ANTHROPIC_API_KEY)",
            ));
        };
        let call = self
            .http
            .post(&self.url)
            .header("x-api-key", key.expose_secret())
            .header("anthropic-version", API_VERSION)
            .json(&request_body(request));
        let (answer, spent_for) = send_json(call, NAME).await?;
        Ok(Completion { spent_for, ..read_answer(answer)? })
    }

    /// `POST /v1/messages/count_tokens`: the request as it would be sent, counted by
    /// Anthropic (free, with a rate limit of its own).
    async fn count_input_tokens(
        &self,
        request: &CompletionRequest,
    ) -> Result<Option<u64>, ModelError> {
        let Some(key) = &self.api_key else { return Ok(None) };
        let mut body = request_body(request);
        if let Some(fields) = body.as_object_mut() {
            fields.remove("max_tokens");
        }
        let call = self
            .http
            .post(format!("{}/count_tokens", self.url))
            .header("x-api-key", key.expose_secret())
            .header("anthropic-version", API_VERSION)
            .json(&body);
        let (counted, _): (Counted, _) = send_json(call, NAME).await?;
        Ok(Some(counted.input_tokens))
    }
}

#[derive(Debug, Deserialize)]
struct Counted {
    input_tokens: u64,
}

/// The JSON body of a Messages call for `request`, with cache breakpoints on its stable
/// prefix (see [`mark_cache_breakpoints`]).
pub(super) fn request_body(request: &CompletionRequest) -> Value {
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages(&request.messages),
    });
    if !request.system.is_empty() {
        body["system"] = json!([{"type": "text", "text": request.system}]);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
        if request.tool_choice == ToolChoice::None {
            body["tool_choice"] = json!({"type": "none"});
        }
    }
    mark_cache_breakpoints(&mut body);
    body
}

/// Anthropic caches a prompt's prefix up to a block marked `cache_control`, in its order:
/// tools, system, messages. Three marks of the four it allows: the last tool (the tools, the
/// same at every step of a run and across an agent's runs), the system prompt (the same
/// throughout a run), and the last block of the conversation, so the next step of the run,
/// which repeats the conversation and adds to it, reads it all from the cache. Short prompts
/// are marked too: below the model's minimum (1,024 tokens for Sonnet) Anthropic caches
/// nothing, charges nothing extra and reports no cache tokens, and whether a prompt is long
/// enough is the provider's count, not ours.
fn mark_cache_breakpoints(body: &mut Value) {
    let breakpoint = || json!({"type": "ephemeral"});
    if let Some(tool) =
        body.get_mut("tools").and_then(Value::as_array_mut).and_then(|t| t.last_mut())
    {
        tool["cache_control"] = breakpoint();
    }
    if let Some(system) = body.get_mut("system").and_then(|s| s.get_mut(0)) {
        system["cache_control"] = breakpoint();
    }
    let last = body.get_mut("messages").and_then(Value::as_array_mut).and_then(|m| m.last_mut());
    if let Some(turn) = last {
        // A turn given as one string becomes the one text block it stands for.
        if let Some(text) = turn["content"].as_str().map(str::to_owned) {
            turn["content"] = json!([{"type": "text", "text": text}]);
        }
        if let Some(block) = turn["content"].as_array_mut().and_then(|b| b.last_mut()) {
            block["cache_control"] = breakpoint();
        }
    }
}

/// The turns of the conversation; consecutive tool results are one user turn, as Anthropic
/// wants every result of an answer's calls in the turn right after it.
fn messages(conversation: &[Message]) -> Vec<Value> {
    let mut turns = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    for message in conversation {
        let turn = match message {
            Message::ToolResult { call_id, content, is_error } => {
                let mut result =
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                if *is_error {
                    result["is_error"] = Value::Bool(true);
                }
                results.push(result);
                continue;
            }
            // A question after the results goes in their turn: turns alternate.
            Message::User(text) if !results.is_empty() => {
                results.push(json!({"type": "text", "text": text}));
                turns.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
                continue;
            }
            Message::User(text) => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                blocks.extend(tool_calls.iter().map(|call| {
                    json!({"type": "tool_use", "id": call.id, "name": call.name,
                           "input": input(&call.arguments)})
                }));
                json!({"role": "assistant", "content": blocks})
            }
        };
        if !results.is_empty() {
            turns.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
        }
        turns.push(turn);
    }
    if !results.is_empty() {
        turns.push(json!({"role": "user", "content": results}));
    }
    turns
}

/// A call's arguments as the object Anthropic requires: `{}` when the model's text is not a
/// JSON object, which Anthropic would refuse to take back.
fn input(arguments: &str) -> Value {
    match serde_json::from_str(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({}),
    }
}

/// The completion in a successful answer: its text blocks joined, and its tool calls.
pub(super) fn read_answer(answer: Answer) -> Result<Completion, ModelError> {
    let mut text = Vec::new();
    let mut tool_calls = Vec::new();
    for block in answer.content {
        match block.kind.as_str() {
            "text" => text.push(block.text),
            "tool_use" => tool_calls.push(ToolCall {
                id: block.id,
                name: block.name,
                arguments: block.input.to_string(),
            }),
            _ => {}
        }
    }
    if text.is_empty() && tool_calls.is_empty() {
        return Err(ModelError::transient(format!("{NAME} answered without text")));
    }
    let usage = answer.usage.map(|u| Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_input_tokens.unwrap_or(0),
        cache_write_tokens: u.cache_creation_input_tokens.unwrap_or(0),
    });
    Ok(Completion { text: text.join("\n"), tool_calls, usage, spent_for: None })
}
