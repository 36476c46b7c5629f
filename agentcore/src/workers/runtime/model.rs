//! The model call of one task: bounded by the node's semaphore, retried with backoff on
//! transient failures, counted per provider.

use std::time::Duration;

use super::{ATTEMPTS_PER_TASK, Node};
use crate::core::RuntimeConfig;
use crate::domain::runtime::{ClaimedTask, Outcome};
use crate::models::ModelError;

/// The model's answer to the task, with up to three attempts; and how many calls were made.
pub(super) async fn call_model(node: &Node, claimed: &ClaimedTask) -> (Outcome, i32) {
    let models = node.core.models();
    let resolved = models.resolve(
        claimed.agent.model.as_deref(),
        &claimed.agent.role_prompt,
        &claimed.user_message(),
    );
    let (provider, request) = match resolved {
        Ok(resolved) => resolved,
        Err(error) => {
            return (Outcome::Failed { error: error.to_string(), permanent: true }, 0);
        }
    };
    let label = models.provider_of(claimed.agent.model.as_deref());
    let mut calls = 0;
    loop {
        calls += 1;
        let answer = {
            let Ok(_permit) = node.calls.acquire().await else {
                return (
                    Outcome::Failed { error: "the runtime stopped".into(), permanent: false },
                    calls - 1,
                );
            };
            let started = std::time::Instant::now();
            let answer = provider.complete(&request).await;
            node.core.counters().model_call(label, started.elapsed(), answer.as_ref().err());
            answer
        };
        match answer {
            Ok(completion) => {
                return (
                    Outcome::Complete { text: completion.text, usage: completion.usage },
                    calls,
                );
            }
            Err(ModelError::Permanent { reason }) => {
                return (Outcome::Failed { error: reason, permanent: true }, calls);
            }
            Err(ModelError::Transient { reason, .. }) if calls >= ATTEMPTS_PER_TASK => {
                return (Outcome::Failed { error: reason, permanent: false }, calls);
            }
            Err(ModelError::Transient { reason, retry_after }) => {
                let delay = retry_delay(&node.config, calls, retry_after);
                tracing::info!(task = %claimed.task.id, attempt = calls, ?delay, %reason, "model call failed; retrying");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Exponential backoff from `retry_base`, never shorter than the provider's `Retry-After`, never
/// longer than `retry_max`.
fn retry_delay(config: &RuntimeConfig, calls: i32, retry_after: Option<Duration>) -> Duration {
    let factor = 2u32.saturating_pow(u32::try_from(calls - 1).unwrap_or(0).min(16));
    let backoff = config.retry_base.saturating_mul(factor);
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
