//! A node's finished tasks, committed together.
//!
//! Each finish (`RuntimeStore::finish_then_claim`: the outcome, its entries and posts, the
//! agent's next claim) was a transaction of its own, and an echo run's agents finish hundreds
//! a second: each paid its own `BEGIN`, `COMMIT` and WAL flush, and on SQLite its own write of
//! every page it touched. Here the finishes that arrive on a node while one of its finish
//! transactions is in flight wait in a lane (`lanes.rs`) and go together in the next, at most
//! [`MOST_IN_A_TRANSACTION`]: each one written exactly as it was alone (the same statements,
//! the same decisions, the same lease fencing), in one transaction.
//!
//! The lanes split the node's agents: one on SQLite (one writer), a few on PostgreSQL
//! ([`FinishLanes::new`]), each agent always in the same one, so that the transactions in
//! flight at once never share an agent. Within a transaction the finishes go in the order of
//! their agents' keys, and each locks a task only under its agent's lock. The writers that
//! lock many of a node's agents, its heartbeat and its release, first lock every agent the
//! node holds or runs a task of in that same order (`sql::lock_agents_of_node`), so that they
//! and the finishes never wait on each other in a circle. Another writer that locks several
//! agents or tasks in another order (a workspace deleted, a plan's agents paused, expired
//! task leases queued again) may still meet a transaction of finishes in a deadlock:
//! PostgreSQL then cancels one of the two, and when it is the finishes', each runs again
//! alone, as every error that is not a storage fault does (a finish refused alone fails
//! alone). A storage fault is every finish's answer at once: the runtime retries those.
//!
//! A finish whose worker stopped waiting before its transaction began is dropped unwritten:
//! its task stays in progress under the node's lease, and the worker that replaces it (or
//! another node, once the lease ends) runs it again from its stored steps, as after any
//! interrupted finish.

use std::hash::BuildHasher;

use async_trait::async_trait;

use super::db::Begin;
use super::lanes::{Batch, Lanes};
use super::runtime::{NextClaim, finish_in};
use crate::domain::runtime::{AgentKey, Claim, Outcome};
use crate::domain::steps::Step;
use crate::domain::task::TaskId;
use crate::error::{Error, Result};

/// The most finishes in one transaction: a bound on how long it holds its agents' locks.
pub(crate) const MOST_IN_A_TRANSACTION: usize = 64;

/// One finish's values, owned so that it can wait in its lane.
#[derive(Debug)]
pub(crate) struct Finishing {
    pub agent: AgentKey,
    pub task: TaskId,
    pub node: String,
    pub outcome: Outcome,
    pub calls: i32,
    pub last: Option<Step>,
    pub next: NextClaim,
}

/// What a finish answers: whether it was written, and the claim after it.
pub(crate) type Finished = (bool, Option<Claim>);

/// A node's lanes of finishes, with how many transactions they made.
#[derive(Debug, Clone)]
pub(crate) struct FinishLanes {
    lanes: Lanes<Finishes>,
    /// How many lanes the agents are spread over.
    count: u8,
    /// Picks an agent's lane: the same one for the node's life.
    hasher: std::hash::RandomState,
}

impl FinishLanes {
    /// `count` lanes (at least one), whose transactions begin at `begin`.
    pub(crate) fn new(begin: Begin, count: u8) -> Self {
        let finishes = Finishes { begin, transactions: Default::default() };
        Self { lanes: Lanes::new(finishes), count: count.max(1), hasher: Default::default() }
    }

    /// Writes `finish` in its agent's lane's next transaction.
    pub(crate) async fn write(&self, finish: Finishing) -> Result<Finished> {
        let share = self.hasher.hash_one(&finish.agent) % u64::from(self.count);
        let lane = u8::try_from(share).unwrap_or(0);
        self.lanes.write(lane, finish).await
    }

    /// Finishes waiting for their lane's transaction in flight.
    pub(crate) fn waiting(&self) -> usize {
        self.lanes.waiting()
    }

    /// Transactions of finishes committed since the store opened.
    pub(crate) fn transactions(&self) -> u64 {
        self.lanes.batch().transactions.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// How a lane of finishes writes.
#[derive(Debug)]
pub(crate) struct Finishes {
    begin: Begin,
    transactions: std::sync::atomic::AtomicU64,
}

#[async_trait]
impl Batch for Finishes {
    type Key = u8;
    type Item = Finishing;
    type Answer = Finished;
    type Error = Error;
    const MOST: usize = MOST_IN_A_TRANSACTION;

    async fn write(&self, _lane: &u8, finishes: &[&Finishing]) -> Result<Vec<Finished>> {
        let mut order: Vec<usize> = (0..finishes.len()).collect();
        order.sort_by(|&a, &b| finishes[a].agent.cmp(&finishes[b].agent));
        let mut tx = self.begin.begin().await?;
        let mut answers: Vec<(usize, Finished)> = Vec::with_capacity(finishes.len());
        for nth in order {
            let f = finishes[nth];
            let answer = finish_in(
                &mut tx,
                &f.agent,
                &f.task,
                &f.node,
                &f.outcome,
                f.calls,
                f.last.as_ref(),
                f.next,
            )
            .await?;
            answers.push((nth, answer));
        }
        // A finish that writes nothing (its lease lost) wrote nothing before it found out.
        if answers.iter().any(|(_, (written, _))| *written) {
            tx.commit().await?;
            self.transactions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        answers.sort_by_key(|(nth, _)| *nth);
        Ok(answers.into_iter().map(|(_, answer)| answer).collect())
    }

    /// Anything but a storage fault (a value refused, a deadlock, a row that would not read)
    /// may be one finish's own: each then runs alone.
    fn its_own(error: &Error) -> bool {
        !matches!(error, Error::Storage { .. })
    }
}
