//! PostgreSQL: agents' wake-ups sent to the other nodes after the change they announce has
//! committed, a node's waiting ones together in one statement.
//!
//! A `NOTIFY` inside a write transaction takes a lock for the whole database at its commit and
//! holds it through the commit's WAL flush, so that notifications queue in commit order: every
//! transaction that notifies commits one at a time, whatever rows it touches. Adds notified
//! that way, and an add holds its agent's row lock until its commit ends, so adds to ten agents
//! ran as one queue: at the database alone, 16 clients adding to ten agents made 970–1,300 adds
//! a second with the `NOTIFY` inside and 1,545–2,016 with it sent apart (BENCHMARKS.md).
//!
//! So a write transaction only notes which agents to wake ([`super::db::Tx::wake`]) and, once
//! it has committed, hands them here ([`WakeAfterCommit::send`]); an add through `add_task`
//! hands its agent when the function has returned. One task per store sends whatever is
//! waiting as `SELECT pg_notify(...) FROM unnest(...)`, one transaction of its own, and while
//! it is out the next ones gather: under load a node sends a wake-up transaction at a time,
//! not one per change. The same payload waiting twice is sent once.
//!
//! What this gives up: a node killed between a commit and the send loses those wake-ups, and
//! the other nodes find that work at their next poll (`runtime.poll`), as they do for anything
//! a wake-up missed. The notices that revoke something (tokens, keys, memberships) stay inside
//! their transactions (`shared::publish`): an authorisation change may not wait for a poll.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sqlx::{Pool, Postgres};
use tokio::sync::Notify;

use super::Notice;

/// The most wake-ups waiting to be sent; past it a new one is dropped (and logged): the
/// fallback poll finds its work. Only a database that takes no statement lets them pile up.
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
    ready: Notify,
    /// Whether the sending task still runs: it ends with the runtime that started it, and a
    /// store kept past that runtime sends from the caller's instead.
    sending: AtomicBool,
}

#[derive(Debug, Default)]
struct Waiting {
    payloads: Vec<String>,
    seen: HashSet<String>,
    /// Set by [`WakeAfterCommit::stop`]: nothing more is taken.
    stopped: bool,
}

impl WakeAfterCommit {
    /// Starts the sender on the current runtime; it ends with [`WakeAfterCommit::stop`].
    pub(crate) fn start(pool: Pool<Postgres>) -> Arc<Self> {
        let this = Arc::new(Self {
            pool,
            waiting: Mutex::default(),
            ready: Notify::new(),
            sending: AtomicBool::new(true),
        });
        tokio::spawn(send_loop(Arc::clone(&this)));
        this
    }

    /// Queues `notices` to be sent soon; the change they announce has committed.
    pub(crate) fn send(&self, notices: impl IntoIterator<Item = Notice>) {
        let mut queued = false;
        {
            let mut waiting = crate::sync::lock(&self.waiting);
            if waiting.stopped {
                return;
            }
            for notice in notices {
                let payload = notice.to_payload();
                if waiting.seen.contains(&payload) {
                    continue;
                }
                if waiting.payloads.len() >= MOST_WAITING {
                    tracing::warn!(payload, "too many wake-ups waiting to be sent; dropped one");
                    continue;
                }
                waiting.seen.insert(payload.clone());
                waiting.payloads.push(payload);
                queued = true;
            }
        }
        if !queued {
            return;
        }
        if self.sending.load(Ordering::Acquire) {
            self.ready.notify_one();
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let payloads = self.take().0;
            runtime.spawn(send_now(self.pool.clone(), payloads));
        }
    }

    /// Sends what is waiting now and takes nothing more (the store is closing).
    pub(crate) async fn stop(&self) {
        let last = {
            let mut waiting = crate::sync::lock(&self.waiting);
            waiting.stopped = true;
            take(&mut waiting)
        };
        send_now(self.pool.clone(), last).await;
        self.ready.notify_one();
    }

    fn take(&self) -> (Vec<String>, bool) {
        let mut waiting = crate::sync::lock(&self.waiting);
        (take(&mut waiting), waiting.stopped)
    }
}

fn take(waiting: &mut Waiting) -> Vec<String> {
    waiting.seen.clear();
    std::mem::take(&mut waiting.payloads)
}

async fn send_loop(this: Arc<WakeAfterCommit>) {
    /// Marks the sender stopped when the task ends, also by its runtime's shutdown.
    struct Running<'a>(&'a AtomicBool);
    impl Drop for Running<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Release);
        }
    }
    let _running = Running(&this.sending);
    loop {
        this.ready.notified().await;
        let (payloads, stopped) = this.take();
        send_now(this.pool.clone(), payloads).await;
        if stopped {
            return;
        }
    }
}

/// Sends `payloads` in statements of [`MOST_IN_A_STATEMENT`]; a failure is logged, and the
/// wake-ups are lost to the poll.
async fn send_now(pool: Pool<Postgres>, payloads: Vec<String>) {
    for chunk in payloads.chunks(MOST_IN_A_STATEMENT) {
        let sent = sqlx::query(NOTIFY_ALL).bind(chunk).execute(&pool).await;
        if let Err(error) = sent {
            tracing::warn!(%error, count = chunk.len(), "cannot send wake-ups; the poll will find the work");
        }
    }
}
