//! PostgreSQL: agents' wake-ups sent to the other nodes after the change they announce has
//! committed, a node's waiting ones together in one statement.
//!
//! A `NOTIFY` inside a write transaction takes a lock for the whole server (every database) at
//! its commit and holds it through the commit's WAL flush, so that notifications queue in
//! commit order: every transaction that notifies commits one at a time, whatever rows it
//! touches. Adds notified
//! that way, and an add holds its agent's row lock until its commit ends, so adds to ten agents
//! ran as one queue: at the database alone, 16 clients adding to ten agents made 970–1,300 adds
//! a second with the `NOTIFY` inside and 1,545–2,016 with it sent apart (BENCHMARKS.md).
//!
//! So a write transaction only notes which agents to wake ([`super::db::Tx::wake`]) and, once
//! it has committed, hands them here ([`WakeAfterCommit::send`]); an agent's lane of adds
//! (`add_lanes.rs`) hands its agent once its transaction has committed. One task per store sends whatever is
//! waiting as `SELECT pg_notify(...) FROM unnest(...)`, one transaction of its own, and while
//! it is out the next ones gather: under load a node sends a wake-up transaction at a time,
//! not one per change. The same payload waiting twice is sent once.
//!
//! A change whose caller stops waiting (a request cut off by its deadline or its client) may
//! still commit: a commit in flight sends its wake-ups when it is dropped ([`SendOnDrop`]); a
//! spare wake-up costs a look, a missing one a poll. (An add's transaction runs to its end in
//! its lane, whoever waits for it.)
//!
//! What this gives up: a node killed between a commit and the send loses those wake-ups, and
//! the other nodes find that work at their next poll or heartbeat (`runtime.poll_seconds`), as
//! they do for anything a wake-up missed. The notices that revoke something (tokens, keys, memberships) stay inside
//! their transactions (`shared::publish`): an authorisation change may not wait for a poll.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use sqlx::{Pool, Postgres};
use tokio::sync::Notify;

use super::Notice;

/// The most wake-ups waiting to be sent; past it new ones are dropped (logged once per batch):
/// the fallback poll finds their work. Only a database that takes no statement lets them pile up.
const MOST_WAITING: usize = 10_000;
/// The most payloads in one statement.
const MOST_IN_A_STATEMENT: usize = 1_000;

/// The statement: every payload of `$1` on the wake-up channel.
const NOTIFY_ALL: &str =
    "SELECT pg_notify('agentd_wake', payload) FROM unnest($1::text[]) AS payload";

/// The store's sender of wake-ups after commit.
#[derive(Debug)]
pub(crate) struct WakeAfterCommit {
    pool: Pool<Postgres>,
    waiting: Mutex<Waiting>,
    /// Rings the sending task: something waits, or the sender is gone.
    ready: Arc<Notify>,
    /// Whether the sending task still runs: it ends with the runtime that started it, and a
    /// store kept past that runtime sends from the caller's instead.
    sending: Arc<AtomicBool>,
    /// Held while a batch is taken and sent, so that [`WakeAfterCommit::stop`] sends after the
    /// batch in flight, never before it.
    batch: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Waiting {
    /// Each payload once: wake-ups have no order, and one says all that two would.
    payloads: HashSet<String>,
    /// Whether a wake-up was dropped since the last batch (logged once).
    dropped: bool,
    /// Set by [`WakeAfterCommit::stop`]: nothing more is taken.
    stopped: bool,
}

impl WakeAfterCommit {
    /// Starts the sender on the current runtime; it ends with [`WakeAfterCommit::stop`], when
    /// the sender is dropped, or with the runtime.
    pub(crate) fn start(pool: Pool<Postgres>) -> Arc<Self> {
        let running = Running(Arc::new(AtomicBool::new(true)));
        let this = Arc::new(Self {
            pool,
            waiting: Mutex::default(),
            ready: Arc::new(Notify::new()),
            sending: Arc::clone(&running.0),
            batch: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(send_loop(Arc::downgrade(&this), Arc::clone(&this.ready), running));
        this
    }

    /// Queues `notices` to be sent soon; the change they announce has committed.
    pub(crate) fn send(&self, notices: impl IntoIterator<Item = Notice>) {
        let any_waiting = {
            let mut waiting = crate::sync::lock(&self.waiting);
            if waiting.stopped {
                return;
            }
            for notice in notices {
                let payload = notice.to_payload();
                if waiting.payloads.contains(&payload) {
                    continue;
                }
                if waiting.payloads.len() >= MOST_WAITING {
                    if !waiting.dropped {
                        tracing::warn!("too many wake-ups waiting to be sent; dropping some");
                        waiting.dropped = true;
                    }
                    continue;
                }
                waiting.payloads.insert(payload);
            }
            !waiting.payloads.is_empty()
        };
        if !any_waiting {
            return;
        }
        if self.sending.load(Ordering::Acquire) {
            self.ready.notify_one();
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let payloads = self.take().0;
            runtime.spawn(send_now(self.pool.clone(), payloads));
        }
    }

    /// Sends what is waiting, after the batch in flight, and takes nothing more (the store is
    /// closing).
    pub(crate) async fn stop(&self) {
        crate::sync::lock(&self.waiting).stopped = true;
        self.ready.notify_one();
        let _batch = self.batch.lock().await;
        let last = self.take().0;
        send_now(self.pool.clone(), last).await;
    }

    fn take(&self) -> (Vec<String>, bool) {
        let mut waiting = crate::sync::lock(&self.waiting);
        waiting.dropped = false;
        (std::mem::take(&mut waiting.payloads).into_iter().collect(), waiting.stopped)
    }
}

impl Drop for WakeAfterCommit {
    fn drop(&mut self) {
        // The sending task finds its sender gone and ends.
        self.ready.notify_one();
    }
}

/// Marks the sender stopped when the sending task ends: it returned, or its runtime dropped
/// it, polled or not (the marker is moved into the task, not made in it).
struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

async fn send_loop(this: Weak<WakeAfterCommit>, ready: Arc<Notify>, _running: Running) {
    loop {
        ready.notified().await;
        let Some(this) = this.upgrade() else { return };
        let _batch = this.batch.lock().await;
        let (payloads, stopped) = this.take();
        send_now(this.pool.clone(), payloads).await;
        if stopped {
            return;
        }
    }
}

/// Sends `payloads` in statements of [`MOST_IN_A_STATEMENT`]; a failure is logged, and those
/// wake-ups and the rest are lost to the poll (a database that refused one statement would
/// likely keep the others waiting too).
async fn send_now(pool: Pool<Postgres>, payloads: Vec<String>) {
    for chunk in payloads.chunks(MOST_IN_A_STATEMENT) {
        if let Err(error) = sqlx::query(NOTIFY_ALL).bind(chunk).execute(&pool).await {
            let lost = payloads.len();
            tracing::warn!(%error, lost, "cannot send wake-ups; the poll will find the work");
            return;
        }
    }
}

/// Wake-ups sent when this is dropped, by whatever way its owner ends: a commit or an add that
/// returned, failed, or was cut off while the database may have committed it. An owner that
/// learnt nothing needs waking clears [`SendOnDrop::notices`] first.
pub(crate) struct SendOnDrop {
    pub(crate) wakes: Arc<WakeAfterCommit>,
    pub(crate) notices: Vec<Notice>,
}

impl Drop for SendOnDrop {
    fn drop(&mut self) {
        if !self.notices.is_empty() {
            self.wakes.send(std::mem::take(&mut self.notices));
        }
    }
}
