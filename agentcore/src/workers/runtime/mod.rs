//! The agent runtime: every active agent works through its backlog, one task at a time.
//!
//! Each process is a node with a fresh id. A node holds a lease on each agent it runs and on
//! each task in progress; one heartbeat renews them all (every third of the lease), so a long
//! model call keeps its task. A node takes a fair share of the active agents (the active count
//! over the live nodes, rounded up) and lets go of agents above its share between tasks, so work
//! spreads as nodes come and go. An agent this node runs gets a worker: a task that waits on a
//! wake-up or its throttle timer, claims the next task in one fenced transaction, calls the
//! run (`run/`: model calls and tool calls, each a step stored fenced on the lease; each model
//! call bounded by a node-wide semaphore, 3 attempts with backoff for transient failures) and
//! writes the outcome fenced on the task's lease, with its activity and channel posts.
//!
//! Wake-ups reach workers through `wakeups.rs`; a slow fallback poll covers the rest
//! (missed notifications, expired leases, takeovers). An idle agent costs a parked task, not a
//! polling loop. The runtime is a client of [`Core`]: `dispatch.rs` is the node's main loop,
//! `worker.rs` one agent's loop, `run/` a task's run of steps, `model.rs` one model call with
//! its retries, `ratelimit.rs` its slot of the rate limits every node shares.
//!
//! See docs/decisions.md and ARCHITECTURE.md for the reasoning.

mod approval;
mod compact;
mod dispatch;
mod fallback;
mod model;
mod offer;
mod ratelimit;
mod run;
mod spend;
mod tools;
mod trace;
mod worker;

use std::sync::Arc;

use tokio::sync::{Semaphore, watch};

use crate::core::{Core, RuntimeConfig};
use crate::domain::runtime::Outcome;
use crate::wakeups::Wakeups;

/// Attempts at one model call (the first and two retries) before the task fails.
pub const ATTEMPTS_PER_CALL: i32 = 3;
/// Agents claimed in one statement.
pub(super) const CLAIM_BATCH: usize = 500;
/// Tries at writing a task's outcome (or a step, or a cost) before leaving it to lease expiry.
pub(super) const FINISH_TRIES: u32 = 5;

/// Runs a write of a task's run (a step, a call's cost, the outcome) up to [`FINISH_TRIES`]
/// times, waiting longer after each failure; `None`, logged, when every try failed (the lease
/// then runs out and the task resumes from what was stored).
pub(super) async fn write_retrying<T, Written>(
    node: &Node,
    task: &crate::domain::task::TaskId,
    what: &str,
    mut write: impl FnMut() -> Written,
) -> Option<T>
where
    Written: Future<Output = crate::Result<T>>,
{
    for attempt in 1..=FINISH_TRIES {
        match write().await {
            Ok(written) => return Some(written),
            Err(error) if attempt < FINISH_TRIES => {
                tracing::warn!(%error, %task, "cannot {what}; retrying");
                tokio::time::sleep(node.config.retry_base * attempt).await;
            }
            Err(error) => tracing::error!(%error, %task, "cannot {what}"),
        }
    }
    None
}

/// Tries at a read a run cannot go on without (its steps, its budgets) while the database is
/// unavailable.
pub(super) const READ_TRIES: u32 = 4;

/// Runs a read a run cannot go on without, trying again (after `retry_base` times the tries
/// so far) while it fails because the database cannot be reached or is busy
/// ([`StorageFault::Unavailable`]: a restart, a dropped link, a full pool): reads fail as soon
/// as a connection is refused, where writes wait for one, and a task should not fail for a
/// blip. At most [`READ_TRIES`] tries, and none that would start after `within` (half the
/// task's lease: each try may itself wait for a connection, and a run should not go on long
/// after its node could renew the lease). Any other error, or the last try's, is returned.
/// Runs read through [`read_for_run`], which says what a give-up does to them.
///
/// A node that stops meanwhile waits for these tries like any run in progress, within its
/// shutdown grace; a run still waiting after it is dropped, and its task goes back to the
/// queue with the node's leases.
///
/// [`StorageFault::Unavailable`]: crate::error::StorageFault::Unavailable
pub(super) async fn read_retrying<T, Read>(
    retry_base: std::time::Duration,
    within: std::time::Duration,
    task: &crate::domain::task::TaskId,
    what: &str,
    mut read: impl FnMut() -> Read,
) -> crate::Result<T>
where
    Read: Future<Output = crate::Result<T>>,
{
    let started = tokio::time::Instant::now();
    let mut tries = 1;
    loop {
        match read().await {
            Err(error)
                if unavailable(&error)
                    && tries < READ_TRIES
                    && started.elapsed() + retry_base * tries <= within =>
            {
                tracing::warn!(%error, %task, "cannot {what}; retrying");
                tokio::time::sleep(retry_base * tries).await;
                tries += 1;
            }
            read => return read,
        }
    }
}

fn unavailable(error: &crate::Error) -> bool {
    matches!(error, crate::Error::Storage { fault: crate::error::StorageFault::Unavailable, .. })
}

/// Where a model call, or the read before it, left a run that got no answer.
#[derive(Debug)]
pub(super) enum Unanswered {
    /// The task ends with this outcome.
    Ended(Outcome),
    /// The database stayed out of reach for a read the run cannot go on without: the run
    /// stops with nothing more written, and the task runs again, from its last stored step,
    /// at the worker's next claim (which queues again what this node left in progress).
    /// Failing the task instead would blame it for the database, and would be written just
    /// when the database is back.
    Interrupted,
}

impl From<Outcome> for Unanswered {
    fn from(outcome: Outcome) -> Self {
        Unanswered::Ended(outcome)
    }
}

/// A read a run cannot go on without, given up ([`read_for_run`]).
#[derive(Debug)]
pub(super) enum ReadFailed {
    /// The database stayed out of reach: the run is interrupted
    /// ([`Unanswered::Interrupted`]).
    Interrupted,
    /// Any other error, one that would only come again: what could not be done, for the task
    /// (or the tool call) to fail with.
    Failed(String),
}

impl From<ReadFailed> for Unanswered {
    fn from(failed: ReadFailed) -> Self {
        match failed {
            ReadFailed::Interrupted => Unanswered::Interrupted,
            ReadFailed::Failed(error) => Outcome::Failed { error, permanent: false }.into(),
        }
    }
}

/// Runs `read`, which the run of `task` cannot go on without, with this node's retries
/// ([`read_retrying`] within half the lease); a give-up says whether the run is interrupted
/// or fails, and how (`cannot <what>: ...`).
pub(super) async fn read_for_run<T, Read>(
    node: &Node,
    task: &crate::domain::task::TaskId,
    what: &str,
    read: impl FnMut() -> Read,
) -> Result<T, ReadFailed>
where
    Read: Future<Output = crate::Result<T>>,
{
    let within = node.config.lease / 2;
    let read = read_retrying(node.config.retry_base, within, task, what, read).await;
    read.map_err(|error| read_failed(task, &error, what))
}

/// What a read that [`read_retrying`] gave up on does to the run: a database out of reach
/// interrupts it; any other error fails it, saying it could not `what`.
fn read_failed(task: &crate::domain::task::TaskId, error: &crate::Error, what: &str) -> ReadFailed {
    if unavailable(error) {
        tracing::warn!(%error, %task, "run interrupted: cannot {what}; the task runs again once the database answers");
        return ReadFailed::Interrupted;
    }
    tracing::warn!(%error, %task, "cannot {what}");
    ReadFailed::Failed(format!("cannot {what}: {}", error.public_message()))
}

#[derive(Debug)]
pub struct Runtime {
    stop: Arc<watch::Sender<bool>>,
    task: tokio::task::JoinHandle<()>,
    /// The look at due schedules (`workers::scheduler`).
    scheduler: tokio::task::JoinHandle<()>,
}

/// Stops a runtime from taking new tasks, from anywhere (a signal handler, a shutdown hook).
#[derive(Debug, Clone)]
pub struct RuntimeStopper(Arc<watch::Sender<bool>>);

impl RuntimeStopper {
    /// Stops claiming tasks; tasks in progress go on. [`Runtime::shutdown`] waits for them.
    pub fn stop(&self) {
        let _ = self.0.send(true);
    }
}

impl Runtime {
    pub fn stopper(&self) -> RuntimeStopper {
        RuntimeStopper(self.stop.clone())
    }

    /// Stops claiming, lets tasks in progress finish within the grace period, gives back
    /// every lease (unfinished tasks go back to the queue for another node) and returns.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.scheduler.await;
        let _ = self.task.await;
    }
}

impl Runtime {
    /// Starts running active agents, and firing due schedules, in the background. Start it
    /// once per `Core`.
    pub fn start(core: &Core) -> Runtime {
        let (stop, stopped) = watch::channel(false);
        let node = Arc::new(Node {
            core: core.clone(),
            config: core.runtime_config(),
            calls: Semaphore::new(core.runtime_config().max_concurrent_calls.max(1)),
            membership: tokio::sync::Mutex::new(()),
            stopped: stopped.clone(),
            health: fallback::HealthCache::default(),
        });
        let scheduler = tokio::spawn(super::scheduler::run(core.clone(), stopped.clone()));
        let task = tokio::spawn(dispatch::dispatch(node, stopped));
        Runtime { stop: Arc::new(stop), task, scheduler }
    }
}

/// What the dispatcher and the workers of this node share.
pub(super) struct Node {
    pub(super) core: Core,
    pub(super) config: RuntimeConfig,
    pub(super) calls: Semaphore,
    /// Held while agents are claimed, released or adopted, so a worker leaving and the
    /// dispatcher claiming never disagree about which agents have a worker.
    pub(super) membership: tokio::sync::Mutex<()>,
    pub(super) stopped: watch::Receiver<bool>,
    /// This node's copy of the models' shared health (see [`fallback`]).
    health: fallback::HealthCache,
}

impl Node {
    pub(super) fn id(&self) -> &str {
        self.core.node_id()
    }

    pub(super) fn wakeups(&self) -> &Wakeups {
        self.core.wakeups()
    }

    pub(super) fn stopping(&self) -> bool {
        *self.stopped.borrow()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::Duration;

    use super::{READ_TRIES, ReadFailed, read_failed, read_retrying};
    use crate::Error;
    use crate::domain::task::TaskId;
    use crate::error::StorageFault;

    fn unavailable() -> Error {
        Error::Storage { fault: StorageFault::Unavailable, cause: "connection refused".into() }
    }

    /// Reads that fail with `failure(n)` for the `n`-th, answering once it is `None`: how many
    /// were made, and the result.
    async fn read(
        failure: impl Fn(usize) -> Option<Error>,
    ) -> (usize, crate::Result<&'static str>) {
        let made = Cell::new(0);
        let (base, within) = (Duration::from_secs(2), Duration::from_secs(15));
        let result = read_retrying(base, within, &TaskId::generate(), "read", || {
            let n = made.get();
            made.set(n + 1);
            let answer = failure(n).map_or(Ok("read"), Err);
            async move { answer }
        })
        .await;
        (made.get(), result)
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_the_database_cannot_answer_now_is_tried_again() {
        let started = tokio::time::Instant::now();
        let (made, result) = read(|n| (n < 2).then(unavailable)).await;
        assert_eq!((made, result.unwrap()), (3, "read"));
        assert_eq!(started.elapsed(), Duration::from_secs(6), "waits of 2 s, then 4 s");
    }

    #[tokio::test(start_paused = true)]
    async fn the_tries_are_bounded_and_the_last_error_is_returned() {
        let started = tokio::time::Instant::now();
        let (made, result) = read(|_| Some(unavailable())).await;
        assert_eq!(made, READ_TRIES as usize);
        assert!(matches!(result, Err(Error::Storage { fault: StorageFault::Unavailable, .. })));
        assert_eq!(started.elapsed(), Duration::from_secs(12), "2 + 4 + 6 s");
    }

    /// A try that would start after half the lease is not made: reads that each wait long
    /// for a connection take fewer tries.
    #[tokio::test(start_paused = true)]
    async fn no_try_starts_after_the_time_allowed() {
        let started = tokio::time::Instant::now();
        let (base, within) = (Duration::from_secs(2), Duration::from_secs(15));
        let made = Cell::new(0);
        let slow = || {
            made.set(made.get() + 1);
            async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Err::<(), _>(unavailable())
            }
        };
        assert!(read_retrying(base, within, &TaskId::generate(), "read", slow).await.is_err());
        // 5 s, wait 2 s, 5 s (12 s): a wait of 4 s would end past 15 s.
        assert_eq!(made.get(), 2);
        assert_eq!(started.elapsed(), Duration::from_secs(12));
    }

    /// A database out of reach interrupts the run (the task runs again); an error that would
    /// only come again fails the task, saying what could not be done.
    #[test]
    fn a_read_given_up_interrupts_the_run_only_when_the_database_is_out_of_reach() {
        let task = TaskId::generate();
        assert!(matches!(read_failed(&task, &unavailable(), "read"), ReadFailed::Interrupted));
        let full = Error::Storage { fault: StorageFault::Full, cause: "disk full".into() };
        match read_failed(&task, &full, "check the budgets") {
            ReadFailed::Failed(error) => {
                assert!(error.starts_with("cannot check the budgets: "), "{error}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A full disk does not pass in seconds, and any other error would only come again.
    #[tokio::test(start_paused = true)]
    async fn other_errors_are_not_tried_again() {
        let full = || Error::Storage { fault: StorageFault::Full, cause: "disk full".into() };
        let errors: [fn() -> Error; 2] = [full, || Error::Upstream("refused".into())];
        for error in errors {
            let (made, result) = read(|_| Some(error())).await;
            assert_eq!(made, 1);
            assert_eq!(result.unwrap_err().code(), error().code());
        }
    }
}
