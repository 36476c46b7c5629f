//! Anthropic Messages: `POST {base_url}/v1/messages`.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Completion, CompletionRequest, Endpoint, Kind, Message, ModelError, ModelProvider, ToolCall,
    ToolChoice, send_json,
};
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

#[derive(Debug, Deserialize)]
struct TokenCounts {
    input_tokens: i64,
    output_tokens: i64,
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

/// The JSON body of a Messages call for `request`.
pub(super) fn request_body(request: &CompletionRequest) -> Value {
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": request.system,
        "messages": messages(&request.messages),
    });
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
    body
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
    let usage = answer
        .usage
        .map(|u| Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens });
    Ok(Completion { text: text.join("\n"), tool_calls, usage, spent_for: None })
}
