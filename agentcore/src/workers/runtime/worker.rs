//! One agent's worker: waits for a wake-up or its throttle, claims the next task, runs it and
//! writes the outcome fenced on the task's lease, with the next claim in the same transaction.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Node;
use super::run::Ran;
use crate::domain::runtime::{AgentKey, Claim, ClaimedTask, Outcome};
use crate::domain::task::TaskId;
use crate::domain::workspace::WorkspaceId;
use crate::store::NextClaim;
use crate::sync::lock;
use crate::wakeups::Worker;

/// Runs one agent's tasks until it stops being this node's to run.
pub(super) async fn work(node: Arc<Node>, agent: AgentKey, worker: Arc<Worker>) {
    let store = node.core.run_store();
    let owner = WorkspaceId::from_trusted(agent.owner_id.clone());
    // The claim a finished task's transaction made already, if any.
    let mut held: Option<Claim> = None;
    loop {
        // A task claimed already is this node's: it runs even when the worker is leaving (a
        // node that stops hands it back with the rest of its tasks).
        let leaving = worker.is_leaving() || node.stopping();
        let holds_task = matches!(held, Some(Claim::Task(_)));
        if node.stopping() || (leaving && !holds_task) {
            break;
        }
        let claim = match held.take() {
            Some(claim) => Ok(claim),
            None => {
                let max_attempts = i32::try_from(node.config.max_attempts).unwrap_or(i32::MAX);
                store.claim_task(&agent, node.id(), node.config.lease, max_attempts).await
            }
        };
        let wait = match claim {
            Ok(Claim::Task(claimed)) => {
                node.core.ring_events(&owner);
                // Boxed: a run's state (the model loop, its tools and calls) is kilobytes, and
                // an idle worker, most of them most of the time, should not carry it.
                held = Box::pin(run_task(&node, &agent, *claimed, &worker)).await;
                continue;
            }
            Ok(Claim::Wait(wait)) => wait,
            Ok(Claim::Lost) => break,
            Err(error) => {
                tracing::warn!(%error, agent = %agent.agent_id, "cannot claim a task");
                Some(node.config.poll)
            }
        };
        match wait {
            Some(wait) => {
                tokio::select! {
                    () = worker.wake.notified() => {}
                    () = tokio::time::sleep(wait) => {}
                }
            }
            None => worker.wake.notified().await,
        }
    }
    let _membership = node.membership.lock().await;
    if let Err(error) = store.release_agent(&agent, node.id()).await {
        tracing::warn!(%error, agent = %agent.agent_id, "cannot release an agent; its lease expires on its own");
    }
    lock(&node.wakeups().workers).remove(&agent);
    // The agent may be active again already (stopped and started during its last task).
    node.wakeups().dispatcher.notify_one();
}

/// Runs one task and writes what came of it; returns the agent's next claim when the finish
/// made it (unless the worker is leaving: then the next claim is the loop's to decide).
async fn run_task(
    node: &Node,
    agent: &AgentKey,
    claimed: ClaimedTask,
    worker: &Worker,
) -> Option<Claim> {
    let task_id = claimed.task.id.clone();
    let ran = tokio::select! {
        ran = super::run::run_task(node, agent, &claimed) => ran,
        () = cancelled(node, &task_id, worker) => {
            // The run is dropped where it waits: its model call in flight, its tool call.
            // The cancel wrote the task's end, its activity and post already.
            tracing::info!(agent = %agent.agent_id, task = %task_id, "run stopped: the task was cancelled");
            node.core.counters().cancelled.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    };
    let (outcome, calls, last) = match ran {
        Ran::Finished(outcome, calls, last) => (outcome, calls, last),
        Ran::Parked => return None,
        Ran::Lost => {
            node.core.counters().dropped.fetch_add(1, Ordering::Relaxed);
            node.core.wake_outbox();
            return None;
        }
        // Still this node's: the next claim queues it again and runs it from its last step,
        // after a poll interval (or a wake-up), not at once: a database that answers writes
        // but not reads (its pool busy) would otherwise see the attempts spent in a minute.
        Ran::Interrupted => {
            node.core.counters().interrupted.fetch_add(1, Ordering::Relaxed);
            return Some(Claim::Wait(Some(node.config.poll)));
        }
    };
    let store = node.core.run_store();
    let finish = || {
        let next = if worker.is_leaving() || node.stopping() {
            NextClaim::None
        } else {
            let max_attempts = i32::try_from(node.config.max_attempts).unwrap_or(i32::MAX);
            NextClaim::Leased { lease: node.config.lease, max_attempts }
        };
        store.finish_then_claim(agent, &task_id, node.id(), &outcome, calls, last.as_ref(), next)
    };
    // Not written at all: the lease runs out and the task runs again, here or elsewhere.
    let finished = super::write_retrying(node, &task_id, "write a task's outcome", finish).await;
    let next_claim = match finished {
        Some((true, claim)) => {
            let counter = match &outcome {
                Outcome::Complete { .. } => &node.core.counters().completed,
                Outcome::Failed { error, .. } | Outcome::BudgetExhausted { error } => {
                    // What a person reads on the task, in the node's log too: a run that fails
                    // for the node's own reasons (its database, its configuration) shows there.
                    tracing::info!(agent = %agent.agent_id, task = %task_id, %error, "task failed");
                    &node.core.counters().failed
                }
                Outcome::Stopped { reason, .. } => {
                    tracing::info!(agent = %agent.agent_id, task = %task_id, %reason, "task stopped");
                    &node.core.counters().failed
                }
            };
            counter.fetch_add(1, Ordering::Relaxed);
            claim
        }
        Some((false, _)) => {
            tracing::info!(agent = %agent.agent_id, task = %task_id, "result dropped: the task, its agent or its lease is gone");
            node.core.counters().dropped.fetch_add(1, Ordering::Relaxed);
            None
        }
        None => None,
    };
    node.core.wake_outbox();
    node.core.ring_events(&WorkspaceId::from_trusted(agent.owner_id.clone()));
    next_claim
}

/// Returns once a person cancelled the task: looks when the agent's worker is woken (the
/// cancel wakes it, on this node directly, on another through the store's notification) and
/// every [`CANCEL_POLL`] besides (a cancel from another process on the same SQLite file).
async fn cancelled(node: &Node, task: &TaskId, worker: &Worker) {
    loop {
        tokio::select! {
            () = worker.wake.notified() => {}
            () = tokio::time::sleep(CANCEL_POLL) => {}
        }
        match node.core.run_store().task_cancelled(task).await {
            Ok(true) => return,
            Ok(false) => {}
            Err(error) => {
                tracing::debug!(%error, %task, "cannot look whether a task was cancelled")
            }
        }
    }
}

/// How often a running task's worker looks for a cancel nobody told it of.
const CANCEL_POLL: std::time::Duration = std::time::Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Core, CoreConfig};

    /// Every active agent has a worker, and most wait most of the time: what one holds while
    /// it waits is what 10,000 idle agents cost.
    #[tokio::test]
    async fn a_waiting_worker_holds_no_run_state() {
        let dir = tempfile::tempdir().unwrap();
        let core = Core::open(CoreConfig::sqlite_in(dir.path())).await.unwrap();
        let node = Arc::new(Node {
            core: core.clone(),
            config: crate::core::RuntimeConfig::default(),
            calls: tokio::sync::Semaphore::new(1),
            membership: tokio::sync::Mutex::new(()),
            stopped: tokio::sync::watch::channel(false).1,
            health: super::super::fallback::HealthCache::default(),
        });
        let worker = work(node, AgentKey::new("owner", "agent"), Arc::new(Worker::default()));
        let size = std::mem::size_of_val(&worker);
        assert!(size <= 1024, "a worker's future is {size} bytes");
        drop(worker);
        core.close().await;
    }
}
