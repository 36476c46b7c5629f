//! `GET /api/models`: the model providers the operator configured, as callers may see them.

use serde::{Deserialize, Serialize};

/// `GET /api/models`: which models an agent can use on this server, and each configured
/// provider with whether it has a key (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelList {
    /// The model of agents that name none: `echo` or `<provider>:<model>`.
    pub default_model: String,
    /// Model names worth offering: `echo`, the default and every priced model of a usable
    /// provider. Any other model of a usable provider works too (`<provider>:<model>`).
    pub models: Vec<String>,
    /// The providers a model name may use: `echo` first, then each configured one that has a
    /// key or needs none.
    pub usable_providers: Vec<String>,
    /// Every configured provider, by name.
    pub providers: Vec<ProviderStatus>,
    /// The models that failed lately, shared by every node: `healthy` (failing, not yet
    /// cooling down), `cooling_down` until `cooldown_until`, or `probing`. A model not listed
    /// is healthy.
    #[serde(default)]
    pub health: Vec<crate::domain::fallback::ModelHealth>,
}

/// One configured provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProviderStatus {
    /// What model names start with: `<name>:<model>`.
    pub name: String,
    /// The API it speaks: `openai` (any OpenAI-compatible server) or `anthropic`.
    pub kind: String,
    /// The address calls go to.
    pub base_url: String,
    /// Whether the operator configured a key for it.
    pub has_key: bool,
    /// Whether calls need a key: false for an OpenAI-compatible server at an address of its
    /// own (a local server such as Ollama or llama.cpp).
    pub needs_key: bool,
    /// Whether agents can use it now: it has a key, or needs none.
    pub usable: bool,
}
