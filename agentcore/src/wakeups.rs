//! Wake-ups, in one place: who is told that something may have changed.
//!
//! In process, adding a task, starting an agent or retrying a task wakes the agent's worker, or
//! the runtime's dispatcher when no worker runs it on this node; queueing a post wakes the
//! outbox's dispatcher. On PostgreSQL the same changes also publish `pg_notify` once they
//! have committed (the store's `wake_after_commit.rs`), and the listener feeds what other
//! nodes published back in here. A slow fallback poll in each worker covers whatever is
//! missed, a wake-up lost with a node killed between a commit and its send included.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::domain::runtime::AgentKey;

/// Where wake-ups go: the worker of an agent this node runs, else the dispatcher.
#[derive(Debug, Default)]
pub(crate) struct Wakeups {
    /// The workers of the agents this node runs.
    pub(crate) workers: Mutex<HashMap<AgentKey, Arc<Worker>>>,
    /// The runtime's dispatcher: claims agents and balances the node's share.
    pub(crate) dispatcher: Notify,
    /// The outbox's dispatcher: starts a lane for each channel with posts.
    pub(crate) outbox: Notify,
    /// The webhooks' worker: events were written (to fan out), or a delivery queued.
    pub(crate) webhooks: Notify,
}

impl Wakeups {
    /// The agent may have work: wake its worker here, or the dispatcher to claim it.
    pub(crate) fn agent(&self, agent: &AgentKey) {
        match crate::sync::lock(&self.workers).get(agent) {
            Some(worker) => worker.wake.notify_one(),
            None => self.dispatcher.notify_one(),
        }
    }

    /// Agents may be free to claim (another node let go of some): the dispatcher looks.
    pub(crate) fn claimable(&self) {
        self.dispatcher.notify_one();
    }

    /// A post was queued: the outbox's dispatcher looks at once.
    pub(crate) fn post_queued(&self) {
        self.outbox.notify_one();
    }

    /// How many agents have a worker on this node.
    pub(crate) fn running(&self) -> usize {
        crate::sync::lock(&self.workers).len()
    }
}

/// One agent's worker, as the rest of the node sees it.
#[derive(Debug, Default)]
pub(crate) struct Worker {
    pub(crate) wake: Notify,
    /// Set to make the worker let go of its agent after the task in progress.
    leaving: AtomicBool,
}

impl Worker {
    pub(crate) fn leave(&self) {
        self.leaving.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    pub(crate) fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::SeqCst)
    }
}
