//! The shared rate limits around one model call (`models.rate_limits`): before it is sent, a
//! slot of every limited scope it counts against (its provider, its model), taken in the
//! database so every agent on every node shares one count and one queue; after it answers, the
//! tokens it reported replace the estimate, and the provider's own wait signals (`Retry-After`,
//! a rate-limit header at 0) hold every caller back at once.
//!
//! A call of a provider without a limit does none of this: no database work at all.

use std::time::{Duration, Instant};

use tokio::sync::SemaphorePermit;

use super::Node;
use super::model::tell_retry;
use crate::domain::backoff::exponential;
use crate::domain::event::Retry;
use crate::domain::ratelimit::{RateLimit, Why};
use crate::models::{Completion, CompletionRequest, ModelError};
use crate::store::{RunRef, Slot, SlotAsk};

/// The slot a call was given: what its answer corrects or blocks.
pub(super) struct Taken {
    grants: Vec<String>,
    scopes: Vec<String>,
}

/// The shortest look-again, so a wait that ends as it is computed does not spin.
const MIN_NAP: Duration = Duration::from_millis(10);

/// Waits for one of the node's call permits and, for a limited provider, a slot of each of its
/// scopes (the permit is given back while it waits, so a waiting agent holds no other agent
/// back); `None` when the runtime stopped. A wait is no attempt; the task's time limit bounds
/// it (the run's timeout drops this future).
pub(super) async fn take<'n>(
    node: &'n Node,
    run: RunRef<'_>,
    label: &str,
    request: &CompletionRequest,
    attempts: i32,
) -> Option<(SemaphorePermit<'n>, Option<Taken>)> {
    let models = node.core.models();
    let limits = models.rate_limits();
    let scopes: Vec<(String, RateLimit)> = limits.for_call(label, &request.model);
    if scopes.is_empty() {
        return Some((node.calls.acquire().await.ok()?, None));
    }
    let model = format!("{label}:{}", request.model);
    let input = models.input_tokens_bound(Some(&model), request);
    let tokens = i64::try_from(input).unwrap_or(i64::MAX).saturating_add(request.max_tokens.into());
    let ask = SlotAsk {
        owner: &run.agent.owner_id,
        agent: &run.agent.agent_id,
        scopes: &scopes,
        tokens,
        window: limits.window,
    };
    let started = Instant::now();
    let mut told: Option<Why> = None;
    let mut faults = 0;
    loop {
        let permit = node.calls.acquire().await.ok()?;
        let wait = match node.core.run_store().take_slot(ask).await {
            Ok(Slot::Granted(grants)) => {
                if told.is_some() {
                    node.core.counters().model_rate_wait(label, started.elapsed());
                }
                let scopes = scopes.into_iter().map(|(scope, _)| scope).collect();
                return Some((permit, Some(Taken { grants, scopes })));
            }
            Ok(Slot::Wait { wait, scope, why }) => {
                if told.is_none_or(|told| !same_reason(told, why)) {
                    tracing::info!(task = %run.task, %scope, ?wait, ?why, "model call waits for its rate limit");
                    let retry = Retry {
                        attempt: u32::try_from(attempts - 1).unwrap_or(0),
                        rate_limited: true,
                        status: None,
                        reason: reason(&scope, why),
                        next_attempt_at: crate::domain::now()
                            + chrono::Duration::from_std(wait).unwrap_or_default(),
                    };
                    tell_retry(node, run, &retry).await;
                    told = Some(why);
                }
                wait.max(MIN_NAP)
            }
            Err(error) => {
                faults += 1;
                tracing::warn!(%error, task = %run.task, "cannot take a rate-limit slot; trying again");
                exponential(node.config.retry_base, node.config.retry_max, faults - 1)
            }
        };
        drop(permit);
        tokio::time::sleep(wait).await;
    }
}

fn same_reason(a: Why, b: Why) -> bool {
    std::mem::discriminant(&a) == std::mem::discriminant(&b)
}

/// What a waiting task's event says.
fn reason(scope: &str, why: Why) -> String {
    match why {
        Why::Provider(_) => format!("{scope} asked every caller to wait (its rate limit)"),
        Why::Requests { .. } => {
            format!("waiting for a slot of {scope}'s shared rate limit (requests per window)")
        }
        Why::Tokens => {
            format!("waiting for a slot of {scope}'s shared rate limit (tokens per window)")
        }
    }
}

/// After the answer: its reported tokens replace the estimate; a 429, or headers saying the
/// provider's limit is spent, block every caller of the scopes for as long as the provider
/// said (at most `retry_max`; a 429 without a wait blocks for the retry's backoff). `true` when
/// a 429 was turned into a shared wait: the call is asked again without counting an attempt.
pub(super) async fn answered(
    node: &Node,
    taken: Option<&Taken>,
    answer: &Result<Completion, ModelError>,
    attempts: i32,
) -> bool {
    let Some(taken) = taken else { return false };
    let store = node.core.run_store();
    let (block, limited) = match answer {
        Ok(completion) => {
            if let Some(usage) = &completion.usage {
                // Providers count cached prompt tokens toward their token limits too.
                let tokens = usage
                    .input_tokens
                    .saturating_add(usage.output_tokens)
                    .saturating_add(usage.cache_read_tokens)
                    .saturating_add(usage.cache_write_tokens);
                if let Err(error) = store.correct_slot(&taken.grants, tokens).await {
                    tracing::debug!(%error, "cannot correct a rate-limit slot's tokens");
                }
            }
            (completion.spent_for, false)
        }
        Err(ModelError::Transient { retry_after, status: Some(429), .. }) => {
            let backoff = exponential(node.config.retry_base, node.config.retry_max, attempts - 1);
            (Some(retry_after.unwrap_or(backoff)), true)
        }
        Err(_) => (None, false),
    };
    let Some(wait) = block.map(|wait| wait.min(node.config.retry_max)) else { return false };
    match store.block_scopes(&taken.scopes, wait).await {
        Ok(()) => limited,
        Err(error) => {
            tracing::warn!(%error, "cannot share the provider's wait with the other callers");
            false
        }
    }
}
