//! Outbound webhooks' delivery: the fan-out of each owner's new events into deliveries, and
//! the attempts.
//!
//! The events table numbers each owner's events 1, 2, 3... (a number, once visible, has every
//! event before it visible too; on PostgreSQL soon after their commit); a cursor per owner with
//! endpoints marks the last one turned into deliveries. The fan-out reads the events past it
//! (a bounded batch), renders each body once, and inserts the deliveries for the enabled
//! endpoints that ask for the event's type, moving the cursor in the same transaction
//! (compare-and-set: a second node that read the same cursor writes nothing). Deliveries are
//! rows, so a node killed at any point loses nothing: another (or the restarted one) sends
//! what is pending once its lease has run out, with the same `webhook-id` and body.
//!
//! Attempts (`send.rs`) are leased to one node at a time, at most `max_in_flight` at once
//! per node, each bounded in time. The worker looks on every wake-up (this node wrote events
//! or queued a delivery) and at least every `poll`.

mod send;

use std::sync::Arc;

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::core::Core;
use crate::domain::event::EventFilter;
use crate::domain::webhook::{SUBSCRIBABLE, body, message_id};
use crate::domain::workspace::WorkspaceId;
use crate::error::Result;
use crate::store::NewDelivery;

/// Events one fan-out turns into deliveries at most, per owner.
const FAN_OUT_BATCH: i64 = 100;
/// Owners one look fans out at most (the rest at the next look).
const OWNERS_PER_LOOK: i64 = 100;

/// The running webhooks' worker. Dropping it leaves it running; call
/// [`WebhookWorker::shutdown`] to stop it.
#[derive(Debug)]
pub struct WebhookWorker {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl WebhookWorker {
    /// Starts fanning out events and sending deliveries in the background.
    pub fn start(core: &Core) -> WebhookWorker {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run(core.clone(), stopped));
        WebhookWorker { stop, task }
    }

    /// Stops taking deliveries and waits for the attempts in flight to finish (each is
    /// bounded by `webhooks.attempt_timeout_seconds`).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn run(core: Core, mut stop: watch::Receiver<bool>) {
    let config = core.webhook_config().clone();
    let slots = Arc::new(Semaphore::new(config.max_in_flight.max(1)));
    let mut sends = JoinSet::new();
    loop {
        fan_out_all(&core).await;
        let free = slots.available_permits();
        if free > 0 {
            let limit = i64::try_from(free).unwrap_or(i64::MAX);
            match core.webhook_store().claim_deliveries(core.node_id(), config.lease(), limit).await
            {
                Ok(claimed) => {
                    for delivery in claimed {
                        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { break };
                        sends.spawn(send::attempt(core.clone(), delivery, slot));
                    }
                }
                Err(error) => tracing::warn!(%error, "cannot claim webhook deliveries"),
            }
        }
        while sends.try_join_next().is_some() {}
        tokio::select! {
            () = core.wakeups().webhooks.notified() => {}
            () = tokio::time::sleep(config.poll) => {}
            Some(_) = sends.join_next(), if !sends.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    while sends.join_next().await.is_some() {}
}

/// Fans out the events of every owner whose cursor is behind.
async fn fan_out_all(core: &Core) {
    let due = match core.webhook_store().fanout_due(OWNERS_PER_LOOK).await {
        Ok(due) => due,
        Err(error) => {
            tracing::warn!(%error, "cannot read the webhooks' fan-out cursors");
            return;
        }
    };
    for (owner, cursor) in due {
        if let Err(error) = fan_out(core, &owner, cursor).await {
            tracing::warn!(%error, workspace = %owner, "cannot fan out events to webhooks");
        }
    }
}

/// Turns the owner's events after `cursor` (a batch) into deliveries.
async fn fan_out(core: &Core, owner: &WorkspaceId, cursor: i64) -> Result<()> {
    let store = core.webhook_store();
    let latest = store.event_bounds(owner).await?.latest;
    let upto = latest.min(cursor.saturating_add(FAN_OUT_BATCH));
    if upto <= cursor {
        return Ok(());
    }
    let events = store.events_after(owner, cursor, &EventFilter::default(), FAN_OUT_BATCH).await?;
    let messages: Vec<NewDelivery> = events
        .iter()
        .filter(|event| SUBSCRIBABLE.contains(&event.kind))
        .filter_map(|event| {
            let seq = event.id.filter(|seq| *seq <= upto)?;
            Some(NewDelivery {
                event_seq: seq,
                event_type: event.kind,
                message_id: message_id(),
                body: body(event),
            })
        })
        .collect();
    if store.fan_out(owner, cursor, upto, &messages).await? && !messages.is_empty() {
        // More may be due at once: the loop claims right after.
        core.wakeups().webhooks.notify_one();
    }
    Ok(())
}
