//! `[models]`: the default model, what every call shares, and the providers by name.
//!
//! `[models.providers.<name>]` (`AGENTD_MODELS__PROVIDERS__<NAME>__KIND`, `__BASE_URL`,
//! `__API_KEY`) configures a provider; model names then read `<name>:<model>`. The providers
//! `openai` and `anthropic` exist without being configured, and the settings from before the
//! registry still configure them: `models.openai_base_url`, `models.openai_api_key` (else
//! `OPENAI_API_KEY`), and the same for `anthropic`. A field set in the provider's own table
//! wins over them.
//!
//! `[models.prices]` (`AGENTD_MODELS__PRICES`: `<provider>:<model>=<input>/<output>`, comma
//! separated) prices models in dollars per million input and output tokens; it adds to (and
//! overrides) the example prices of a few well-known models.

use agentcore::domain::agent::provider_name;
use std::collections::BTreeMap;

use agentcore::domain::budget::Price;
use agentcore::domain::fallback::{FallbackModels, HealthPolicy};
use agentcore::models::{ModelsConfig, ProviderConfig};
use secrecy::{ExposeSecret, SecretString};

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
        let parsed = pair.split_once('=').and_then(|(model, price)| {
            let (input, output) = price.split_once('/')?;
            let (input, output) = (input.trim().parse().ok()?, output.trim().parse().ok()?);
            Some((model.trim().to_owned(), Price::per_million_usd(input, output)))
        });
        match parsed {
            Some((model, Ok(price))) => {
                prices.insert(model, price);
            }
            Some((model, Err(e))) => {
                return Err(ConfigError(format!("models.prices.\"{model}\": {e}")));
            }
            None => {
                return Err(ConfigError(format!(
                    "models.prices: '{pair}' is not <provider>:<model>=<input>/<output> \
                     (dollars per million tokens, e.g. openai:gpt-4o-mini=0.15/0.60)"
                )));
            }
        }
    }
    Ok(ModelsConfig {
        default: src.get("AGENTD_MODELS__DEFAULT").unwrap_or(defaults.default),
        fallbacks: fallbacks(src)?,
        health: health(src, defaults.health)?,
        prices,
        providers,
        timeout: src.seconds("AGENTD_MODELS__TIMEOUT_SECONDS", false)?.unwrap_or(defaults.timeout),
        max_tokens: src.count("AGENTD_MODELS__MAX_TOKENS", false)?.unwrap_or(defaults.max_tokens),
    })
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
            (model.clone(), Value::String(format!("{}/{}", usd(price.input), usd(price.output))))
        })
        .collect();
    insert(root, "models.prices", Value::Table(prices));
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
