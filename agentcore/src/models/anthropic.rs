//! Anthropic Messages: `POST {base_url}/v1/messages`.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::{Completion, CompletionRequest, Endpoint, Kind, ModelError, ModelProvider, send_json};
use crate::domain::task::Usage;

const NAME: &str = "Anthropic";
const API_VERSION: &str = "2023-06-01";

/// `kind = "anthropic"`.
pub(super) const KIND: Kind = Kind {
    name: "anthropic",
    default_base_url: "https://api.anthropic.com",
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
struct Answer {
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
        let body = json!({
            "model": request.model,
            "max_tokens": request.max_tokens,
            "system": request.system,
            "messages": [{"role": "user", "content": request.user}],
        });
        let call = self
            .http
            .post(&self.url)
            .header("x-api-key", key.expose_secret())
            .header("anthropic-version", API_VERSION)
            .json(&body);
        let answer: Answer = send_json(call, NAME).await?;
        let text: Vec<String> =
            answer.content.into_iter().filter(|b| b.kind == "text").map(|b| b.text).collect();
        if text.is_empty() {
            return Err(ModelError::transient(format!("{NAME} answered without text")));
        }
        let usage = answer
            .usage
            .map(|u| Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens });
        Ok(Completion { text: text.join("\n"), usage })
    }
}
