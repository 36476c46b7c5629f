//! One model call of a run: bounded by the node's semaphore and the shared rate limits
//! (`ratelimit.rs`), retried with backoff on transient failures, counted per provider.

use std::time::Duration;

use tracing::Instrument as _;

use super::{ATTEMPTS_PER_CALL, Node, ratelimit, trace};
use crate::core::RuntimeConfig;
use crate::domain::backoff::exponential;
use crate::domain::event::Retry;
use crate::domain::fallback::attempts_on;
use crate::domain::runtime::Outcome;
use crate::domain::workspace::WorkspaceId;
use crate::models::{Completion, CompletionRequest, ModelError, ModelProvider};
use crate::store::RunRef;

/// What a model call came to: the answer, or the outcome that ends the task; and how many
/// attempts it took.
pub(super) struct Called {
    pub(super) attempts: i32,
    pub(super) answer: Result<Completion, Outcome>,
    /// The last attempt's `chat` span, for the call's cost once settled.
    pub(super) span: tracing::Span,
}

/// How many attempts one model's call may make.
#[derive(Debug, Clone, Copy)]
pub(super) struct Attempts {
    /// [`ATTEMPTS_PER_CALL`]; 1 for a probe of a model back from its cool-down.
    pub(super) max: i32,
    /// A next model of the chain can take the call: an overloaded provider gets fewer.
    pub(super) has_next: bool,
}

impl Default for Attempts {
    fn default() -> Self {
        Self { max: ATTEMPTS_PER_CALL, has_next: false }
    }
}

/// 429s under a shared rate limit that a call waits out before a 429 counts as a failed
/// attempt.
const RATE_LIMITED_WAITS: u32 = 5;

/// Calls the model with up to `limit.max` attempts (see [`attempts_on`]).
pub(super) async fn call_model(
    node: &Node,
    provider: &dyn ModelProvider,
    label: &str,
    request: &CompletionRequest,
    run: RunRef<'_>,
    limit: Attempts,
) -> Called {
    let task = run.task;
    let mut attempts = 0;
    let mut rate_limited = 0;
    loop {
        attempts += 1;
        let span = trace::chat_span(label, request, attempts);
        let answer = {
            let Some((_permit, slot)) = ratelimit::take(node, run, label, request, attempts).await
            else {
                let stopped =
                    Outcome::Failed { error: "the runtime stopped".into(), permanent: false };
                return Called { attempts: attempts - 1, answer: Err(stopped), span };
            };
            let started = std::time::Instant::now();
            let answer = provider.complete(request).instrument(span.clone()).await;
            node.core.counters().model_call(label, started.elapsed(), answer.as_ref().err());
            trace::chat_answered(&span, request, &answer, node.config.trace_content);
            let shared = ratelimit::answered(node, slot.as_ref(), &answer, attempts).await;
            if shared && rate_limited < RATE_LIMITED_WAITS {
                // A 429 under a shared limit is a wait for every caller, not a failed attempt,
                // a few times over; then it counts as one (a quota that never comes back, and
                // a fallback chain, move on).
                tracing::info!(%task, "model call rate-limited by its provider; waiting");
                rate_limited += 1;
                attempts -= 1;
                continue;
            }
            answer
        };
        let failed = |error: String, permanent: bool, span: tracing::Span| Called {
            attempts,
            answer: Err(Outcome::Failed { error, permanent }),
            span,
        };
        match answer {
            Ok(completion) => return Called { attempts, answer: Ok(completion), span },
            Err(ModelError::Permanent { reason }) => {
                tracing::warn!(%task, attempt = attempts, %reason, "model call refused");
                return failed(reason, true, span);
            }
            Err(ModelError::Transient { reason, status, .. })
                if attempts >= attempts_on(status, limit.has_next, limit.max) =>
            {
                tracing::warn!(%task, attempt = attempts, %reason, "model call failed; no retry left");
                return failed(reason, false, span);
            }
            Err(ModelError::Transient { reason, retry_after, status }) => {
                let delay = retry_delay(&node.config, attempts, retry_after);
                trace::retrying(&span, attempts, delay);
                tracing::info!(%task, attempt = attempts, ?delay, %reason, "model call failed; retrying");
                let retry = Retry {
                    attempt: u32::try_from(attempts).unwrap_or(0),
                    rate_limited: false,
                    status,
                    reason,
                    next_attempt_at: crate::domain::now()
                        + chrono::Duration::from_std(delay).unwrap_or_default(),
                };
                tell_retry(node, run, &retry).await;
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Records the retry as the task's event (a stream shows why the task waits); a store that
/// fails here costs the event only.
pub(super) async fn tell_retry(node: &Node, run: RunRef<'_>, retry: &Retry) {
    let owner = WorkspaceId::from_trusted(run.agent.owner_id.clone());
    let Ok(agent) = crate::domain::agent::AgentId::parse(&run.agent.agent_id) else { return };
    match node.core.run_store().record_retry(&owner, &agent, run.task, retry).await {
        Ok(()) => node.core.ring_events(&owner),
        Err(error) => tracing::debug!(%error, task = %run.task, "cannot record a retry's event"),
    }
}

/// Exponential backoff from `retry_base`, never shorter than the provider's `Retry-After`, never
/// longer than `retry_max`.
fn retry_delay(config: &RuntimeConfig, calls: i32, retry_after: Option<Duration>) -> Duration {
    let backoff = exponential(config.retry_base, config.retry_max, calls - 1);
    backoff.max(retry_after.unwrap_or_default()).min(config.retry_max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_and_respect_retry_after_within_the_cap() {
        let config = RuntimeConfig {
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(30),
            ..RuntimeConfig::default()
        };
        assert_eq!(retry_delay(&config, 1, None), Duration::from_secs(1));
        assert_eq!(retry_delay(&config, 2, None), Duration::from_secs(2));
        assert_eq!(retry_delay(&config, 2, Some(Duration::from_secs(7))), Duration::from_secs(7));
        assert_eq!(
            retry_delay(&config, 1, Some(Duration::from_secs(600))),
            Duration::from_secs(30)
        );
    }
}
