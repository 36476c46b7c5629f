//! `[models]`: the default model, what every call shares, and the providers by name.
//!
//! `[models.providers.<name>]` (`AGENTD_MODELS__PROVIDERS__<NAME>__KIND`, `__BASE_URL`,
//! `__API_KEY`) configures a provider; model names then read `<name>:<model>`. The providers
//! `openai` and `anthropic` exist without being configured, and the settings from before the
//! registry still configure them: `models.openai_base_url`, `models.openai_api_key` (else
//! `OPENAI_API_KEY`), and the same for `anthropic`. A field set in the provider's own table
//! wins over them.
//!
//! `[models.prices]` (`AGENTD_MODELS__PRICES`: `<provider>:<model>=<input>/<output>` or
//! `...=<input>/<output>/<cache_read>/<cache_write>`, comma separated) prices models in dollars
//! per million input, output and cached prompt tokens (the two-part form takes the cache rates
//! of the provider's kind); it adds to (and overrides) the example prices of a few well-known
//! models.
//!
//! `[models.rate_limits]` (`AGENTD_MODELS__RATE_LIMITS`: `<scope>=<requests>/<tokens>`, comma
//! separated, `-` for unlimited) limits the calls every node sends to a provider (`openai`) or
//! one of its models (`openai:gpt-4o`) per window: `models.rate_limit_window_seconds`, a
//! minute unless set (shorter for tests).
//!
//! `[models.context_windows]` (`AGENTD_MODELS__CONTEXT_WINDOWS`: `<provider>:<model>=<tokens>`,
//! comma separated) says how many tokens each model's context holds; it adds to (and overrides)
//! the windows of a few well-known models. A run's conversation is compacted as it nears it.

use agentcore::domain::agent::provider_name;
use std::collections::BTreeMap;

use agentcore::domain::budget::{CacheRates, Price};
use agentcore::domain::fallback::{FallbackModels, HealthPolicy};
use agentcore::domain::ratelimit::{MAX_WINDOW, RateLimit, RateLimits};
use agentcore::models::{ModelsConfig, ProviderConfig};
use secrecy::{ExposeSecret, SecretString};
use std::time::Duration;

use super::ConfigError;
use super::settings::{insert, list, number, seconds};
use super::sources::Sources;

const PROVIDERS: &str = "AGENTD_MODELS__PROVIDERS__";

pub(super) fn models(src: &Sources<'_>) -> Result<ModelsConfig, ConfigError> {
    let defaults = ModelsConfig::default();
    let mut providers = defaults.providers;
    // The settings from before the registry, for the default providers.
    for (name, provider) in &mut providers {
        let upper = name.to_uppercase();
        if let Some(url) = src.get(&format!("AGENTD_MODELS__{upper}_BASE_URL")) {
            provider.base_url = Some(url);
        }
        provider.api_key = match src.secret(&format!("AGENTD_MODELS__{upper}_API_KEY"))? {
            Some(key) => Some(key),
            None => src.get(&format!("{upper}_API_KEY")).map(SecretString::from),
        };
    }
    let named = src.names_under(PROVIDERS);
    let names = named.iter().filter_map(|rest| rest.split_once("__").map(|(name, _)| name));
    for upper in names.collect::<std::collections::BTreeSet<_>>() {
        let name = upper.to_lowercase();
        let setting = format!("models.providers.{name}");
        provider_name(&name).map_err(|e| ConfigError(format!("{setting}: {e}")))?;
        let prefix = format!("{PROVIDERS}{upper}__");
        let kind = src.get(&format!("{prefix}KIND"));
        let provider = match (providers.get_mut(&name), kind) {
            (Some(provider), Some(kind)) => {
                provider.kind = kind;
                provider
            }
            (Some(provider), None) => provider,
            (None, Some(kind)) => providers.entry(name).or_insert(ProviderConfig::of_kind(&kind)),
            (None, None) => {
                return Err(ConfigError(format!(
                    "{setting}.kind: missing; say which API the provider speaks: {}",
                    agentcore::models::kind_names().join(" or ")
                )));
            }
        };
        if let Some(url) = src.get(&format!("{prefix}BASE_URL")) {
            provider.base_url = Some(url);
        }
        if let Some(key) = src.secret(&format!("{prefix}API_KEY"))? {
            provider.api_key = Some(key);
        }
    }
    for (name, provider) in &providers {
        let url = provider.base_url.as_deref().unwrap_or("https://");
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(ConfigError(format!(
                "models.providers.{name}.base_url: '{url}' is not an http(s) URL"
            )));
        }
    }
    let mut prices = defaults.prices;
    for pair in list(&src.get("AGENTD_MODELS__PRICES").unwrap_or_default()) {
        let Some((model, price)) = pair.split_once('=') else {
            return Err(bad_price(&pair));
        };
        let model = model.trim().to_owned();
        // The two-part form takes its cache rates from the provider's kind.
        let rates = model
            .split_once(':')
            .and_then(|(provider, _)| providers.get(provider))
            .map_or(CacheRates::NONE, ProviderConfig::cache_rates);
        match parse_price(price, rates) {
            Some(Ok(price)) => {
                prices.insert(model, price);
            }
            Some(Err(e)) => return Err(ConfigError(format!("models.prices.\"{model}\": {e}"))),
            None => return Err(bad_price(&pair)),
        }
    }
    let mut context_windows = defaults.context_windows;
    for pair in list(&src.get("AGENTD_MODELS__CONTEXT_WINDOWS").unwrap_or_default()) {
        let parsed = pair.split_once('=').and_then(|(model, tokens)| {
            Some((model.trim().to_owned(), tokens.trim().replace('_', "").parse().ok()?))
        });
        let Some((model, tokens)) = parsed else {
            return Err(ConfigError(format!(
                "models.context_windows: '{pair}' is not <provider>:<model>=<tokens> \
                 (e.g. ollama:llama3.1=32000)"
            )));
        };
        context_windows.insert(model, tokens);
    }
    Ok(ModelsConfig {
        default: src.get("AGENTD_MODELS__DEFAULT").unwrap_or(defaults.default),
        fallbacks: fallbacks(src)?,
        health: health(src, defaults.health)?,
        prices,
        context_windows,
        providers,
        timeout: src.seconds("AGENTD_MODELS__TIMEOUT_SECONDS", false)?.unwrap_or(defaults.timeout),
        max_tokens: src.count("AGENTD_MODELS__MAX_TOKENS", false)?.unwrap_or(defaults.max_tokens),
        rate_limits: rate_limits(src)?,
    })
}

/// `[models.rate_limits]` and the window they count over, within their bounds.
fn rate_limits(src: &Sources<'_>) -> Result<RateLimits, ConfigError> {
    let mut limits = RateLimits::default();
    let window = "AGENTD_MODELS__RATE_LIMIT_WINDOW_SECONDS";
    if let Some(seconds) = src.seconds(window, false)? {
        if seconds > MAX_WINDOW || seconds < Duration::from_millis(100) {
            return Err(ConfigError(format!(
                "models.rate_limit_window_seconds: must be from 0.1 to {}",
                MAX_WINDOW.as_secs()
            )));
        }
        limits.window = seconds;
    }
    for pair in list(&src.get("AGENTD_MODELS__RATE_LIMITS").unwrap_or_default()) {
        let Some((scope, limit)) = pair.split_once('=') else {
            return Err(ConfigError(format!(
                "models.rate_limits: '{pair}' is not <provider>[:<model>]=<requests>/<tokens>"
            )));
        };
        let scope = scope.trim();
        let limit = RateLimit::parse(limit)
            .map_err(|e| ConfigError(format!("models.rate_limits.\"{scope}\": {e}")))?;
        limits.limits.insert(scope.to_owned(), limit);
    }
    Ok(limits)
}

/// `<input>/<output>` or `<input>/<output>/<cache_read>/<cache_write>`, dollars per million
/// tokens; `None` when it is neither form of numbers.
fn parse_price(text: &str, rates: CacheRates) -> Option<Result<Price, String>> {
    let parts: Vec<f64> =
        text.split('/').map(|part| part.trim().parse().ok()).collect::<Option<_>>()?;
    match parts[..] {
        [input, output] => {
            Some(Price::per_million_usd(input, output).map(|p| p.with_cache_rates(rates)))
        }
        [input, output, read, write] => {
            Some(Price::per_million_usd(input, output).and_then(|p| p.with_cache_usd(read, write)))
        }
        _ => None,
    }
}

fn bad_price(pair: &str) -> ConfigError {
    ConfigError(format!(
        "models.prices: '{pair}' is not <provider>:<model>=<input>/<output>[/<cache_read>/<cache_write>] \
         (dollars per million tokens, e.g. openai:gpt-4o-mini=0.15/0.60 or \
         anthropic:claude-sonnet-4-5=3/15/0.30/3.75)"
    ))
}

/// `[models.fallbacks]` (`AGENTD_MODELS__FALLBACKS`: `<model>=<fallback>|<fallback>`, comma
/// separated; an empty chain: none): the server's fallback chains, by the model they follow.
/// Whether each names a configured provider is checked with the providers, at start.
fn fallbacks(src: &Sources<'_>) -> Result<BTreeMap<String, Vec<String>>, ConfigError> {
    let mut chains = BTreeMap::new();
    for pair in list(&src.get("AGENTD_MODELS__FALLBACKS").unwrap_or_default()) {
        let Some((model, chain)) = pair.split_once('=') else {
            return Err(ConfigError(format!(
                "models.fallbacks: '{pair}' is not <provider>:<model>=<fallback>|<fallback> \
                 (e.g. anthropic:claude-sonnet-4-5=openai:gpt-4o|ollama:llama3.1)"
            )));
        };
        let chain: Vec<String> =
            chain.split('|').map(str::trim).filter(|m| !m.is_empty()).map(str::to_owned).collect();
        if let Err(e) = FallbackModels::parse(&chain) {
            return Err(ConfigError(format!("models.fallbacks.\"{}\": {e}", model.trim())));
        }
        chains.insert(model.trim().to_owned(), chain);
    }
    Ok(chains)
}

/// `[models.health]`: when a failing model cools down for every agent.
fn health(src: &Sources<'_>, defaults: HealthPolicy) -> Result<HealthPolicy, ConfigError> {
    let policy = HealthPolicy {
        failures_to_cool_down: src
            .count("AGENTD_MODELS__HEALTH__FAILURES_TO_COOL_DOWN", false)?
            .unwrap_or(defaults.failures_to_cool_down),
        cooldown: src
            .seconds("AGENTD_MODELS__HEALTH__COOLDOWN_SECONDS", false)?
            .unwrap_or(defaults.cooldown),
        max_cooldown: src
            .seconds("AGENTD_MODELS__HEALTH__MAX_COOLDOWN_SECONDS", false)?
            .unwrap_or(defaults.max_cooldown),
    };
    if policy.failures_to_cool_down > 100 {
        return Err(ConfigError(
            "models.health.failures_to_cool_down: must be from 1 to 100".into(),
        ));
    }
    if policy.max_cooldown > std::time::Duration::from_secs(86_400) {
        return Err(ConfigError(
            "models.health.max_cooldown_seconds: must be at most 86400 (a day)".into(),
        ));
    }
    if policy.max_cooldown < policy.cooldown {
        return Err(ConfigError(
            "models.health.max_cooldown_seconds: must be at least models.health.cooldown_seconds"
                .into(),
        ));
    }
    Ok(policy)
}

/// `[models]` and `[models.providers.<name>]` for `agentd config`.
pub(super) fn show(models: &ModelsConfig, root: &mut toml::Table) {
    use toml::Value;
    insert(root, "models.default", Value::String(models.default.clone()));
    insert(root, "models.timeout_seconds", seconds(models.timeout));
    insert(root, "models.max_tokens", number(models.max_tokens));
    let mut providers = toml::Table::new();
    for (name, provider) in &models.providers {
        let mut table = toml::Table::new();
        table.insert("kind".into(), Value::String(provider.kind.clone()));
        if let Some(url) = provider.effective_base_url() {
            table.insert("base_url".into(), Value::String(url.to_owned()));
        }
        if provider.api_key.as_ref().is_some_and(|k| !k.expose_secret().is_empty()) {
            table.insert("api_key".into(), Value::String("<redacted>".into()));
        }
        providers.insert(name.clone(), Value::Table(table));
    }
    insert(root, "models.providers", Value::Table(providers));
    let prices = models
        .prices
        .iter()
        .map(|(model, price)| {
            let usd = |micros: i64| micros as f64 / 1e6;
            let shown = [price.input, price.output, price.cache_read, price.cache_write]
                .map(|micros| usd(micros).to_string())
                .join("/");
            (model.clone(), Value::String(shown))
        })
        .collect();
    insert(root, "models.prices", Value::Table(prices));
    let window = &models.rate_limits.window;
    insert(root, "models.rate_limit_window_seconds", seconds(*window));
    let limits = models.rate_limits.limits.iter();
    let limits = limits.map(|(scope, limit)| (scope.clone(), Value::String(limit.text())));
    insert(root, "models.rate_limits", Value::Table(limits.collect()));
    let windows = models.context_windows.iter().map(|(model, w)| (model.clone(), number(*w)));
    insert(root, "models.context_windows", Value::Table(windows.collect()));
    let fallbacks = models
        .fallbacks
        .iter()
        .map(|(model, chain)| {
            let chain = chain.iter().map(|m| Value::String(m.clone())).collect();
            (model.clone(), Value::Array(chain))
        })
        .collect();
    insert(root, "models.fallbacks", Value::Table(fallbacks));
    let health = &models.health;
    insert(root, "models.health.failures_to_cool_down", number(health.failures_to_cool_down));
    insert(root, "models.health.cooldown_seconds", seconds(health.cooldown));
    insert(root, "models.health.max_cooldown_seconds", seconds(health.max_cooldown));
}
