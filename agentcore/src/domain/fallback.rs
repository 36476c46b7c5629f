//! Fallback chains and model health: which models a call may go to, in order, which failures
//! move it to the next one, and the shared health record that puts a failing model in
//! cool-down for every agent on every node (see docs/decisions.md, "Fallback chains").

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::agent::ModelName;

/// An agent's own fallback models, in the order they are tried after its model: at most
/// [`FallbackModels::MAX`], each a `<provider>:<model>` name once. `echo` is refused: it
/// answers every task by repeating it, so a provider's outage would look like work done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FallbackModels(Vec<ModelName>);

impl FallbackModels {
    pub const MAX: usize = 3;

    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        if names.len() > Self::MAX {
            return Err(format!("at most {} models", Self::MAX));
        }
        let mut models: Vec<ModelName> = Vec::with_capacity(names.len());
        for name in names {
            let name = name.as_ref();
            let model = ModelName::parse(name).map_err(|e| format!("'{name}' {e}"))?;
            if model.is_echo() {
                return Err("'echo' cannot be a fallback: it answers without a model".into());
            }
            if models.contains(&model) {
                return Err(format!("'{name}' is named twice"));
            }
            models.push(model);
        }
        Ok(Self(models))
    }

    pub fn models(&self) -> &[ModelName] {
        &self.0
    }

    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|m| m.as_str().to_owned()).collect()
    }

    /// As stored: a JSON array of names.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.names()).unwrap_or_else(|_| "[]".into())
    }
}

/// The models a call goes to, in order: `primary`, then the agent's own fallbacks when it has
/// a list (`Some`, even empty), else the server's chain for `primary`; each model once.
pub fn chain(primary: &str, own: Option<&[String]>, server: Option<&[String]>) -> Vec<String> {
    let mut models = vec![primary.to_owned()];
    for model in own.or(server).unwrap_or_default() {
        if !models.contains(model) {
            models.push(model.clone());
        }
    }
    models
}

/// A model a step tried before the one that answered, and why it did not answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Tried {
    /// Its full name (`anthropic:claude-sonnet-4-5`).
    pub model: String,
    /// The last failure of its call, or why it was skipped (cooling down).
    pub error: String,
}

/// Whether an answer with HTTP `status` says the provider is overloaded or unavailable
/// (Anthropic's 529, anyone's 503): retried once, then the call goes to the next model.
pub fn overloaded(status: Option<u16>) -> bool {
    matches!(status, Some(503 | 529))
}

/// The attempts a call makes on one model: `attempts` as configured, but only 2 when the
/// provider says it is overloaded and a next model is there to take the call.
pub fn attempts_on(status: Option<u16>, has_next: bool, attempts: i32) -> i32 {
    if has_next && overloaded(status) { attempts.min(2) } else { attempts }
}

/// The operator's rule for putting a model in cool-down (`models.health.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Failed calls in a row (each after its retries) that start a cool-down.
    pub failures_to_cool_down: u32,
    /// The first cool-down; each one after a failed probe is twice as long...
    pub cooldown: Duration,
    /// ...up to this.
    pub max_cooldown: Duration,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        Self {
            failures_to_cool_down: 3,
            cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(600),
        }
    }
}

impl HealthPolicy {
    /// The length of the cool-down that follows `earlier` cool-downs in a row.
    pub fn cooldown_after(&self, earlier: i32) -> Duration {
        let doublings = u32::try_from(earlier.clamp(0, 20)).unwrap_or(0);
        self.cooldown.saturating_mul(1 << doublings).min(self.max_cooldown.max(self.cooldown))
    }
}

/// A model's health as stored: no record is a healthy model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthRecord {
    /// Failed calls in a row since its last success or cool-down.
    pub failures: i32,
    /// Cool-downs in a row (reset by a success).
    pub cooldowns: i32,
    pub cooldown_until: Option<DateTime<Utc>>,
    /// While a caller probes the model after its cool-down: when that probe's lease ends.
    pub probe_until: Option<DateTime<Utc>>,
}

/// What a caller may do with a model now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Call it.
    Call,
    /// Its cool-down is over: call it only as the one probe (take the lease first).
    Probe,
    /// Skip it: cooling down, or another caller probes it; worth asking again at `until`.
    Skip { until: DateTime<Utc> },
}

impl HealthRecord {
    /// What a caller may do with the model at `now` (the database's clock).
    pub fn access(&self, now: DateTime<Utc>) -> Access {
        match (self.cooldown_until, self.probe_until) {
            (Some(until), _) if until > now => Access::Skip { until },
            (Some(_), Some(probe)) if probe > now => Access::Skip { until: probe },
            (Some(_), _) => Access::Probe,
            (None, _) => Access::Call,
        }
    }

    /// The record after a failed call at `now`: a probe's failure, or the threshold's, starts a
    /// cool-down (longer after each one in a row); a failure of a call that was already on its
    /// way when the cool-down began changes nothing.
    pub fn after_failure(
        current: Option<&Self>,
        policy: &HealthPolicy,
        now: DateTime<Utc>,
    ) -> Self {
        let current = current.cloned().unwrap_or(Self {
            failures: 0,
            cooldowns: 0,
            cooldown_until: None,
            probe_until: None,
        });
        if current.cooldown_until.is_some_and(|until| until > now) {
            return current;
        }
        let failures = current.failures.saturating_add(1);
        let threshold = i32::try_from(policy.failures_to_cool_down.max(1)).unwrap_or(i32::MAX);
        if current.cooldown_until.is_none() && failures < threshold {
            return Self { failures, ..current };
        }
        let length = policy.cooldown_after(current.cooldowns);
        Self {
            failures: 0,
            cooldowns: current.cooldowns.saturating_add(1),
            cooldown_until: Some(now + chrono::Duration::from_std(length).unwrap_or_default()),
            probe_until: None,
        }
    }
}

/// A model's health as `GET /api/models` and the Models page show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelHealth {
    /// Its full name.
    pub model: String,
    pub state: HealthState,
    /// Failed calls in a row.
    pub failures: i32,
    /// While cooling down: until when (the database's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_until: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    Healthy,
    CoolingDown,
    /// The cool-down is over; the next call (one at a time) decides.
    Probing,
}

impl ModelHealth {
    pub fn of(model: &str, record: &HealthRecord, now: DateTime<Utc>) -> Self {
        let state = match record.access(now) {
            Access::Call => HealthState::Healthy,
            Access::Skip { until } if record.cooldown_until == Some(until) => {
                HealthState::CoolingDown
            }
            Access::Skip { .. } | Access::Probe => HealthState::Probing,
        };
        let cooldown_until = record.cooldown_until.filter(|_| state == HealthState::CoolingDown);
        Self { model: model.to_owned(), state, failures: record.failures, cooldown_until }
    }
}

/// The metric's view of which models cool down (`cooling`: each model with a health record,
/// by name, and whether it cools down now): each model `named` by a setting, then up to
/// `others` more by name, each with 0 or 1; the rest summed as `other`. Agents may name any
/// model of a configured provider: the labels stay bounded.
pub fn cooldown_labels(
    cooling: &[(String, bool)],
    named: impl Fn(&str) -> bool,
    others: usize,
) -> Vec<(String, u32)> {
    let mut labelled = Vec::new();
    let (mut unnamed, mut rest, mut rest_cooling) = (0, 0, 0);
    for (model, cools) in cooling {
        if named(model) || unnamed < others {
            unnamed += usize::from(!named(model));
            labelled.push((model.clone(), u32::from(*cools)));
        } else {
            rest += 1;
            rest_cooling += u32::from(*cools);
        }
    }
    if rest > 0 {
        labelled.push(("other".to_owned(), rest_cooling));
    }
    labelled
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    #[test]
    fn fallbacks_are_model_names_at_most_three_never_echo_each_once() {
        assert_eq!(
            FallbackModels::parse(&["openai:gpt-4o", "ollama:llama3.1"]).unwrap().names(),
            ["openai:gpt-4o", "ollama:llama3.1"]
        );
        assert!(FallbackModels::parse::<&str>(&[]).unwrap().models().is_empty());
        let four = ["a:1", "a:2", "a:3", "a:4"];
        assert_eq!(FallbackModels::parse(&four).unwrap_err(), "at most 3 models");
        assert!(FallbackModels::parse(&["echo"]).unwrap_err().contains("'echo' cannot"));
        assert!(FallbackModels::parse(&["gpt-4o"]).unwrap_err().contains("'gpt-4o' must be"));
        assert!(FallbackModels::parse(&["a:1", "a:1"]).unwrap_err().contains("twice"));
    }

    #[test]
    fn the_chain_is_the_model_then_the_agents_list_or_else_the_servers() {
        let own = vec!["openai:gpt-4o".to_owned(), "anthropic:claude".to_owned()];
        let server = vec!["ollama:llama3.1".to_owned()];
        assert_eq!(
            chain("anthropic:claude", Some(&own), Some(&server)),
            ["anthropic:claude", "openai:gpt-4o"]
        );
        assert_eq!(chain("x:y", Some(&[]), Some(&server)), ["x:y"]);
        assert_eq!(chain("x:y", None, Some(&server)), ["x:y", "ollama:llama3.1"]);
        assert_eq!(chain("x:y", None, None), ["x:y"]);
    }

    #[test]
    fn overloaded_answers_are_retried_once_when_a_fallback_can_take_the_call() {
        assert_eq!(attempts_on(Some(529), true, 3), 2);
        assert_eq!(attempts_on(Some(503), true, 3), 2);
        assert_eq!(attempts_on(Some(503), false, 3), 3);
        assert_eq!(attempts_on(Some(500), true, 3), 3);
        assert_eq!(attempts_on(None, true, 3), 3);
    }

    #[test]
    fn failures_in_a_row_start_a_cool_down_that_doubles_after_each_failed_probe() {
        let policy = HealthPolicy {
            failures_to_cool_down: 2,
            cooldown: Duration::from_secs(10),
            max_cooldown: Duration::from_secs(25),
        };
        let first = HealthRecord::after_failure(None, &policy, at(0));
        assert_eq!((first.failures, first.cooldown_until), (1, None));
        assert_eq!(first.access(at(0)), Access::Call);
        let cooling = HealthRecord::after_failure(Some(&first), &policy, at(1));
        assert_eq!(cooling.cooldown_until, Some(at(11)));
        assert_eq!(cooling.access(at(5)), Access::Skip { until: at(11) });
        let late = HealthRecord::after_failure(Some(&cooling), &policy, at(5));
        assert_eq!(late, cooling, "a call already on its way does not lengthen the cool-down");
        assert_eq!(cooling.access(at(11)), Access::Probe);
        let probing = HealthRecord { probe_until: Some(at(20)), ..cooling.clone() };
        assert_eq!(probing.access(at(12)), Access::Skip { until: at(20) });
        assert_eq!(probing.access(at(20)), Access::Probe, "an expired probe lease is free");
        let again = HealthRecord::after_failure(Some(&probing), &policy, at(12));
        assert_eq!((again.cooldowns, again.cooldown_until), (2, Some(at(32))));
        let capped = HealthRecord::after_failure(Some(&again), &policy, at(40));
        assert_eq!(capped.cooldown_until, Some(at(65)), "at most max_cooldown");
    }

    #[test]
    fn health_is_shown_as_healthy_cooling_down_or_probing() {
        let record = HealthRecord {
            failures: 0,
            cooldowns: 1,
            cooldown_until: Some(at(10)),
            probe_until: None,
        };
        assert_eq!(ModelHealth::of("a:b", &record, at(0)).state, HealthState::CoolingDown);
        assert_eq!(ModelHealth::of("a:b", &record, at(0)).cooldown_until, Some(at(10)));
        assert_eq!(ModelHealth::of("a:b", &record, at(10)).state, HealthState::Probing);
        let failing =
            HealthRecord { failures: 2, cooldowns: 0, cooldown_until: None, probe_until: None };
        assert_eq!(ModelHealth::of("a:b", &failing, at(0)).state, HealthState::Healthy);
    }

    #[test]
    fn cooldowns_are_labelled_by_model_up_to_a_bound_and_the_rest_summed() {
        let cooling: Vec<(String, bool)> = ["openai:a", "openai:b", "openai:c", "openai:set"]
            .iter()
            .map(|m| ((*m).to_owned(), *m != "openai:b"))
            .collect();
        let named = |m: &str| m == "openai:set";
        assert_eq!(
            cooldown_labels(&cooling, named, 1),
            [("openai:a".into(), 1), ("openai:set".into(), 1), ("other".into(), 1)]
        );
        let all = cooldown_labels(&cooling, named, 3);
        assert_eq!(all.len(), 4, "{all:?}");
        assert!(all.iter().all(|(model, _)| model != "other"));
    }
}
