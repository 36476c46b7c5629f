//! Lanes: writes that would each be a transaction and a commit of their own, committed
//! together instead: PostgreSQL's writes that go one at a time under one row lock, each holding
//! it through its commit's WAL flush (an agent's adds, `add_lanes.rs`; a workspace's audit
//! entries, `audit_lanes.rs`), and a node's finished tasks on both backends
//! (`finish_lanes.rs`).
//!
//! Each key (the agent, the workspace, a share of the node's agents) has a lane on the node
//! while a write of it is in flight. The first write to a free lane starts a transaction at
//! once, in a task of its own; the writes to that key arriving meanwhile wait in the lane and
//! go together as the next transaction, at most [`Batch::MOST`]: one lock taken, one flush for
//! all of them, each written as it would be alone. Lanes of different keys run side by side,
//! as many as the pool has connections. Across nodes the row lock still orders one node's
//! transactions against another's.
//!
//! How many writes wait is bounded by the callers in flight: each caller waits for its
//! answer. A write whose caller stopped waiting before its transaction began is dropped
//! unwritten, so that a client that tries again gets one write, unless the kind keeps such
//! writes ([`Batch::KEEPS_ABANDONED`]; those go at up to [`Batch::MOST`] a transaction, far
//! faster than the changes that make them). A transaction runs to its end when
//! its callers stop waiting, as a single write does. When the database refuses one write of a
//! transaction of several ([`Batch::its_own`]: for statements, a data exception, a constraint,
//! a raise in a trigger; nothing of the transaction is written), each runs again alone, so that
//! write's error is its own; any other error (for statements: a storage fault, a timeout) is
//! answered to every write of the transaction at once.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::oneshot;

use crate::error::{Error, Result};

/// What one kind of lane writes.
#[async_trait]
pub(crate) trait Batch: Send + Sync + 'static {
    /// Whose writes share a lock: an agent, a workspace.
    type Key: Clone + Eq + Hash + Send + Sync + 'static;
    /// One write's values, owned so that it can wait in its lane.
    type Item: Send + Sync + 'static;
    /// What the write's caller gets.
    type Answer: Send + 'static;
    /// What a transaction's failure is.
    type Error: Into<Error> + std::fmt::Display + Send;

    /// The most writes in one transaction: a bound on how long one holds the lock.
    const MOST: usize;

    /// Whether a write whose caller stopped waiting before its transaction began is made all
    /// the same (an audit entry, whose change is made), or dropped (an add: a client that
    /// tries again gets one task, not two).
    const KEEPS_ABANDONED: bool = false;

    /// Writes `items`, of `key`, in one transaction: each one's answer, in order.
    async fn write(
        &self,
        key: &Self::Key,
        items: &[&Self::Item],
    ) -> std::result::Result<Vec<Self::Answer>, Self::Error>;

    /// Whether `error` is one write's own, which the other writes of its transaction would not
    /// meet alone: they then run again, each alone.
    fn its_own(error: &Self::Error) -> bool;

    /// A transaction of `key` committed with these answers (before they are told).
    fn committed(&self, _key: &Self::Key, _answers: &[Self::Answer]) {}
}

struct Job<B: Batch> {
    item: B::Item,
    answer: oneshot::Sender<Result<B::Answer>>,
}

/// A node's lanes of one kind, one per key with a write in flight.
pub(crate) struct Lanes<B: Batch> {
    inner: Arc<Inner<B>>,
}

impl<B: Batch> Clone for Lanes<B> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<B: Batch> std::fmt::Debug for Lanes<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes").finish_non_exhaustive()
    }
}

struct Inner<B: Batch> {
    batch: B,
    /// A key is here while a transaction of its writes is in flight, with the writes that
    /// arrived since, in order.
    lanes: Mutex<HashMap<B::Key, Vec<Job<B>>>>,
}

impl<B: Batch> Lanes<B> {
    pub(crate) fn new(batch: B) -> Self {
        Self { inner: Arc::new(Inner { batch, lanes: Mutex::default() }) }
    }

    /// What writes the lanes.
    pub(crate) fn batch(&self) -> &B {
        &self.inner.batch
    }

    /// How many writes wait for their lane's transaction in flight.
    pub(crate) fn waiting(&self) -> usize {
        crate::sync::lock(&self.inner.lanes).values().map(Vec::len).sum()
    }

    /// Writes `item` of `key` in the lane's next transaction.
    pub(crate) async fn write(&self, key: B::Key, item: B::Item) -> Result<B::Answer> {
        let (answer, answered) = oneshot::channel();
        let job = Job { item, answer };
        let first = {
            let mut lanes = crate::sync::lock(&self.inner.lanes);
            match lanes.get_mut(&key) {
                Some(waiting) => {
                    waiting.push(job);
                    None
                }
                None => {
                    lanes.insert(key.clone(), Vec::new());
                    Some(job)
                }
            }
        };
        if let Some(job) = first {
            // Made before the spawn: a task dropped unpolled (a runtime shutting down) still
            // frees the lane.
            let lane = Lane { inner: Arc::clone(&self.inner), key, done: false };
            tokio::spawn(lane.drive(vec![job]));
        }
        answered.await.map_err(|_| Error::internal("a lane of writes stopped"))?
    }
}

/// The one task writing a key's writes; frees the lane however it ends.
struct Lane<B: Batch> {
    inner: Arc<Inner<B>>,
    key: B::Key,
    done: bool,
}

impl<B: Batch> Lane<B> {
    async fn drive(mut self, mut batch: Vec<Job<B>>) {
        loop {
            self.write(batch).await;
            let mut lanes = crate::sync::lock(&self.inner.lanes);
            let Some(waiting) = lanes.get_mut(&self.key) else { break };
            // A write whose caller stopped waiting before its transaction began (a request's
            // deadline, a client gone) is not made, unless the batch keeps such writes.
            if !B::KEEPS_ABANDONED {
                waiting.retain(|job| !job.answer.is_closed());
            }
            if waiting.is_empty() {
                lanes.remove(&self.key);
                break;
            }
            let n = waiting.len().min(B::MOST);
            batch = waiting.drain(..n).collect();
        }
        self.done = true;
    }

    /// Writes `batch` in one transaction; when one of its writes was refused, each alone;
    /// answers each.
    async fn write(&self, batch: Vec<Job<B>>) {
        let items: Vec<&B::Item> = batch.iter().map(|job| &job.item).collect();
        match self.inner.batch.write(&self.key, &items).await {
            Ok(answers) => self.answer(batch, answers),
            Err(error) if batch.len() > 1 && B::its_own(&error) => {
                tracing::debug!(%error, size = batch.len(), "a write of a transaction was refused; each runs alone");
                let mut jobs = batch.into_iter();
                while let Some(job) = jobs.next() {
                    match self.inner.batch.write(&self.key, &[&job.item]).await {
                        Ok(answers) => self.answer(vec![job], answers),
                        Err(error) if B::its_own(&error) => {
                            drop(job.answer.send(Err(error.into())))
                        }
                        // Not this write's (a fault, a timeout): the ones left would meet it too.
                        Err(error) => return refuse(std::iter::once(job).chain(jobs), error),
                    }
                }
            }
            Err(error) => refuse(batch, error),
        }
    }

    fn answer(&self, jobs: Vec<Job<B>>, answers: Vec<B::Answer>) {
        self.inner.batch.committed(&self.key, &answers);
        for (job, answer) in jobs.into_iter().zip(answers) {
            job.answer.send(Ok(answer)).ok();
        }
    }
}

/// One column of a transaction's writes, as an array to bind (`UNNEST` takes one per column).
pub(crate) fn column<I, T>(items: &[I], value: impl Fn(&I) -> T) -> Vec<T> {
    items.iter().map(value).collect()
}

/// Whether the database refused one write's values (a data exception, a constraint, a raise in
/// a trigger): [`Batch::its_own`] for the lanes of statements.
pub(crate) fn values_refused(error: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = error else { return false };
    db.code().is_some_and(|code| ["22", "23", "P0"].iter().any(|class| code.starts_with(class)))
}

/// Answers every job with `error`: a storage fault as itself, anything else as an internal
/// error with its text.
fn refuse<B: Batch>(jobs: impl IntoIterator<Item = Job<B>>, error: B::Error) {
    let error: Error = error.into();
    for job in jobs {
        let copy = match &error {
            Error::Storage { fault, cause } => {
                Error::Storage { fault: *fault, cause: cause.clone() }
            }
            other => Error::internal(other.to_string()),
        };
        job.answer.send(Err(copy)).ok();
    }
}

impl<B: Batch> Drop for Lane<B> {
    /// Ended early (a panic, a runtime shutting down): the writes waiting are answered with an
    /// error when their jobs drop here, and the next write starts the lane afresh.
    fn drop(&mut self) {
        if !self.done {
            crate::sync::lock(&self.inner.lanes).remove(&self.key);
        }
    }
}
