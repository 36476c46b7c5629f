//! Language models behind the project's own trait.
//!
//! Three providers: any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM,
//! llama.cpp server, LM Studio, OpenRouter), Anthropic Messages, and `echo`, which calls no
//! model and says so. The wire formats are small and their error semantics matter to the
//! runtime (which failures to retry, how long `Retry-After` says to wait, which ones mean the
//! agent can never succeed), so both are written here over `reqwest` rather than through a
//! general LLM client; see ARCHITECTURE.md.

mod anthropic;
mod echo;
mod openai;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use secrecy::SecretString;

pub use anthropic::AnthropicProvider;
pub use echo::EchoProvider;
pub use openai::OpenAiProvider;

use crate::domain::task::Usage;

/// One call: the agent's role prompt, the task, and a bound on the answer's length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRequest {
    /// The provider's own model name (`gpt-4o-mini`, `claude-sonnet-4-5`, `llama3.1`).
    pub model: String,
    pub system: String,
    pub user: String,
    pub max_tokens: u32,
}

/// The model's answer and what it cost, when the provider says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub usage: Option<Usage>,
}

/// Why a call failed, sorted by what the caller should do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Try again later: a timeout, a dropped connection, 429, 5xx. `retry_after` is the
    /// provider's own advice, when it gave one.
    #[error("{reason}")]
    Transient { reason: String, retry_after: Option<Duration> },
    /// This will never work as configured: a bad key, an unknown model, a refused request.
    #[error("{reason}")]
    Permanent { reason: String },
}

impl ModelError {
    pub fn transient(reason: impl Into<String>) -> Self {
        ModelError::Transient { reason: reason.into(), retry_after: None }
    }

    pub fn permanent(reason: impl Into<String>) -> Self {
        ModelError::Permanent { reason: reason.into() }
    }
}

#[async_trait]
pub trait ModelProvider: Send + Sync + fmt::Debug {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError>;
}

/// Where the providers are and how to reach them.
#[derive(Debug, Clone)]
pub struct ModelsConfig {
    /// The model of agents that name none: `echo`, `openai:<model>` or `anthropic:<model>`.
    pub default: String,
    pub openai_base_url: String,
    pub openai_api_key: Option<SecretString>,
    pub anthropic_base_url: String,
    pub anthropic_api_key: Option<SecretString>,
    /// Bounds each call.
    pub timeout: Duration,
    /// The answer's length bound sent with every call.
    pub max_tokens: u32,
}

impl Default for ModelsConfig {
    fn default() -> Self {
        Self {
            default: "echo".into(),
            openai_base_url: "https://api.openai.com/v1".into(),
            openai_api_key: None,
            anthropic_base_url: "https://api.anthropic.com".into(),
            anthropic_api_key: None,
            timeout: Duration::from_secs(120),
            max_tokens: 1024,
        }
    }
}

/// The configured providers, and which one a model name means.
#[derive(Debug, Clone)]
pub struct Models {
    default: String,
    max_tokens: u32,
    echo: Arc<EchoProvider>,
    openai: Arc<OpenAiProvider>,
    anthropic: Arc<AnthropicProvider>,
}

impl Models {
    pub fn new(config: &ModelsConfig) -> Result<Self, ModelError> {
        crate::install_tls_provider();
        let http = reqwest::Client::builder()
            .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| ModelError::permanent(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            default: config.default.clone(),
            max_tokens: config.max_tokens,
            echo: Arc::new(EchoProvider),
            openai: Arc::new(OpenAiProvider::new(
                http.clone(),
                &config.openai_base_url,
                config.openai_api_key.clone(),
            )),
            anthropic: Arc::new(AnthropicProvider::new(
                http,
                &config.anthropic_base_url,
                config.anthropic_api_key.clone(),
            )),
        })
    }

    /// The server's default model name.
    pub fn default_model(&self) -> &str {
        &self.default
    }

    /// The provider's name for `model` (or the default), as metrics label calls: `echo`,
    /// `openai`, `anthropic`, or `unknown`.
    pub fn provider_of(&self, model: Option<&str>) -> &'static str {
        let name = model.unwrap_or(&self.default);
        let provider = name.split_once(':').map_or(name, |(provider, _)| provider);
        crate::telemetry::PROVIDERS.into_iter().find(|p| *p == provider).unwrap_or("unknown")
    }

    /// The provider and request for `model` (or the default when `None`).
    pub fn resolve(
        &self,
        model: Option<&str>,
        system: &str,
        user: &str,
    ) -> Result<(Arc<dyn ModelProvider>, CompletionRequest), ModelError> {
        let name = model.unwrap_or(&self.default);
        let (provider, model): (Arc<dyn ModelProvider>, &str) = match name.split_once(':') {
            None if name == "echo" => (self.echo.clone(), "echo"),
            Some(("openai", model)) if !model.is_empty() => (self.openai.clone(), model),
            Some(("anthropic", model)) if !model.is_empty() => (self.anthropic.clone(), model),
            _ => return Err(ModelError::permanent(format!("unknown model '{name}'"))),
        };
        let request = CompletionRequest {
            model: model.to_owned(),
            system: system.to_owned(),
            user: user.to_owned(),
            max_tokens: self.max_tokens,
        };
        Ok((provider, request))
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
        },
        s if s >= 500 => ModelError::Transient {
            reason: format!("{provider} answered {status}{detail}"),
            retry_after,
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
    fn model_names_pick_their_provider() {
        let models = Models::new(&ModelsConfig::default()).unwrap();
        let (_, request) = models.resolve(Some("openai:gpt-4o-mini"), "sys", "task").unwrap();
        assert_eq!((request.model.as_str(), request.max_tokens), ("gpt-4o-mini", 1024));
        let (_, request) = models.resolve(None, "sys", "task").unwrap();
        assert_eq!(request.model, "echo");
        assert!(matches!(
            models.resolve(Some("mistral:large"), "s", "u"),
            Err(ModelError::Permanent { .. })
        ));
    }

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
                retry_after: Some(Duration::from_secs(3))
            }
        );
        assert!(matches!(
            classify(S::from_u16(529).unwrap(), None, "", "p"),
            ModelError::Transient { .. }
        ));
    }
}
