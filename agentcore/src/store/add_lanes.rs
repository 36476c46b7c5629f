//! PostgreSQL's adds to one agent, committed together.
//!
//! An add takes its agent's row lock and holds it through its commit's WAL flush, so that
//! creation order is commit order and a client paging a backlog by creation time never skips
//! a task added meanwhile (`add_task`, migration 0025). Adds to one agent therefore commit one
//! at a time, each after the last one's flush: 64 clients adding to one agent waited in a
//! queue of row locks.
//!
//! Here each agent has a lane on the node. The first add to an agent whose lane is free starts
//! a transaction for it at once; the adds to that agent that arrive while it is in flight wait
//! in the lane and go together as the next transaction, one call of `add_tasks` (migration
//! 0029), at most [`MOST_IN_A_TRANSACTION`] at a time: one lock taken, one flush for all of
//! them. Each add is still exactly what `add_task` writes, in the order the node received them,
//! under the lock, so every rule the lock kept still holds. Lanes of different agents run side
//! by side, as many as the pool has connections. Across nodes the agent's lock still orders
//! one node's transactions against another's; each of them carries a node's waiting adds.
//!
//! How many adds wait is bounded by the requests in flight: each add's caller waits for its
//! answer (through the API at most `http.request_timeout_seconds`), and an add whose caller
//! stopped waiting before its transaction began is dropped unwritten, so a client that tries
//! again gets one task. A transaction runs to its end when its callers stop waiting, as a
//! single `add_task` call does. When the database refuses one add of a transaction of several
//! (a data exception, a constraint, a raise in a trigger: nothing of the transaction is
//! written), each runs again alone, so that add's error is its own; any other error (a storage
//! fault, a timeout) is answered to every add of the transaction at once. An active agent's
//! nodes are woken once its transaction has committed (`wake_after_commit.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use sqlx::{Pool, Postgres};
use tokio::sync::oneshot;

use super::Notice;
use super::wake_after_commit::WakeAfterCommit;
use crate::domain::runtime::AgentKey;
use crate::error::{Error, Result};

/// The most adds in one transaction: a bound on how long one holds the agent's lock.
pub(crate) const MOST_IN_A_TRANSACTION: usize = 100;

/// `add_tasks` (migration 0029): `$1` owner, `$2` agent, then one array per column of the
/// adds, in `add_task`'s order of parameters.
const ADD_TASKS: &str = "SELECT agent_status, stored_at FROM add_tasks($1, $2, $3, \
    $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";

/// One add's values, owned so it can wait in its lane: the task and its `task_added` entry.
#[derive(Debug, Clone)]
pub(crate) struct Add {
    pub id: String,
    pub title: String,
    pub description: Option<String>,
    pub priority: i32,
    /// The node's time; `add_task` moves it past the agent's latest task.
    pub at: DateTime<Utc>,
    pub depth: i32,
    pub creator_agent: Option<String>,
    pub creator_task: Option<String>,
    pub trace_id: Option<String>,
    pub parent_span_id: Option<String>,
    pub action: String,
    pub details: String,
    pub entry_task: Option<String>,
}

/// What an add wrote: the agent's status and the creation time stored; `None` when the owner
/// has no such agent.
pub(crate) type Added = Option<(String, DateTime<Utc>)>;

struct Job {
    add: Add,
    answer: oneshot::Sender<Result<Added>>,
}

/// The store's lanes of adds, one per agent with an add in flight on this node.
#[derive(Clone)]
pub(crate) struct AddLanes {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool<Postgres>,
    wakes: Arc<WakeAfterCommit>,
    /// An agent is here while a transaction of its adds is in flight, with the adds that
    /// arrived since, in order.
    lanes: Mutex<HashMap<AgentKey, Vec<Job>>>,
}

impl std::fmt::Debug for AddLanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddLanes").finish_non_exhaustive()
    }
}

impl AddLanes {
    pub(crate) fn new(pool: Pool<Postgres>, wakes: Arc<WakeAfterCommit>) -> Self {
        Self { inner: Arc::new(Inner { pool, wakes, lanes: Mutex::default() }) }
    }

    /// How many adds wait for their lane's transaction in flight.
    pub(crate) fn waiting(&self) -> usize {
        crate::sync::lock(&self.inner.lanes).values().map(Vec::len).sum()
    }

    /// Adds `add` to `agent`'s backlog in the lane's next transaction.
    pub(crate) async fn add(&self, agent: AgentKey, add: Add) -> Result<Added> {
        let (answer, answered) = oneshot::channel();
        let job = Job { add, answer };
        let first = {
            let mut lanes = crate::sync::lock(&self.inner.lanes);
            match lanes.get_mut(&agent) {
                Some(waiting) => {
                    waiting.push(job);
                    None
                }
                None => {
                    lanes.insert(agent.clone(), Vec::new());
                    Some(job)
                }
            }
        };
        if let Some(job) = first {
            // Made before the spawn: a task dropped unpolled (a runtime shutting down) still
            // frees the lane.
            let lane = Lane { inner: Arc::clone(&self.inner), agent, done: false };
            tokio::spawn(lane.drive(vec![job]));
        }
        answered.await.map_err(|_| Error::internal("the agent's lane of adds stopped"))?
    }
}

/// The one task writing an agent's adds; frees the lane however it ends.
struct Lane {
    inner: Arc<Inner>,
    agent: AgentKey,
    done: bool,
}

impl Lane {
    async fn drive(mut self, mut batch: Vec<Job>) {
        loop {
            self.write(batch).await;
            let mut lanes = crate::sync::lock(&self.inner.lanes);
            let Some(waiting) = lanes.get_mut(&self.agent) else { break };
            // An add whose caller stopped waiting before its transaction began (a request's
            // deadline, a client gone) is not written, as an add still waiting for a
            // connection was not: a client that tries again gets one task, not two.
            waiting.retain(|job| !job.answer.is_closed());
            if waiting.is_empty() {
                lanes.remove(&self.agent);
                break;
            }
            let n = waiting.len().min(MOST_IN_A_TRANSACTION);
            batch = waiting.drain(..n).collect();
        }
        self.done = true;
    }

    /// Writes `batch` in one transaction; when one of its adds was refused, each alone; answers
    /// each.
    async fn write(&self, batch: Vec<Job>) {
        let adds: Vec<&Add> = batch.iter().map(|job| &job.add).collect();
        match add_tasks(&self.inner.pool, &self.agent, &adds).await {
            Ok(answers) => self.answer(batch, answers),
            Err(error) if batch.len() > 1 && one_adds(&error) => {
                tracing::debug!(%error, size = batch.len(), "an add of a transaction was refused; each runs alone");
                let mut jobs = batch.into_iter();
                while let Some(job) = jobs.next() {
                    match add_tasks(&self.inner.pool, &self.agent, &[&job.add]).await {
                        Ok(answers) => self.answer(vec![job], answers),
                        Err(error) if one_adds(&error) => drop(job.answer.send(Err(error.into()))),
                        // Not this add's (a fault, a timeout): the ones left would meet it too.
                        Err(error) => return refuse(std::iter::once(job).chain(jobs), error),
                    }
                }
            }
            Err(error) => refuse(batch, error),
        }
    }

    /// Answers each job with its add's answer, once the agent's nodes are woken if it is
    /// active.
    fn answer(&self, jobs: Vec<Job>, answers: Vec<Added>) {
        if answers.iter().flatten().any(|(status, _)| status == "active") {
            self.inner.wakes.send([Notice::Agent(self.agent.clone())]);
        }
        for (job, added) in jobs.into_iter().zip(answers) {
            job.answer.send(Ok(added)).ok();
        }
    }
}

/// Whether `error` is one add's own (its values refused: a data exception, a constraint, a
/// raise in a trigger), which the other adds of its transaction would not meet alone.
fn one_adds(error: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = error else { return false };
    db.code().is_some_and(|code| ["22", "23", "P0"].iter().any(|class| code.starts_with(class)))
}

/// Answers every job with `error`: a storage fault as itself, anything else as an internal
/// error with its text.
fn refuse(jobs: impl IntoIterator<Item = Job>, error: sqlx::Error) {
    let error = Error::from(error);
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

impl Drop for Lane {
    /// Ended early (a panic, a runtime shutting down): the adds waiting are answered with an
    /// error when their jobs drop here, and the next add starts the lane afresh.
    fn drop(&mut self) {
        if !self.done {
            crate::sync::lock(&self.inner.lanes).remove(&self.agent);
        }
    }
}

/// One call of `add_tasks`: each add's answer, in order (all `None` when there is no such
/// agent).
async fn add_tasks(
    pool: &Pool<Postgres>,
    agent: &AgentKey,
    adds: &[&Add],
) -> std::result::Result<Vec<Added>, sqlx::Error> {
    fn column<T>(adds: &[&Add], value: impl Fn(&Add) -> T) -> Vec<T> {
        adds.iter().map(|add| value(add)).collect()
    }
    let rows: Vec<(String, DateTime<Utc>)> = sqlx::query_as(ADD_TASKS)
        .bind(&agent.owner_id)
        .bind(&agent.agent_id)
        .bind(column(adds, |a| a.id.clone()))
        .bind(column(adds, |a| a.title.clone()))
        .bind(column(adds, |a| a.description.clone()))
        .bind(column(adds, |a| a.priority))
        .bind(column(adds, |a| a.at))
        .bind(column(adds, |a| a.depth))
        .bind(column(adds, |a| a.creator_agent.clone()))
        .bind(column(adds, |a| a.creator_task.clone()))
        .bind(column(adds, |a| a.trace_id.clone()))
        .bind(column(adds, |a| a.parent_span_id.clone()))
        .bind(column(adds, |a| a.action.clone()))
        .bind(column(adds, |a| a.details.clone()))
        .bind(column(adds, |a| a.entry_task.clone()))
        .fetch_all(pool)
        .await?;
    match rows.len() {
        0 => Ok(vec![None; adds.len()]),
        n if n == adds.len() => Ok(rows.into_iter().map(Some).collect()),
        n => Err(sqlx::Error::Protocol(format!(
            "add_tasks answered {n} rows for {} adds",
            adds.len()
        ))),
    }
}
