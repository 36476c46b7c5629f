//! One attempt at a delivery: signed as Standard Webhooks asks (`webhook-id`,
//! `webhook-timestamp`, `webhook-signature` with every key in use, the newest first), sent
//! with the webhooks' client (no redirects followed; a host name's addresses checked by the
//! operator's policy as it connects, so a name that moved to a private address is refused),
//! bounded in time, the answer read to a bound; then the outcome written under the lease.

use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;

use crate::core::Core;
use crate::domain::webhook::{AttemptOutcome, RESPONSE_BYTES, kept_response, next_delay};
use crate::domain::workspace::WorkspaceId;
use crate::standard_webhooks::{SigningKey, signature_header};
use crate::store::{AttemptWrite, ClaimedDelivery, Recorded};
use crate::tools::http_fetch::with_target_port;

/// The `user-agent` of every attempt.
const USER_AGENT: &str = concat!("agentd-webhooks/", env!("CARGO_PKG_VERSION"));

/// Makes one attempt and records it; `_slot` is this node's room for it.
pub(super) async fn attempt(core: Core, delivery: ClaimedDelivery, _slot: OwnedSemaphorePermit) {
    let store = core.webhook_store();
    let config = core.webhook_config();
    let owner = WorkspaceId::from_trusted(delivery.owner_id.clone());
    let target = match store.send_target(&delivery.webhook_id).await {
        Ok(Some(target)) => target,
        // Deleted since: its deliveries went with it.
        Ok(None) => return,
        Err(error) => {
            // The lease runs out and the delivery is tried again.
            tracing::warn!(%error, delivery = delivery.id, "cannot read a webhook's endpoint");
            return;
        }
    };
    let mut sealed = vec![target.secret.as_str()];
    sealed.extend(target.previous_secret.as_deref());
    let outcome = match core.webhook_keys(&owner, &delivery.webhook_id, &sealed) {
        Ok(keys) => post(&core, &target.url, &keys, &delivery).await,
        Err(error) => failure(format!("cannot sign: {}", error.public_message()), 0),
    };
    let delivered = outcome.delivered();
    let retry_in =
        if delivered { None } else { next_delay(&config.retry_schedule, delivery.attempts + 1) };
    let reason = format!("disabled after {} failed attempts in a row", config.disable_after);
    let write = AttemptWrite {
        outcome: &outcome,
        retry_in,
        disable_after: i32::try_from(config.disable_after).unwrap_or(i32::MAX),
        reason: &reason,
    };
    let counters = core.counters();
    match store.record_attempt(&delivery, core.node_id(), &write).await {
        Ok(Recorded::Written { disabled }) => {
            if delivered {
                counters.webhooks_delivered.fetch_add(1, Ordering::Relaxed);
            } else {
                counters.webhook_attempts_failed.fetch_add(1, Ordering::Relaxed);
                if retry_in.is_none() {
                    counters.webhooks_failed.fetch_add(1, Ordering::Relaxed);
                }
                tracing::info!(delivery = delivery.id, attempt = delivery.attempts + 1, status = ?outcome.status, error = ?outcome.error, "webhook attempt failed");
            }
            if disabled {
                core.webhook_disabled(&owner, &delivery.webhook_id, &reason).await;
            }
        }
        Ok(Recorded::LeaseLost) => {
            tracing::warn!(delivery = delivery.id, "a webhook attempt outlived its lease");
        }
        Err(error) => {
            tracing::warn!(%error, delivery = delivery.id, "cannot record a webhook attempt")
        }
    }
}

/// Sends the delivery's body to `url`, signed with `keys`.
async fn post(
    core: &Core,
    url: &str,
    keys: &[SigningKey],
    delivery: &ClaimedDelivery,
) -> AttemptOutcome {
    let started = Instant::now();
    let elapsed = || i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    // An IP literal never reaches the resolver: it is checked here, with its port.
    if let Err(why) = core.http_fetch().policy().check_literal(url) {
        return failure(why, elapsed());
    }
    let Some(port) = reqwest::Url::parse(url).ok().and_then(|u| u.port_or_known_default()) else {
        return failure("refused: the URL names no port".to_owned(), elapsed());
    };
    let timestamp = chrono::Utc::now().timestamp();
    let body = delivery.body.as_bytes();
    let signature = signature_header(keys, &delivery.message_id, timestamp, body);
    let request = core
        .webhook_client()
        .post(url)
        .header("content-type", "application/json")
        .header("user-agent", USER_AGENT)
        .header("webhook-id", delivery.message_id.as_str())
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(delivery.body.clone());
    let exchange = async {
        let mut response = request.send().await?;
        let status = response.status().as_u16();
        let mut kept = Vec::new();
        while kept.len() < RESPONSE_BYTES {
            match response.chunk().await? {
                Some(chunk) => kept.extend_from_slice(&chunk),
                None => break,
            }
        }
        Ok::<_, reqwest::Error>((status, kept))
    };
    let timeout = core.webhook_config().attempt_timeout;
    let exchange = with_target_port(port, exchange);
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok((status, kept))) => AttemptOutcome {
            status: Some(status),
            error: None,
            duration_ms: elapsed(),
            response: Some(kept_response(&kept)),
        },
        // Without the URL: its path may hold the receiver's token, and members below admin
        // read the attempts.
        Ok(Err(error)) => failure(explain(&error.without_url()), elapsed()),
        Err(_) => {
            failure(format!("timeout: no answer within {} s", timeout.as_secs_f32()), elapsed())
        }
    }
}

fn failure(error: String, duration_ms: i64) -> AttemptOutcome {
    AttemptOutcome { status: None, error: Some(error), duration_ms, response: None }
}

/// The error and its causes on one line (the resolver's refusal among them).
fn explain(error: &reqwest::Error) -> String {
    let mut causes: Vec<String> = Vec::new();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        causes.push(current.to_string());
        cause = current.source();
    }
    causes.dedup();
    let text = causes.join(": ").replace('\n', " ");
    crate::domain::runtime::cut(&text, 500)
}
