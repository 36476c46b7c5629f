//! The server's fallback chains (`models.fallbacks`) and health policy, as the registry holds
//! them: checked at start, read by the runtime for each run.

use super::Models;
use crate::domain::agent::ModelName;
use crate::domain::fallback::{FallbackModels, HealthPolicy, chain};
use crate::error::{Error, Result};

impl Models {
    /// The models a run of an agent with `model` (or the default) and its own `fallbacks`
    /// calls, in order (see [`chain`]). `echo` has no fallback: it cannot fail.
    pub fn chain_of(&self, model: Option<&str>, fallbacks: Option<&[String]>) -> Vec<String> {
        let primary = model.unwrap_or(self.default_model());
        if primary == crate::domain::agent::ECHO {
            return vec![primary.to_owned()];
        }
        chain(primary, fallbacks, self.fallbacks.get(primary).map(Vec::as_slice))
    }

    /// Whether a setting names `model` (the default, a price, a context window, a fallback
    /// chain): a name the operator chose, not one a tenant typed.
    pub fn named_by_settings(&self, model: &str) -> bool {
        model == self.default_model()
            || self.prices.contains_key(model)
            || self.context_windows.contains_key(model)
            || self.fallbacks.iter().any(|(primary, chain)| {
                primary == model || chain.iter().any(|fallback| fallback == model)
            })
    }

    /// When a failing model cools down.
    pub fn health_policy(&self) -> HealthPolicy {
        self.health
    }

    /// Each chain of `models.fallbacks` is named by a model and lists models of configured
    /// providers, as an agent's `fallback_models` must; else `not_configured`, by its setting.
    pub(super) fn check_fallbacks(&self) -> Result<()> {
        for (primary, fallbacks) in &self.fallbacks {
            let setting = format!("models.fallbacks.\"{primary}\"");
            let bad = |e: String| Error::NotConfigured(format!("{setting}: {e}"));
            let named = ModelName::parse(primary).map_err(|e| bad(format!("'{primary}' {e}")))?;
            self.check(&named).map_err(|e| bad(format!("'{primary}' {e}")))?;
            let parsed = FallbackModels::parse(fallbacks).map_err(bad)?;
            for model in parsed.models() {
                self.check(model).map_err(|e| bad(format!("'{model}' {e}")))?;
            }
        }
        if self.health.failures_to_cool_down == 0 {
            return Err(Error::NotConfigured(
                "models.health.failures_to_cool_down: must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::models::{Models, ModelsConfig};

    fn with_fallbacks(pairs: &[(&str, &[&str])]) -> ModelsConfig {
        let mut config = ModelsConfig::default();
        for (primary, chain) in pairs {
            let chain = chain.iter().map(|m| (*m).to_owned()).collect();
            config.fallbacks.insert((*primary).to_owned(), chain);
        }
        config
    }

    #[test]
    fn the_servers_chains_apply_to_agents_without_their_own() {
        let config = with_fallbacks(&[("anthropic:claude-sonnet-4-5", &["openai:gpt-4o"])]);
        let models = Models::new(&config).unwrap();
        let primary = "anthropic:claude-sonnet-4-5";
        assert_eq!(models.chain_of(Some(primary), None), [primary, "openai:gpt-4o"]);
        assert_eq!(models.chain_of(Some(primary), Some(&[])), [primary]);
        assert_eq!(models.chain_of(Some("openai:gpt-4o"), None), ["openai:gpt-4o"]);
        assert_eq!(models.chain_of(None, None), ["echo"]);
    }

    #[test]
    fn a_bad_chain_is_refused_by_its_setting() {
        let refused = |config: ModelsConfig| Models::new(&config).unwrap_err().to_string();
        let message = refused(with_fallbacks(&[("openai:gpt-4o", &["mistral:large"])]));
        assert!(message.contains("models.fallbacks.\"openai:gpt-4o\": 'mistral:large' names"));
        let message = refused(with_fallbacks(&[("mistral:large", &["openai:gpt-4o"])]));
        assert!(message.contains("'mistral:large' names provider 'mistral'"), "{message}");
        let message = refused(with_fallbacks(&[("openai:a", &["openai:b", "echo"])]));
        assert!(message.contains("'echo' cannot be a fallback"), "{message}");
        let four: &[&str] = &["openai:b", "openai:c", "openai:d", "openai:e"];
        assert!(refused(with_fallbacks(&[("openai:a", four)])).contains("at most 3"));
    }
}
