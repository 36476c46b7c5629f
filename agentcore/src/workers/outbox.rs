//! Delivery of queued agent posts to Discord.
//!
//! Posts are rows of the `outbox` table, written in the same transaction as the change they
//! report. One lane per channel delivers that channel's posts oldest first, one at a time, so
//! order holds per channel while channels proceed in parallel. A delivered post keeps Discord's
//! message id for a week. A lane leases the head post
//! before sending it (several nodes never send the same post at once) and sends it with a
//! nonce and `enforce_nonce`, so a retry after a lost answer cannot post twice. Transient
//! failures (429 beyond the limiter's waits, 5xx, timeouts, connection errors) reschedule the
//! post with exponential backoff; permanent ones (unknown channel, missing access, revoked
//! token) drop it and log `post_failed` for its agent.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use secrecy::SecretString;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::core::Core;
use crate::domain::activity::{Action, NewActivity};
use crate::domain::chat::{OutboxLane, OutboxPost};
use crate::domain::message::MessageBody;
use crate::domain::workspace::WorkspaceId;
use crate::error::Error;
use crate::store::Finished;

/// The running delivery worker. Dropping it leaves the worker running; call
/// [`OutboxWorker::shutdown`] to stop it.
#[derive(Debug)]
pub struct OutboxWorker {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl OutboxWorker {
    /// Stops taking posts and waits for the sends in flight to finish.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

type Lanes = Arc<Mutex<HashSet<OutboxLane>>>;

/// How often the loop runs the node's housekeeping ([`super::retention`]).
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

impl OutboxWorker {
    /// Starts delivering the outbox in the background.
    pub fn start(core: &Core) -> OutboxWorker {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(dispatch(core.clone(), stopped));
        OutboxWorker { stop, task }
    }
}

/// Starts a lane for every user and channel with posts, on each wake-up and at least every poll.
async fn dispatch(core: Core, mut stop: watch::Receiver<bool>) {
    let lanes: Lanes = Arc::default();
    let mut running = JoinSet::new();
    let mut pruned_at: Option<tokio::time::Instant> = None;
    loop {
        if pruned_at.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
            super::retention::prune_all(&core).await;
            pruned_at = Some(tokio::time::Instant::now());
        }
        match core.delivery_store().outbox_lanes().await {
            Ok(waiting) => {
                for queue in waiting {
                    if lock(&lanes).insert(queue.clone()) {
                        running.spawn(lane(core.clone(), queue, lanes.clone(), stop.clone()));
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "cannot read the outbox"),
        }
        while running.try_join_next().is_some() {}
        tokio::select! {
            () = core.wakeups().outbox.notified() => {}
            () = tokio::time::sleep(core.outbox_config().poll) => {}
            _ = stop.changed() => break,
        }
    }
    while running.join_next().await.is_some() {}
}

/// Delivers one lane's posts in order until none is left.
async fn lane(core: Core, queue: OutboxLane, lanes: Lanes, mut stop: watch::Receiver<bool>) {
    let channel = queue.channel_id.as_str();
    let config = core.outbox_config();
    while !*stop.borrow() {
        let wait =
            match core.delivery_store().claim_post(&queue, core.node_id(), config.lease).await {
                Ok(Some(post)) => {
                    deliver(&core, post).await;
                    continue;
                }
                Ok(None) => match core.delivery_store().next_post_due(&queue).await {
                    Ok(Some(due)) => due.min(config.poll),
                    Ok(None) => {
                        // Leave, unless a post arrived between the check and leaving.
                        lock(&lanes).remove(&queue);
                        match core.delivery_store().next_post_due(&queue).await {
                            Ok(Some(_)) if lock(&lanes).insert(queue.clone()) => continue,
                            _ => return,
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, channel, "cannot read the outbox");
                        config.poll
                    }
                },
                Err(error) => {
                    tracing::warn!(%error, channel, "cannot claim a post");
                    config.poll
                }
            };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => {}
        }
    }
    lock(&lanes).remove(&queue);
}

/// What came of one try at sending a post.
enum Delivery {
    Sent {
        message_id: String,
        /// The token it was sent with, for an edit if the post changed meanwhile.
        token: SecretString,
    },
    /// A failure that may pass (Discord's 5xx, a rate limit, a setting to fix): the post is
    /// tried again after its back-off.
    RetryLater(String),
    /// A failure that will not pass (the server gone, a refused message): the post is dropped,
    /// with an activity entry saying why.
    Undeliverable(String),
}

async fn deliver(core: &Core, post: OutboxPost) {
    let store = core.delivery_store();
    let node = core.node_id();
    let owner = WorkspaceId::from_trusted(post.owner_id.clone());
    let token = match store.connection(&owner, &post.guild_id).await {
        Ok(record) => core.token_of(&post.owner_id, &record),
        Err(error) => Err(error),
    };
    let outcome = match token {
        Ok(token) => {
            let body = post.body.clone().with_nonce(post.nonce.clone());
            let send = core.discord().create_message(&token, &post.channel_id, &body);
            match keeping_lease(core, post.id, send).await {
                Ok(message) => Delivery::Sent { message_id: message.id, token },
                Err(e) if e.is_transient() => Delivery::RetryLater(e.to_string()),
                Err(e) => Delivery::Undeliverable(e.to_string()),
            }
        }
        Err(Error::NotFound { .. }) => {
            Delivery::Undeliverable("the server is no longer connected".to_owned())
        }
        // The stored token cannot be opened (the server key changed): it never will be.
        Err(error @ Error::Internal(_)) => Delivery::Undeliverable(error.public_message()),
        // A missing setting (the service's bot token) may be fixed by the operator.
        Err(error) => Delivery::RetryLater(error.to_string()),
    };
    let written = match outcome {
        Delivery::Sent { message_id, token } => {
            match store.finish_post(post.id, node, &message_id).await {
                Ok(Finished::Delivered) => Ok(()),
                Ok(Finished::Rewritten(body)) => {
                    edit(core, &token, &post, &message_id, &body).await;
                    Ok(())
                }
                Ok(Finished::NotHeld) => {
                    // The lease ran out during the send; whoever takes the post next sends it
                    // with the same nonce, and Discord answers with this message instead of a
                    // new one.
                    tracing::warn!(post_id = post.id, "delivered a post after its lease ran out");
                    Ok(())
                }
                Err(error) => Err(error),
            }
        }
        Delivery::RetryLater(reason) => {
            let delay = backoff(core, post.attempts);
            tracing::info!(channel = %post.channel_id, attempts = post.attempts + 1, ?delay, %reason, "post will be retried");
            store.retry_post(post.id, node, delay, &reason).await
        }
        Delivery::Undeliverable(reason) => {
            tracing::warn!(channel = %post.channel_id, agent_id = %post.agent_id, %reason, "post dropped");
            let details = format!(
                "A post to channel {} could not be delivered and was dropped: {reason}.",
                post.channel_id
            );
            store.drop_post(&post, node, &NewActivity::new(Action::PostFailed, details)).await
        }
    };
    if let Err(error) = written {
        // The lease runs out and the post is tried again; the nonce keeps it from doubling.
        tracing::warn!(%error, post_id = post.id, "cannot record a delivery outcome");
    }
}

/// Edits the message of a post rewritten since it was queued (an approval decided before its
/// request was recorded as delivered: the decision had no message to edit). Discord may show
/// the first body, so the delivery edits it; when the rewritten body was what went, the edit
/// changes nothing. A failed edit is logged, as the decision's own edit is.
async fn edit(
    core: &Core,
    token: &SecretString,
    post: &OutboxPost,
    message_id: &str,
    body: &MessageBody,
) {
    let edited = core.discord().edit_message(token, &post.channel_id, message_id, body).await;
    if let Err(error) = edited {
        tracing::warn!(%error, post_id = post.id, "cannot edit a post rewritten while it was sent");
    }
}

/// Runs `send` while renewing this node's lease on the post every third of the lease, so a send
/// that waits long on Discord's rate limits is never taken over and sent by another node too.
async fn keeping_lease<T>(core: &Core, post_id: i64, send: impl Future<Output = T>) -> T {
    let lease = core.outbox_config().lease;
    let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + lease / 3, lease / 3);
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(send);
    loop {
        tokio::select! {
            sent = &mut send => return sent,
            _ = renew.tick() => {
                match core.delivery_store().renew_post_lease(post_id, core.node_id(), lease).await {
                    Ok(true) => {}
                    // Taken over after all (this node stalled past the lease): the nonce still
                    // keeps Discord from posting it twice.
                    Ok(false) => tracing::warn!(post_id, "lost the lease of a post while sending it"),
                    Err(error) => tracing::warn!(%error, post_id, "cannot renew the lease of a post"),
                }
            }
        }
    }
}

fn backoff(core: &Core, attempts: i32) -> Duration {
    let config = core.outbox_config();
    crate::domain::backoff::exponential(config.base_backoff, config.max_backoff, attempts)
}

fn lock(lanes: &Lanes) -> std::sync::MutexGuard<'_, HashSet<OutboxLane>> {
    crate::sync::lock(lanes)
}
