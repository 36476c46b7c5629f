//! A step's model call along its fallback chain: the agent's model, then its fallbacks (its
//! own `fallback_models`, else the server's `models.fallbacks` for its model), each reserved
//! against the budgets at its own price and retried as [`call_model`] does. A call that still
//! fails transiently, or that an overloaded provider refuses (529, 503: after one retry), goes
//! to the next model; a permanent refusal (a bad request, a bad key) ends the task as before.
//!
//! Health is shared through the store (`model_health`): a model that failed
//! `models.health.failures_to_cool_down` calls in a row cools down for every agent on every
//! node, and calls skip it; after the cool-down one caller at a time (a leased probe) tries it
//! again. Each node reads the records at most once per [`HEALTH_TTL`] and writes only on a
//! failure or a recovery, never on a healthy model's success. When every model of a chain is
//! cooling down the call waits for the first to come back, within the task's time limit.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::model::{Attempts, call_model};
use super::{ATTEMPTS_PER_CALL, Node, Unanswered, spend, trace};
use crate::domain::budget::StepCost;
use crate::domain::fallback::{Access, HealthRecord, Tried};
use crate::domain::runtime::{ClaimedTask, Outcome};
use crate::models::{Completion, CompletionRequest, ModelProvider};
use crate::store::RunRef;

/// How long a node trusts its copy of the health records.
pub(super) const HEALTH_TTL: Duration = Duration::from_secs(1);

/// An answered step: the answer, its cost (for the model that answered) and the models tried
/// before it.
pub(super) struct Answered {
    pub(super) completion: Completion,
    pub(super) cost: Option<StepCost>,
    pub(super) tried: Vec<Tried>,
}

/// The run's model, as `run/` resolved it: the first of its chain.
pub(super) struct First<'a> {
    pub(super) provider: &'a Arc<dyn ModelProvider>,
    pub(super) request: &'a CompletionRequest,
}

/// Asks the chain of `claimed`'s agent, in order, for the answer to `first.request`; counts
/// the retries made into `retries`.
pub(super) async fn ask(
    node: &Node,
    run: RunRef<'_>,
    claimed: &ClaimedTask,
    first: First<'_>,
    retries: &mut i32,
) -> Result<Answered, Unanswered> {
    let models = node.core.models();
    let agent = &claimed.agent;
    let chain = models.chain_of(agent.model.as_deref(), agent.fallback_models.as_deref());
    loop {
        let mut tried = Vec::new();
        let mut failed = None;
        let mut back_at: Option<DateTime<Utc>> = None;
        for (index, name) in chain.iter().enumerate() {
            let has_next = index + 1 < chain.len();
            let mut access = node.health.access(node, name).await;
            if access == Access::Probe && !take_probe(node, name).await {
                // Another call probes it, or it is back already: this node's copy was old.
                access = match node.health.access(node, name).await {
                    Access::Probe => Access::Skip { until: node.health.now() + HEALTH_TTL_CHRONO },
                    fresh => fresh,
                };
            }
            let probe = match access {
                Access::Call => false,
                Access::Probe => true,
                Access::Skip { until } => {
                    skip(node, name, &format!("cooling down until {until}"), &mut tried);
                    back_at = Some(back_at.map_or(until, |at| at.min(until)));
                    continue;
                }
            };
            let (provider, request) = match index {
                0 => (Arc::clone(first.provider), Cow::Borrowed(first.request)),
                _ => match models.resolve(Some(name), "", "") {
                    Ok((provider, resolved)) => {
                        let mut request = first.request.clone();
                        request.model = resolved.model;
                        (provider, Cow::Owned(request))
                    }
                    Err(error) => {
                        tried.push(Tried { model: name.clone(), error: error.to_string() });
                        continue;
                    }
                },
            };
            let kind = models.kind_of(Some(name));
            let reserved = spend::reserve(node, run, Some(name), kind, &request).await?;
            let limit = Attempts { max: if probe { 1 } else { ATTEMPTS_PER_CALL }, has_next };
            let called = call_model(node, &*provider, kind.label(), &request, run, limit).await;
            *retries += (called.attempts - 1).max(0);
            match called.answer {
                Ok(completion) => {
                    if probe || node.health.failing(name) {
                        recovered(node, name).await;
                    }
                    let cost = match reserved {
                        Some(reserved) => {
                            Some(spend::settle(node, run, reserved, completion.usage).await)
                        }
                        None => None,
                    };
                    if let Some(cost) = &cost {
                        trace::chat_cost(&called.span, cost.cost_micros);
                    }
                    tracing::Span::current().record("gen_ai.response.model", name.as_str());
                    return Ok(Answered { completion, cost, tried });
                }
                // Sent nowhere (the runtime stops), or refused for good: not the model's health.
                Err(outcome @ Outcome::Failed { permanent: true, .. }) => {
                    return Err(outcome.into());
                }
                Err(outcome) if called.attempts == 0 => return Err(outcome.into()),
                Err(Outcome::Failed { error, permanent: false }) => {
                    record_failure(node, name).await;
                    trace::fell_back(name, &error, has_next);
                    tried.push(Tried { model: name.clone(), error: error.clone() });
                    failed = Some(error);
                }
                Err(outcome) => return Err(outcome.into()),
            }
        }
        match (failed, back_at) {
            (Some(error), _) => return Err(all_failed(&tried, error).into()),
            (None, Some(at)) => wait_until(node, at).await,
            (None, None) => {
                let error = tried.last().map_or_else(String::new, |t| t.error.clone());
                return Err(Outcome::Failed { error, permanent: true }.into());
            }
        }
    }
}

const HEALTH_TTL_CHRONO: chrono::Duration = chrono::Duration::seconds(1);

/// The task's error when every model of its chain failed or was skipped.
fn all_failed(tried: &[Tried], last: String) -> Outcome {
    if tried.len() < 2 {
        return Outcome::Failed { error: last, permanent: false };
    }
    let each: Vec<String> = tried.iter().map(|t| format!("{}: {}", t.model, t.error)).collect();
    Outcome::Failed { error: format!("every model failed ({})", each.join("; ")), permanent: false }
}

fn skip(node: &Node, model: &str, why: &str, tried: &mut Vec<Tried>) {
    let provider = node.core.models().kind_of(Some(model));
    node.core.counters().model_skipped(provider.label());
    tracing::debug!(%model, why, "model skipped");
    tried.push(Tried { model: model.to_owned(), error: why.to_owned() });
}

/// Waits until `at` (the database's clock, as this node last read it), re-reading the health
/// records at least once per [`HEALTH_TTL`]. The task's time limit bounds the wait: the run's
/// call is under its deadline.
async fn wait_until(node: &Node, at: DateTime<Utc>) {
    let left = (at - node.health.now()).to_std().unwrap_or_default();
    tokio::time::sleep(left.clamp(Duration::from_millis(50), HEALTH_TTL)).await;
}

async fn take_probe(node: &Node, model: &str) -> bool {
    let lease = node.config.lease.as_secs_f64();
    match node.core.run_store().take_probe(model, lease).await {
        Ok(taken) => {
            node.health.forget();
            taken
        }
        Err(error) => {
            tracing::warn!(%error, %model, "cannot take a model's probe; skipping it");
            false
        }
    }
}

async fn record_failure(node: &Node, model: &str) {
    let policy = node.core.models().health_policy();
    match node.core.run_store().model_failed(model, &policy).await {
        Ok(record) => {
            if let Some(until) = record.cooldown_until {
                tracing::warn!(%model, %until, "model cooling down for every agent");
            }
        }
        Err(error) => tracing::warn!(%error, %model, "cannot record a model's failure"),
    }
    node.health.forget();
}

async fn recovered(node: &Node, model: &str) {
    if let Err(error) = node.core.run_store().model_recovered(model).await {
        tracing::warn!(%error, %model, "cannot record a model's recovery");
    }
    node.health.forget();
}

/// This node's copy of the shared health records.
#[derive(Debug, Default)]
pub(super) struct HealthCache(Mutex<Option<Snapshot>>);

#[derive(Debug)]
struct Snapshot {
    read: Instant,
    /// The database's clock when read.
    now: DateTime<Utc>,
    records: HashMap<String, HealthRecord>,
}

impl HealthCache {
    /// What a call may do with `model` now; a store that cannot be read lets every call
    /// through (health saves calls, it must not stop them).
    async fn access(&self, node: &Node, model: &str) -> Access {
        if self.stale() {
            match node.core.run_store().model_health().await {
                Ok((records, now)) => {
                    let records = records.into_iter().collect();
                    *crate::sync::lock(&self.0) =
                        Some(Snapshot { read: Instant::now(), now, records });
                }
                Err(error) => {
                    tracing::debug!(%error, "cannot read the models' health");
                    return Access::Call;
                }
            }
        }
        let now = self.now();
        let snapshot = crate::sync::lock(&self.0);
        let record = snapshot.as_ref().and_then(|s| s.records.get(model));
        record.map_or(Access::Call, |record| record.access(now))
    }

    /// Whether `model` has a record (a success must then clear it).
    fn failing(&self, model: &str) -> bool {
        crate::sync::lock(&self.0).as_ref().is_none_or(|s| s.records.contains_key(model))
    }

    /// The database's clock now, as far as this node can tell without asking.
    fn now(&self) -> DateTime<Utc> {
        match crate::sync::lock(&self.0).as_ref() {
            Some(s) => s.now + chrono::Duration::from_std(s.read.elapsed()).unwrap_or_default(),
            None => crate::domain::now(),
        }
    }

    fn stale(&self) -> bool {
        crate::sync::lock(&self.0).as_ref().is_none_or(|s| s.read.elapsed() >= HEALTH_TTL)
    }

    /// Forgets the records after this node changed them.
    fn forget(&self) {
        *crate::sync::lock(&self.0) = None;
    }
}
