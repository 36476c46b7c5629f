//! One model call of a run: bounded by the node's semaphore, retried with backoff on transient
//! failures, counted per provider.

use std::time::Duration;

use super::{ATTEMPTS_PER_CALL, Node};
use crate::core::RuntimeConfig;
use crate::domain::backoff::exponential;
use crate::domain::runtime::Outcome;
use crate::domain::task::TaskId;
use crate::models::{Completion, CompletionRequest, ModelError, ModelProvider};

/// What a model call came to: the answer, or the outcome that ends the task; and how many
/// attempts it took.
pub(super) struct Called {
    pub(super) attempts: i32,
    pub(super) answer: Result<Completion, Outcome>,
}

/// Calls the model with up to three attempts.
pub(super) async fn call_model(
    node: &Node,
    provider: &dyn ModelProvider,
    label: &str,
    request: &CompletionRequest,
    task: &TaskId,
) -> Called {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let answer = {
            let Ok(_permit) = node.calls.acquire().await else {
                let stopped =
                    Outcome::Failed { error: "the runtime stopped".into(), permanent: false };
                return Called { attempts: attempts - 1, answer: Err(stopped) };
            };
            let started = std::time::Instant::now();
            let answer = provider.complete(request).await;
            node.core.counters().model_call(label, started.elapsed(), answer.as_ref().err());
            answer
        };
        let failed = |error: String, permanent: bool| Called {
            attempts,
            answer: Err(Outcome::Failed { error, permanent }),
        };
        match answer {
            Ok(completion) => return Called { attempts, answer: Ok(completion) },
            Err(ModelError::Permanent { reason }) => {
                tracing::warn!(%task, attempt = attempts, %reason, "model call refused");
                return failed(reason, true);
            }
            Err(ModelError::Transient { reason, .. }) if attempts >= ATTEMPTS_PER_CALL => {
                tracing::warn!(%task, attempt = attempts, %reason, "model call failed; no retry left");
                return failed(reason, false);
            }
            Err(ModelError::Transient { reason, retry_after }) => {
                let delay = retry_delay(&node.config, attempts, retry_after);
                tracing::info!(%task, attempt = attempts, ?delay, %reason, "model call failed; retrying");
                tokio::time::sleep(delay).await;
            }
        }
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
