//! OpenAI-compatible chat completions: OpenAI, Ollama, vLLM, llama.cpp server, LM Studio,
//! OpenRouter. `POST {base_url}/chat/completions`.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::{Completion, CompletionRequest, Endpoint, Kind, ModelError, ModelProvider, send_json};
use crate::domain::task::Usage;

const NAME: &str = "the OpenAI-compatible provider";

/// `kind = "openai"`.
pub(super) const KIND: Kind = Kind {
    name: "openai",
    default_base_url: "https://api.openai.com/v1",
    build: |endpoint: Endpoint| {
        std::sync::Arc::new(OpenAiProvider::new(
            endpoint.http,
            &endpoint.base_url,
            endpoint.api_key,
        ))
    },
};

#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    http: reqwest::Client,
    url: String,
    /// Local servers (Ollama, llama.cpp) need none.
    api_key: Option<SecretString>,
}

#[derive(Debug, Deserialize)]
struct Answer {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<TokenCounts>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: Message,
}

#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Debug, Deserialize)]
struct TokenCounts {
    prompt_tokens: i64,
    completion_tokens: i64,
}

impl OpenAiProvider {
    pub fn new(http: reqwest::Client, base_url: &str, api_key: Option<SecretString>) -> Self {
        Self { http, url: format!("{}/chat/completions", base_url.trim_end_matches('/')), api_key }
    }
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        let body = json!({
            "model": request.model,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.user},
            ],
            "max_tokens": request.max_tokens,
        });
        let mut call = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            call = call.bearer_auth(key.expose_secret());
        }
        let answer: Answer = send_json(call, NAME).await?;
        let text = answer
            .choices
            .into_iter()
            .next()
            .and_then(|choice| choice.message.content)
            .ok_or_else(|| ModelError::transient(format!("{NAME} answered without a message")))?;
        let usage = answer
            .usage
            .map(|u| Usage { input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens });
        Ok(Completion { text, usage })
    }
}
