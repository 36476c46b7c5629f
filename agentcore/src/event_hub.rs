//! Who is following whose events on this node, and the bells that wake them.
//!
//! A stream (`Core::events`) subscribes for its owner. The events themselves are in the
//! database; what reaches a subscriber here is only "look again" (the owner's bell), rung by
//! this node's own writes, by PostgreSQL's notifications (sent as any node numbers events, see
//! `core/numbering.rs`), by this node's numbering, and by a poll
//! of the owners' latest event ids (what another process on the same SQLite file wrote, or a
//! notification lost while the listener reconnected). Live-only events (a step starting) are
//! broadcast to the owner's subscribers on this node as they happen.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch};

use crate::domain::event::Event;
use crate::domain::workspace::WorkspaceId;
use crate::stripes::Stripes;
use crate::sync::lock;

/// How many live events wait for a slow subscriber before it misses some (live events are
/// never replayed; stored ones are read from the database).
const LIVE_BACKLOG: usize = 64;

/// The node's subscribers, by owner.
#[derive(Debug, Default)]
pub(crate) struct EventHub {
    owners: Mutex<HashMap<WorkspaceId, Arc<Followed>>>,
    /// Streams open on this node, all owners.
    open: AtomicUsize,
    /// The node is stopping: no new subscriptions.
    closed: AtomicBool,
    /// Bells rung, followed or not: an owner's count moves whenever its events may have grown.
    rung: Stripes,
}

/// Why a subscription was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The owner has this many streams open already.
    Full(usize),
    Closed,
}

/// One owner followed by at least one stream.
#[derive(Debug)]
struct Followed {
    /// Rung (its value moved on) when the owner's events may have grown.
    bell: watch::Sender<u64>,
    live: broadcast::Sender<Arc<Event>>,
    streams: AtomicUsize,
    /// The latest event id the poll saw.
    polled: AtomicI64,
}

/// One stream's hold on its owner's bell; dropping it ends the subscription.
#[derive(Debug)]
pub(crate) struct Subscription {
    hub: Arc<EventHub>,
    owner: WorkspaceId,
    pub(crate) bell: watch::Receiver<u64>,
    pub(crate) live: broadcast::Receiver<Arc<Event>>,
}

impl EventHub {
    /// Subscribes to `owner`'s bell, unless the owner has `limit` streams open already
    /// (0: no limit).
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        owner: &WorkspaceId,
        limit: u32,
    ) -> Result<Subscription, Refused> {
        let mut owners = lock(&self.owners);
        if self.closed.load(Ordering::SeqCst) {
            return Err(Refused::Closed);
        }
        let followed = owners.entry(owner.clone()).or_insert_with(|| {
            Arc::new(Followed {
                bell: watch::channel(0).0,
                live: broadcast::channel(LIVE_BACKLOG).0,
                streams: AtomicUsize::new(0),
                polled: AtomicI64::new(-1),
            })
        });
        let open = followed.streams.load(Ordering::SeqCst);
        if limit > 0 && open >= limit as usize {
            return Err(Refused::Full(open));
        }
        followed.streams.fetch_add(1, Ordering::SeqCst);
        self.open.fetch_add(1, Ordering::SeqCst);
        Ok(Subscription {
            hub: Arc::clone(self),
            owner: owner.clone(),
            bell: followed.bell.subscribe(),
            live: followed.live.subscribe(),
        })
    }

    /// The owner's events may have grown: its streams look.
    pub(crate) fn ring(&self, owner: &WorkspaceId) {
        self.rung.bump(owner);
        if let Some(followed) = lock(&self.owners).get(owner) {
            followed.bell.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Anything may have changed (the listener reconnected): every stream looks.
    pub(crate) fn ring_all(&self) {
        self.rung.bump_all();
        for followed in lock(&self.owners).values() {
            followed.bell.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Tells `owner`'s streams on this node of a live-only event.
    pub(crate) fn live(&self, owner: &WorkspaceId, event: Event) {
        if let Some(followed) = lock(&self.owners).get(owner) {
            // No receiver is fine: nobody follows at this instant.
            let _ = followed.live.send(Arc::new(event));
        }
    }

    /// The owners followed now.
    pub(crate) fn followed(&self) -> Vec<WorkspaceId> {
        lock(&self.owners).keys().cloned().collect()
    }

    /// What a poll found: `owner`'s latest event is `latest`; rings its bell if that is new.
    pub(crate) fn polled(&self, owner: &WorkspaceId, latest: i64) {
        if let Some(followed) = lock(&self.owners).get(owner) {
            let before = followed.polled.swap(latest, Ordering::SeqCst);
            if before != latest {
                self.rung.bump(owner);
                followed.bell.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// Ends every subscription (their bells are dropped, so each stream sees its end) and
    /// refuses new ones.
    pub(crate) fn close(&self) {
        let mut owners = lock(&self.owners);
        self.closed.store(true, Ordering::SeqCst);
        owners.clear();
    }

    /// A count that moves whenever `owner`'s bell was rung on this node, whoever follows (see
    /// [`EventHub::ring`]), and at times when another owner's was (see [`Stripes`]).
    pub(crate) fn rung(&self, owner: &WorkspaceId) -> u64 {
        self.rung.count(owner)
    }

    /// Streams open on this node.
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.open.fetch_sub(1, Ordering::SeqCst);
        let mut owners = lock(&self.hub.owners);
        if let Some(followed) = owners.get(&self.owner)
            && followed.streams.fetch_sub(1, Ordering::SeqCst) == 1
        {
            owners.remove(&self.owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_streams_are_counted_and_forgotten_when_dropped() {
        let hub = Arc::new(EventHub::default());
        let owner = WorkspaceId::from_trusted("u_1".to_owned());
        let first = hub.subscribe(&owner, 2).unwrap();
        let mut second = hub.subscribe(&owner, 2).unwrap();
        assert_eq!(hub.subscribe(&owner, 2).unwrap_err(), Refused::Full(2));
        second.bell.borrow_and_update();
        let rung = hub.rung(&owner);
        hub.ring(&owner);
        assert!(second.bell.has_changed().unwrap());
        let other = WorkspaceId::from_trusted("u_2".to_owned());
        let others = hub.rung(&other);
        hub.ring(&other);
        assert_eq!(hub.rung(&other), others + 1, "a bell nobody follows is counted too");
        hub.ring_all();
        assert_eq!(hub.rung(&owner), rung + 2, "its own and every owner's");
        drop(first);
        drop(second);
        assert_eq!(hub.open(), 0);
        assert!(hub.followed().is_empty());
        let third = hub.subscribe(&owner, 2).unwrap();
        hub.close();
        assert!(third.bell.has_changed().is_err(), "a closed hub ends its streams");
        assert_eq!(hub.subscribe(&owner, 2).unwrap_err(), Refused::Closed);
    }
}
