//! Models: which language models this server can call, for callers choosing one.

use super::{Core, Principal};
use crate::api::{ModelList, ProviderStatus};
use std::collections::HashSet;

use crate::domain::agent::AgentFilter;
use crate::domain::fallback::{HealthState, ModelHealth, cooldown_labels};

impl Core {
    /// The configured model providers (where each is, whether it has a key, never the key)
    /// and the models agents can use. Any member may read it, whatever their role: it is
    /// what the model field of an agent accepts. With each model that failed lately, shared by
    /// every node: failing, cooling down or being probed.
    pub async fn model_list(&self, who: &Principal) -> crate::Result<ModelList> {
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
            health: self.model_health(who).await?,
        })
    }

    /// Each model with a health record that `who` may see: one a setting names, or one an
    /// agent of their workspace calls. Health is shared by every workspace, but a model's name
    /// can be a tenant's own (a fine-tuned model's name carries its organisation's): another
    /// workspace's are not shown.
    async fn model_health(&self, who: &Principal) -> crate::Result<Vec<ModelHealth>> {
        let (records, now) = self.store().model_health().await?;
        let models = self.models();
        let mut theirs: HashSet<String> = HashSet::new();
        if records.iter().any(|(model, _)| !models.named_by_settings(model)) {
            let agents = self.store().list_agents(&who.workspace, &AgentFilter::default()).await?;
            for agent in agents {
                theirs.extend(agent.summary.model);
                theirs.extend(agent.summary.fallback_models.unwrap_or_default());
            }
        }
        Ok(records
            .iter()
            .filter(|(model, _)| models.named_by_settings(model) || theirs.contains(model))
            .map(|(model, record)| ModelHealth::of(model, record, now))
            .collect())
    }

    /// How many models are cooling down now, by model, for metrics (see [`cooldown_labels`]);
    /// none when the database cannot be read.
    pub(super) async fn model_cooldowns(&self) -> Vec<(String, u32)> {
        let Ok((records, now)) = self.store().model_health().await else { return Vec::new() };
        let cooling: Vec<(String, bool)> = records
            .iter()
            .map(|(model, record)| {
                let state = ModelHealth::of(model, record, now).state;
                (model.clone(), state == HealthState::CoolingDown)
            })
            .collect();
        let models = self.models();
        cooldown_labels(&cooling, |model| models.named_by_settings(model), LABELLED_MODELS)
    }
}

/// How many models no setting names are labelled by name in the metrics.
const LABELLED_MODELS: usize = 20;

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
