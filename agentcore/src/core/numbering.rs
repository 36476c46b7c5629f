//! Numbering events after they commit, on PostgreSQL (migration
//! `0027_events_numbered_after_commit.sql`): the triggers only stage an event, and
//! [`EventStore::number_events`](crate::store::EventStore::number_events) gives the committed
//! ones their numbers, one owner's at a time under its counter's lock, and notifies every node.
//!
//! Who numbers, so that no committed event waits long for its number:
//! - this node, right after it wrote events: each write transaction's commit wakes the loop
//!   here, and so does [`Core::ring_events`] (for the writes made outside one);
//! - every node, at least every [`SWEEP`]: what a node killed before numbering left, what
//!   another process (`agentctl --local`) wrote, what a write that rang no bell staged;
//! - a stream as it opens (where it starts counts every event committed before it), and
//!   before a read while it holds live events (`core/events.rs`): a live event is sent after
//!   what the read returns, which must hold every event committed before it was told;
//! - [`Core::close`], once, for what this node wrote last.
//!
//! SQLite numbers each event as it is written: nothing runs there.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::{Core, Inner};
use crate::domain::workspace::WorkspaceId;
use crate::store::{Backend, NUMBERED_OWNERS};

/// How often every node numbers whatever is left, woken or not.
pub(crate) const SWEEP: Duration = Duration::from_secs(1);

/// The node's numbering loop: its wake-up and its stop.
#[derive(Debug)]
pub(super) struct Numbering {
    wake: Arc<Notify>,
    stop: watch::Sender<bool>,
    started: OnceLock<()>,
}

impl Numbering {
    /// Woken by `commits` (the store's, told after each write transaction commits) and by
    /// [`Core::number_soon`].
    pub(super) fn new(commits: Option<Arc<Notify>>) -> Self {
        Numbering {
            wake: commits.unwrap_or_default(),
            stop: watch::channel(false).0,
            started: OnceLock::new(),
        }
    }
}

impl Core {
    /// Starts the node's numbering loop, once, on PostgreSQL.
    pub(super) fn start_numbering(&self) {
        if self.backend() != Backend::Postgres || self.inner.numbering.started.set(()).is_err() {
            return;
        }
        let wake = Arc::clone(&self.inner.numbering.wake);
        let stop = self.inner.numbering.stop.subscribe();
        tokio::spawn(run(Arc::downgrade(&self.inner), wake, stop));
    }

    /// This node wrote events: they are numbered soon (on PostgreSQL).
    pub(super) fn number_soon(&self) {
        self.inner.numbering.wake.notify_one();
    }

    /// Stops the loop and numbers what is left, once: the node is closing.
    pub(super) async fn stop_numbering(&self) {
        let _ = self.inner.numbering.stop.send(true);
        if self.backend() == Backend::Postgres {
            number_all(self, Round::Last).await;
        }
    }
}

async fn run(inner: Weak<Inner>, wake: Arc<Notify>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => return,
            () = wake.notified() => {}
            () = tokio::time::sleep(SWEEP) => {}
        }
        let Some(inner) = inner.upgrade() else { return };
        number_all(&Core { inner }, Round::Loop).await;
    }
}

/// Which round [`number_all`] makes: the loop's, after a wake-up, or a closing node's last.
#[derive(Clone, Copy)]
enum Round {
    Loop,
    Last,
}

/// Calls of one round at most: under a steady stream of commits the round ends, and the
/// next begins at the next wake-up (stopping is looked at in between).
const CALLS_PER_ROUND: usize = 10;

/// Numbers every owner's committed events, a hundred owners a transaction (those waiting
/// longest first), and tells this node's streams and the webhooks' worker of each owner's new
/// events (other nodes hear the notification each numbering sends). At most
/// [`CALLS_PER_ROUND`] calls.
///
/// A loop's round (`Round::Loop`) ends with a call that numbered fewer owners than it may: it
/// found every owner with events committed before it, and numbered them or lost them to
/// another numbering (another node's, a stream's, the webhooks' worker's). What commits after
/// it wakes the loop again; calling once more to find nothing cost a scan of the staged events
/// and a transaction every wake-up. The one case this leaves for the next wake-up or the
/// [`SWEEP`]: more owners waiting than a call numbers, while another numbering takes some of
/// the same ones. The last round of a closing node (`Round::Last`) goes on until a call
/// numbers nothing, as no wake-up follows it here.
async fn number_all(core: &Core, round: Round) {
    let page = usize::try_from(NUMBERED_OWNERS).unwrap_or(usize::MAX);
    for _ in 0..CALLS_PER_ROUND {
        match core.store().number_events(None).await {
            Ok(owners) => {
                announce(core, &owners);
                let done = match round {
                    Round::Loop => owners.len() < page,
                    Round::Last => owners.is_empty(),
                };
                if done {
                    return;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot number events; trying again");
                return;
            }
        }
    }
}

/// The owners' events were numbered: their streams here read, the webhooks' worker looks.
pub(super) fn announce(core: &Core, owners: &[WorkspaceId]) {
    for owner in owners {
        core.inner.events.ring(owner);
    }
    if !owners.is_empty() {
        core.wakeups().webhooks.notify_one();
    }
}
