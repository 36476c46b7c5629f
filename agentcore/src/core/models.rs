//! Models: which language models this server can call, for callers choosing one.

use super::{Core, Principal};
use crate::api::{ModelList, ProviderStatus};
use crate::domain::fallback::{HealthState, ModelHealth};

impl Core {
    /// The configured model providers (where each is, whether it has a key, never the key)
    /// and the models agents can use. Any member may read it, whatever their role: it is
    /// what the model field of an agent accepts. With each model that failed lately, shared by
    /// every node: failing, cooling down or being probed.
    pub async fn model_list(&self, _who: &Principal) -> crate::Result<ModelList> {
        let models = self.models();
        let providers = models
            .configured()
            .iter()
            .map(|p| ProviderStatus {
                name: p.name.clone(),
                kind: p.kind.to_owned(),
                base_url: without_secrets(&p.base_url),
                has_key: p.has_key,
                needs_key: p.needs_key,
                usable: p.usable(),
            })
            .collect();
        Ok(ModelList {
            default_model: models.default_model().to_owned(),
            models: models.usable_models(),
            usable_providers: models.usable_providers().map(str::to_owned).collect(),
            providers,
            health: self.model_health().await?,
        })
    }

    /// Each model with a health record, as shown.
    async fn model_health(&self) -> crate::Result<Vec<ModelHealth>> {
        let (records, now) = self.store().model_health().await?;
        Ok(records.iter().map(|(model, record)| ModelHealth::of(model, record, now)).collect())
    }

    /// Each model with a health record and whether it is cooling down now, for metrics;
    /// none when the database cannot be read.
    pub(super) async fn model_cooldowns(&self) -> Vec<(String, bool)> {
        let health = self.model_health().await.unwrap_or_default();
        health.into_iter().map(|h| (h.model, h.state == HealthState::CoolingDown)).collect()
    }
}

/// `url` without what could be a secret in it (a user and password, a query such as
/// `?key=`): a caller sees where calls go, not how they are authorised.
fn without_secrets(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::without_secrets;

    #[test]
    fn addresses_are_shown_without_credentials() {
        assert_eq!(
            without_secrets("https://bob:s3cret@llm.example/v1?key=abc"),
            "https://llm.example/v1"
        );
        assert_eq!(without_secrets("http://127.0.0.1:11434/v1"), "http://127.0.0.1:11434/v1");
    }
}
