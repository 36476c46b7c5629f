//! The provider registry: model providers configured by name, each of a known kind, and which
//! one a model name (`<provider>:<model>`) means.
//!
//! Adding a kind of provider is one file that implements [`ModelProvider`] and defines its
//! [`Kind`], plus one line in [`KINDS`]. Adding a provider of a known kind is configuration
//! only (`[models.providers.<name>]`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::scrubbed::Scrubbed;
use super::tokens::{self, Counter, Encoding};
use super::{
    CompletionRequest, EchoProvider, Message, ModelError, ModelProvider, anthropic, openai,
};
use crate::domain::agent::{ECHO, ModelName, provider_name};
use crate::domain::budget::{CacheRates, Price};
use crate::domain::compaction::{KNOWN_WINDOWS, MAX_WINDOW, MIN_WINDOW, UNKNOWN_WINDOW};
use crate::domain::fallback::HealthPolicy;
use crate::domain::ratelimit::RateLimits;
use crate::error::{Error, Result};
use crate::scrub::Scrubber;

/// Every kind of provider this build can talk to.
pub const KINDS: [Kind; 2] = [openai::KIND, anthropic::KIND];

/// A kind of provider: its wire format, and where it is unless configured otherwise.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// As `kind = "..."` names it.
    pub name: &'static str,
    pub default_base_url: &'static str,
    /// Whether a server of this kind at another address than `default_base_url` may take
    /// calls without a key (a local OpenAI-compatible server); at the kind's own address, and
    /// for a kind without this, calls need one.
    pub keyless_elsewhere: bool,
    /// Builds a provider of this kind for one endpoint.
    pub build: fn(Endpoint) -> Arc<dyn ModelProvider>,
    /// What the kind's own service charges for cached prompt tokens: the cache rates of a
    /// model priced without them (`models.prices`' two-part form).
    pub cache_rates: CacheRates,
}

/// Where one configured provider is, and the HTTP client to reach it with.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub http: reqwest::Client,
    pub base_url: String,
    /// Local servers (Ollama, llama.cpp) need none.
    pub api_key: Option<SecretString>,
}

/// One configured provider.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// One of the [kinds](Kind): `openai` (any OpenAI-compatible server) or `anthropic`.
    pub kind: String,
    /// The kind's own address when `None`.
    pub base_url: Option<String>,
    pub api_key: Option<SecretString>,
}

impl ProviderConfig {
    /// A provider of `kind` at the kind's own address, without a key.
    pub fn of_kind(kind: &str) -> Self {
        Self { kind: kind.to_owned(), base_url: None, api_key: None }
    }

    /// The cache rates of its kind, for a price given without them; none for an unknown kind.
    pub fn cache_rates(&self) -> CacheRates {
        kind(&self.kind).map_or(CacheRates::NONE, |k| k.cache_rates)
    }

    /// The address calls go to: as configured, else the kind's own.
    pub fn effective_base_url(&self) -> Option<&str> {
        self.base_url.as_deref().or_else(|| kind(&self.kind).map(|k| k.default_base_url))
    }
}

/// The providers, and what every call shares.
#[derive(Debug, Clone)]
pub struct ModelsConfig {
    /// The model of agents that name none: `echo` or `<provider>:<model>`.
    pub default: String,
    /// By name. The defaults configure `openai` and `anthropic` at their public addresses.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Bounds each call.
    pub timeout: Duration,
    /// The answer's length bound sent with every call.
    pub max_tokens: u32,
    /// Prices by full model name (`openai:gpt-4o-mini`). A model without one is unpriced: its
    /// calls are recorded at 0 and no budget can hold them back.
    pub prices: BTreeMap<String, Price>,
    /// Requests and tokens per window that every node's calls share, by provider or model.
    pub rate_limits: RateLimits,
    /// Context windows in tokens by full model name; a model without one has
    /// [`UNKNOWN_WINDOW`]. A run's conversation is compacted as it nears its model's window.
    pub context_windows: BTreeMap<String, u32>,
    /// The server's fallback chains: a model's full name to the models tried after it, in
    /// order (agents with `fallback_models` of their own use theirs).
    pub fallbacks: BTreeMap<String, Vec<String>>,
    /// When a failing model cools down for every agent (`models.health.*`).
    pub health: HealthPolicy,
}

/// List prices of a few well-known models (dollars per million input, output, cache-read and
/// cache-write tokens), as the defaults of `models.prices`: examples to check against your
/// own contract, not truths. OpenAI's cached input is half the input rate for the GPT-4o
/// family and a quarter for GPT-4.1, and it charges nothing extra to write; Anthropic's
/// reads are a tenth of the input rate and its 5-minute writes 1.25 times it.
pub const EXAMPLE_PRICES: [(&str, f64, f64, f64, f64); 5] = [
    ("openai:gpt-4o-mini", 0.15, 0.60, 0.075, 0.15),
    ("openai:gpt-4o", 2.50, 10.00, 1.25, 2.50),
    ("openai:gpt-4.1-mini", 0.40, 1.60, 0.10, 0.40),
    ("anthropic:claude-sonnet-4-5", 3.00, 15.00, 0.30, 3.75),
    ("anthropic:claude-haiku-4-5", 1.00, 5.00, 0.10, 1.25),
];

impl Default for ModelsConfig {
    fn default() -> Self {
        let providers =
            KINDS.iter().map(|k| (k.name.to_owned(), ProviderConfig::of_kind(k.name))).collect();
        Self {
            default: ECHO.into(),
            providers,
            timeout: Duration::from_secs(120),
            max_tokens: 1024,
            prices: EXAMPLE_PRICES
                .iter()
                .filter_map(|(name, input, output, read, write)| {
                    let price = Price::per_million_usd(*input, *output).ok()?;
                    Some(((*name).to_owned(), price.with_cache_usd(*read, *write).ok()?))
                })
                .collect(),
            rate_limits: RateLimits::default(),
            context_windows: KNOWN_WINDOWS.iter().map(|(n, w)| ((*n).to_owned(), *w)).collect(),
            fallbacks: BTreeMap::new(),
            health: HealthPolicy::default(),
        }
    }
}

impl ModelsConfig {
    /// The provider called `name`, created of the kind of the same name if it is not
    /// configured yet (so `provider_mut("openai")` reaches the default OpenAI provider).
    pub fn provider_mut(&mut self, name: &str) -> &mut ProviderConfig {
        self.providers.entry(name.to_owned()).or_insert_with(|| ProviderConfig::of_kind(name))
    }
}

/// The names of the provider kinds, for messages.
pub fn kind_names() -> Vec<&'static str> {
    names_of(&KINDS)
}

fn names_of(kinds: &[Kind]) -> Vec<&'static str> {
    kinds.iter().map(|k| k.name).collect()
}

fn kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

/// One configured provider as a caller may see it: where it is and whether it has a key,
/// never the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    pub name: String,
    /// One of the [kinds](Kind).
    pub kind: &'static str,
    /// The address calls go to.
    pub base_url: String,
    pub has_key: bool,
    /// Whether calls to it need a key: see [`Kind::keyless_elsewhere`].
    pub needs_key: bool,
}

impl Configured {
    /// Whether a call to it can succeed as configured: it has a key, or needs none.
    pub fn usable(&self) -> bool {
        self.has_key || !self.needs_key
    }
}

/// The configured providers, and which one a model name means.
#[derive(Debug, Clone)]
pub struct Models {
    default: String,
    max_tokens: u32,
    /// `echo` first, then the configured ones by name.
    providers: Vec<(String, Arc<dyn ModelProvider>)>,
    /// The configured ones by name, as callers see them.
    configured: Vec<Configured>,
    pub(super) prices: BTreeMap<String, Price>,
    /// Token counts of the texts requests carry, shared by the clones.
    counter: Arc<Counter>,
    rate_limits: RateLimits,
    pub(super) context_windows: BTreeMap<String, u32>,
    pub(super) fallbacks: BTreeMap<String, Vec<String>>,
    pub(super) health: HealthPolicy,
}

/// Which model answers a run: the offline `echo`, a configured provider's model, or a name no
/// configured provider has (the run then fails as the provider would).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind<'a> {
    Echo,
    Provider(&'a str),
    Unknown,
}

impl ModelKind<'_> {
    /// The provider's name, as metrics label calls: `echo`, a provider's or `unknown`.
    pub fn label(&self) -> &str {
        match self {
            ModelKind::Echo => ECHO,
            ModelKind::Provider(name) => name,
            ModelKind::Unknown => "unknown",
        }
    }
}

impl Models {
    /// Builds every configured provider; a bad name, kind or address is `not_configured`, named
    /// by its setting.
    pub fn new(config: &ModelsConfig) -> Result<Self> {
        Self::with_kinds(config, &KINDS)
    }

    /// [`Models::new`] with the kinds of provider given: [`KINDS`] plus a program's own.
    pub fn with_kinds(config: &ModelsConfig, kinds: &[Kind]) -> Result<Self> {
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| Error::internal(format!("cannot build the HTTP client: {e}")))?;
        let mut providers: Vec<(String, Arc<dyn ModelProvider>)> =
            vec![(ECHO.into(), Arc::new(EchoProvider))];
        let mut configured = Vec::with_capacity(config.providers.len());
        for (name, provider) in &config.providers {
            let setting = format!("models.providers.{name}");
            provider_name(name).map_err(|e| Error::NotConfigured(format!("{setting}: {e}")))?;
            let Some(kind) = kinds.iter().find(|k| k.name == provider.kind) else {
                return Err(Error::NotConfigured(format!(
                    "{setting}.kind: '{}' is not a provider kind; use one of {}",
                    provider.kind,
                    names_of(kinds).join(", ")
                )));
            };
            let base_url = provider.base_url.as_deref().unwrap_or(kind.default_base_url);
            if !(base_url.starts_with("https://") || base_url.starts_with("http://")) {
                return Err(Error::NotConfigured(format!(
                    "{setting}.base_url: '{base_url}' is not an http(s) URL"
                )));
            }
            let has_key = provider.api_key.as_ref().is_some_and(|k| !k.expose_secret().is_empty());
            configured.push(Configured {
                name: name.clone(),
                kind: kind.name,
                base_url: base_url.to_owned(),
                has_key,
                needs_key: !kind.keyless_elsewhere || base_url == kind.default_base_url,
            });
            let endpoint = Endpoint {
                http: http.clone(),
                base_url: base_url.to_owned(),
                api_key: provider.api_key.clone(),
            };
            providers.push((name.clone(), (kind.build)(endpoint)));
        }
        let keys = config.providers.values().filter_map(|p| p.api_key.as_ref());
        let scrubber = Arc::new(Scrubber::new(keys.map(|k| k.expose_secret())));
        for (_, provider) in providers.iter_mut().skip(1) {
            let inner = Arc::clone(provider);
            *provider = Arc::new(Scrubbed { inner, scrubber: Arc::clone(&scrubber) });
        }
        for name in config.prices.keys() {
            let priced = ModelName::parse(name).ok().filter(|m| !m.is_echo());
            if priced.is_none() || !name.contains(':') {
                return Err(Error::NotConfigured(format!(
                    "models.prices: '{name}' is not a model name of the form <provider>:<model>"
                )));
            }
        }
        for scope in config.rate_limits.limits.keys() {
            let provider = scope.split_once(':').map_or(scope.as_str(), |(provider, _)| provider);
            if provider == ECHO || !config.providers.contains_key(provider) {
                return Err(Error::NotConfigured(format!(
                    "models.rate_limits: '{scope}' names no configured provider \
                     (<provider> or <provider>:<model>)"
                )));
            }
        }
        check_windows(&config.context_windows)?;
        let models = Self {
            default: config.default.clone(),
            max_tokens: config.max_tokens,
            providers,
            configured,
            prices: config.prices.clone(),
            counter: Arc::default(),
            rate_limits: config.rate_limits.clone(),
            context_windows: config.context_windows.clone(),
            fallbacks: config.fallbacks.clone(),
            health: config.health,
        };
        let default = ModelName::parse(&config.default).map_err(|e| {
            Error::NotConfigured(format!("models.default: '{}' {e}", config.default))
        })?;
        models.check(&default).map_err(|e| {
            Error::NotConfigured(format!("models.default: '{}' {e}", config.default))
        })?;
        models.check_fallbacks()?;
        Ok(models)
    }

    /// The server's default model name.
    pub fn default_model(&self) -> &str {
        &self.default
    }

    /// The full name of `model` (or the default) and its price, when it has one.
    pub fn price<'a>(&'a self, model: Option<&'a str>) -> (&'a str, Option<Price>) {
        let name = model.unwrap_or(&self.default);
        (name, self.prices.get(name).copied())
    }

    /// The shared rate limits (`models.rate_limits`).
    pub fn rate_limits(&self) -> &RateLimits {
        &self.rate_limits
    }

    /// The context window of `model` (or the default), in tokens: as configured, else
    /// [`UNKNOWN_WINDOW`].
    pub fn context_window(&self, model: Option<&str>) -> u32 {
        let name = model.unwrap_or(&self.default);
        self.context_windows.get(name).copied().unwrap_or(UNKNOWN_WINDOW)
    }

    /// The full names of the priced models, as cost metrics label them.
    pub fn priced(&self) -> impl Iterator<Item = &str> {
        self.prices.keys().map(String::as_str)
    }

    /// The providers calls are counted by: `echo`, then the configured ones.
    pub fn provider_names(&self) -> impl Iterator<Item = &str> {
        self.providers.iter().map(|(name, _)| name.as_str())
    }

    /// The configured providers by name, with their addresses and whether each has a key.
    pub fn configured(&self) -> &[Configured] {
        &self.configured
    }

    /// The providers a call can reach as configured: `echo`, then each that has a key or
    /// needs none.
    pub fn usable_providers(&self) -> impl Iterator<Item = &str> {
        let usable = self.configured.iter().filter(|p| p.usable()).map(|p| p.name.as_str());
        std::iter::once(ECHO).chain(usable)
    }

    /// The model names worth offering: `echo`, the default and every priced model whose
    /// provider is usable, each once.
    pub fn usable_models(&self) -> Vec<String> {
        let usable: Vec<&str> = self.usable_providers().collect();
        let reachable = |name: &str| {
            let provider = name.split_once(':').map_or(name, |(provider, _)| provider);
            usable.contains(&provider)
        };
        let mut models = vec![ECHO.to_owned()];
        let named = std::iter::once(self.default.as_str()).chain(self.priced());
        for name in named.filter(|name| reachable(name)) {
            if !models.iter().any(|m| m == name) {
                models.push(name.to_owned());
            }
        }
        models
    }

    /// Whether `model` names a configured provider; the error says which ones are usable.
    pub fn check(&self, model: &ModelName) -> std::result::Result<(), String> {
        if self.find(model.provider()).is_some() {
            return Ok(());
        }
        Err(format!(
            "names provider '{}', which is not configured (usable: {})",
            model.provider(),
            self.usable_providers().collect::<Vec<_>>().join(", ")
        ))
    }

    /// [`Models::check`], and that the provider can be called: one configured without the key
    /// it needs is refused too, so an agent is not created to fail its every task.
    pub fn check_usable(&self, model: &ModelName) -> std::result::Result<(), String> {
        self.check(model)?;
        match self.configured.iter().find(|p| p.name == model.provider()) {
            Some(provider) if !provider.usable() => Err(format!(
                "names provider '{}', which has no API key on this server (usable: {})",
                provider.name,
                self.usable_providers().collect::<Vec<_>>().join(", ")
            )),
            _ => Ok(()),
        }
    }

    /// Which model answers `model` (or the default).
    pub fn kind_of(&self, model: Option<&str>) -> ModelKind<'_> {
        let name = model.unwrap_or(&self.default);
        let provider = name.split_once(':').map_or(name, |(provider, _)| provider);
        match self.find(provider) {
            Some(_) if provider == ECHO => ModelKind::Echo,
            Some((name, _)) => ModelKind::Provider(name),
            None => ModelKind::Unknown,
        }
    }

    /// A bound on the input tokens `request` makes for `model` (or the default): never below
    /// what the provider will count, so a budget's reservation never under-counts.
    /// OpenAI's models are counted with OpenAI's tokenizer, every other model bounded by the
    /// request's bytes (see [`tokens`]).
    pub fn input_tokens_bound(&self, model: Option<&str>, request: &CompletionRequest) -> usize {
        let bytes = tokens::byte_bound(request);
        match self.encoding(model, &request.model) {
            Some(encoding) => self.counter.request(encoding, request).min(bytes),
            None => bytes,
        }
    }

    /// A guess at the input tokens of `request` for `model` (or the default), for decisions
    /// where a guess serves better than a bound (whether a run's context can still fit its
    /// window): OpenAI's models counted, every other counted with `cl100k_base` plus a
    /// quarter, never above [`Models::input_tokens_bound`]. Never for budgets.
    pub fn input_tokens_estimate(&self, model: Option<&str>, request: &CompletionRequest) -> usize {
        let bound = self.input_tokens_bound(model, request);
        if self.encoding(model, &request.model).is_some() {
            return bound;
        }
        let counted = self.counter.request(Encoding::Cl100kBase, request);
        counted.saturating_add(counted / 4).min(bound)
    }

    /// Whether `model`'s (or the default's) requests are counted with a tokenizer: an OpenAI
    /// model served by a provider of the `openai` kind.
    pub fn counted_exactly(&self, model: Option<&str>, provider_model: &str) -> bool {
        self.encoding(model, provider_model).is_some()
    }

    fn encoding(&self, model: Option<&str>, provider_model: &str) -> Option<Encoding> {
        let name = model.unwrap_or(&self.default);
        let (provider, _) = name.split_once(':')?;
        let configured = self.configured.iter().find(|c| c.name == provider)?;
        (configured.kind == "openai").then(|| Encoding::of_openai_model(provider_model)).flatten()
    }

    /// The provider that serves `model` (or the default), when one is configured.
    pub fn provider_of(&self, model: Option<&str>) -> Option<Arc<dyn ModelProvider>> {
        let name = model.unwrap_or(&self.default);
        let provider = name.split_once(':').map_or(name, |(provider, _)| provider);
        self.find(provider).map(|(_, provider)| provider.clone())
    }

    /// The provider and request for `model` (or the default when `None`): a conversation of
    /// the one user message, with no tools offered.
    pub fn resolve(
        &self,
        model: Option<&str>,
        system: &str,
        user: &str,
    ) -> std::result::Result<(Arc<dyn ModelProvider>, CompletionRequest), ModelError> {
        let name = model.unwrap_or(&self.default);
        let unknown = || ModelError::permanent(format!("unknown model '{name}'"));
        let (provider, model) = match name.split_once(':') {
            None if name == ECHO => (ECHO, ECHO),
            Some((provider, model)) if provider != ECHO && !model.is_empty() => (provider, model),
            _ => return Err(unknown()),
        };
        let (_, provider) = self.find(provider).ok_or_else(unknown)?;
        let request = CompletionRequest {
            model: model.to_owned(),
            system: system.to_owned(),
            messages: vec![Message::User(user.to_owned())],
            tools: Vec::new(),
            tool_choice: Default::default(),
            max_tokens: self.max_tokens,
        };
        Ok((provider.clone(), request))
    }

    fn find(&self, provider: &str) -> Option<&(String, Arc<dyn ModelProvider>)> {
        self.providers.iter().find(|(name, _)| name == provider)
    }
}

/// Each window names a model as `<provider>:<model>` and is within the stated bounds.
fn check_windows(windows: &BTreeMap<String, u32>) -> Result<()> {
    for (name, window) in windows {
        let named = ModelName::parse(name).ok().filter(|m| !m.is_echo());
        if named.is_none() || !name.contains(':') {
            return Err(Error::NotConfigured(format!(
                "models.context_windows: '{name}' is not a model name of the form \
                 <provider>:<model>"
            )));
        }
        if !(MIN_WINDOW..=MAX_WINDOW).contains(window) {
            return Err(Error::NotConfigured(format!(
                "models.context_windows.\"{name}\": {window} tokens is outside \
                 {MIN_WINDOW}..={MAX_WINDOW}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_pick_their_provider() {
        let models = Models::new(&ModelsConfig::default()).unwrap();
        let (_, request) = models.resolve(Some("openai:gpt-4o-mini"), "sys", "task").unwrap();
        assert_eq!((request.model.as_str(), request.max_tokens), ("gpt-4o-mini", 1024));
        assert_eq!(request.messages, [Message::User("task".into())]);
        assert!(request.tools.is_empty());
        let (_, request) = models.resolve(None, "sys", "task").unwrap();
        assert_eq!(request.model, "echo");
        assert!(matches!(
            models.resolve(Some("mistral:large"), "s", "u"),
            Err(ModelError::Permanent { .. })
        ));
        assert_eq!(models.provider_names().collect::<Vec<_>>(), ["echo", "anthropic", "openai"]);
    }

    #[test]
    fn providers_are_configured_by_name_beside_the_defaults() {
        let mut config = ModelsConfig::default();
        config.providers.insert(
            "ollama".into(),
            ProviderConfig {
                base_url: Some("http://127.0.0.1:11434/v1".into()),
                ..ProviderConfig::of_kind("openai")
            },
        );
        config.default = "ollama:llama3.1".into();
        let models = Models::new(&config).unwrap();
        assert_eq!(models.kind_of(None), ModelKind::Provider("ollama"));
        assert_eq!(models.kind_of(Some("openai:gpt-4o")).label(), "openai");
        assert_eq!(models.kind_of(Some("mistral:large")).label(), "unknown");
        assert_eq!(models.kind_of(Some("echo")), ModelKind::Echo);
        let named = |n: &str| ModelName::parse(n).unwrap();
        assert!(models.check(&named("ollama:qwen2.5")).is_ok());
        assert!(models.check(&named("echo")).is_ok());
        let refused = models.check(&named("mistral:large")).unwrap_err();
        assert_eq!(
            refused,
            "names provider 'mistral', which is not configured (usable: echo, ollama)"
        );
        let keyless = models.check_usable(&named("openai:gpt-4o")).unwrap_err();
        assert_eq!(
            keyless,
            "names provider 'openai', which has no API key on this server (usable: echo, ollama)"
        );
        assert!(models.check_usable(&named("ollama:qwen2.5")).is_ok(), "a local server needs none");
        let shown: Vec<_> = models.configured().iter().map(|p| (&*p.name, p.usable())).collect();
        assert_eq!(shown, [("anthropic", false), ("ollama", true), ("openai", false)]);
        assert_eq!(models.usable_models(), ["echo", "ollama:llama3.1"]);
    }

    /// A kind of provider is a `Kind` and its registration: here a fake one, beside the
    /// built-in kinds, serving a provider configured by name.
    #[tokio::test]
    async fn a_new_kind_is_one_definition_and_its_registration() {
        #[derive(Debug)]
        struct Fixed(String);
        #[async_trait::async_trait]
        impl ModelProvider for Fixed {
            async fn complete(
                &self,
                request: &CompletionRequest,
            ) -> std::result::Result<super::super::Completion, ModelError> {
                Ok(super::super::Completion {
                    text: format!("{} answers {}", self.0, request.model),
                    tool_calls: Vec::new(),
                    usage: None,
                    spent_for: None,
                })
            }
        }
        const FIXED: Kind = Kind {
            name: "fixed",
            default_base_url: "http://127.0.0.1:9/fixed",
            keyless_elsewhere: false,
            build: |endpoint| Arc::new(Fixed(endpoint.base_url)),
            cache_rates: CacheRates::NONE,
        };
        let kinds = [KINDS[0], KINDS[1], FIXED];
        let mut config = ModelsConfig::default();
        config.providers.insert("house".into(), ProviderConfig::of_kind("fixed"));
        let models = Models::with_kinds(&config, &kinds).unwrap();
        let (provider, request) = models.resolve(Some("house:m1"), "s", "u").unwrap();
        let answer = provider.complete(&request).await.unwrap();
        assert_eq!(answer.text, "http://127.0.0.1:9/fixed answers m1");
        let refused = Models::new(&config).unwrap_err().to_string();
        assert!(refused.contains("'fixed' is not a provider kind"), "unregistered: {refused}");
    }

    #[test]
    fn context_windows_are_known_configured_or_the_unknown_default() {
        let mut config = ModelsConfig::default();
        config.context_windows.insert("openai:small".into(), 4_000);
        let models = Models::new(&config).unwrap();
        assert_eq!(models.context_window(Some("openai:small")), 4_000);
        assert_eq!(models.context_window(Some("anthropic:claude-sonnet-4-5")), 200_000);
        assert_eq!(models.context_window(Some("openai:gpt-4o-mini")), 128_000);
        assert_eq!(models.context_window(Some("ollama:llama3.1")), UNKNOWN_WINDOW);
        config.context_windows.insert("openai:tiny".into(), 10);
        let refused = Models::new(&config).unwrap_err().to_string();
        assert!(refused.contains("models.context_windows.\"openai:tiny\": 10 tokens"), "{refused}");
        let mut config = ModelsConfig::default();
        config.context_windows.insert("gpt-4o".into(), 8_000);
        let refused = Models::new(&config).unwrap_err().to_string();
        assert!(refused.contains("models.context_windows: 'gpt-4o'"), "{refused}");
    }

    #[test]
    fn a_bad_provider_is_refused_by_its_setting() {
        let refused = |config: ModelsConfig| Models::new(&config).unwrap_err().to_string();
        let mut config = ModelsConfig::default();
        config.providers.insert("local".into(), ProviderConfig::of_kind("mistral"));
        let message = refused(config);
        assert!(message.contains("models.providers.local.kind: 'mistral'"), "{message}");
        assert!(message.contains("openai, anthropic"), "{message}");
        let mut config = ModelsConfig::default();
        config.provider_mut("openai").base_url = Some("ftp://x".into());
        assert!(refused(config).contains("models.providers.openai.base_url"));
        let mut config = ModelsConfig::default();
        config.providers.insert("Local".into(), ProviderConfig::of_kind("openai"));
        assert!(refused(config).contains("models.providers.Local"));
        let config = ModelsConfig { default: "mistral:large".into(), ..ModelsConfig::default() };
        assert!(refused(config).contains("models.default: 'mistral:large' names provider"));
        let config = ModelsConfig { default: "gpt-4o".into(), ..ModelsConfig::default() };
        assert!(refused(config).contains("models.default: 'gpt-4o' must be"));
    }
}
