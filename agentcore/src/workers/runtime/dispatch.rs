//! The node's main loop: the heartbeat, fair-share claims and balancing, and the end of it all
//! at shutdown.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{CLAIM_BATCH, Node};
use crate::domain::runtime::AgentKey;
use crate::store::Signal;
use crate::sync::lock;
use crate::wakeups::Worker;

/// The node's main loop: heartbeats, fair-share claims, and the end of it all at shutdown.
pub(super) async fn dispatch(node: Arc<Node>, mut stop: watch::Receiver<bool>) {
    let store = node.core.run_store();
    let wakeups = node.core.clone();
    let listener = node.core.listen(
        Arc::new(move |signal| match signal {
            Signal::Agent(agent) => wakeups.wakeups().agent(&agent),
            Signal::Claimable => wakeups.wakeups().claimable(),
            Signal::Revoked(user) => wakeups.access().tokens.forget(&user),
            Signal::Members(workspace) => wakeups.access().forget_members(&workspace),
            Signal::KeyRevoked(key) => wakeups.access().keys.forget(&key),
            // The event streams' own listener (`core/events.rs`) takes these.
            Signal::Events(_) => {}
            Signal::Connected => {
                wakeups.access().set_listening(true);
                wakeups.wakeups().claimable();
            }
            Signal::Lost => wakeups.access().set_listening(false),
        }),
        stop.clone(),
    );
    let heartbeat_every = node.config.lease / 3;
    let mut workers = JoinSet::new();
    let mut next_heartbeat = Instant::now();
    let mut next_clock_check = Instant::now();
    tracing::info!(node = node.id(), "runtime started");
    while !*stop.borrow() {
        if Instant::now() >= next_clock_check {
            if let Err(error) = node.core.check_clock().await {
                tracing::warn!(%error, "cannot read the database's clock");
            }
            next_clock_check = Instant::now() + crate::core::clock::CHECK_EVERY;
        }
        if Instant::now() >= next_heartbeat {
            heartbeat(&node, &mut workers).await;
            next_heartbeat = Instant::now() + heartbeat_every;
        }
        balance(&node, &mut workers).await;
        while workers.try_join_next().is_some() {}
        let wait = next_heartbeat.min(Instant::now() + node.config.poll);
        tokio::select! {
            () = node.wakeups().dispatcher.notified() => {}
            () = tokio::time::sleep_until(wait) => {}
            _ = stop.changed() => {}
        }
    }
    tracing::info!(node = node.id(), "runtime stopping; letting tasks in progress finish");
    for worker in lock(&node.wakeups().workers).values() {
        worker.leave();
    }
    let drained = tokio::time::timeout(node.config.shutdown_grace, async {
        while workers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            grace = ?node.config.shutdown_grace,
            "tasks still running after the grace period go back to the queue"
        );
        workers.abort_all();
        while workers.join_next().await.is_some() {}
    }
    lock(&node.wakeups().workers).clear();
    if let Err(error) = store.release_node(node.id()).await {
        tracing::warn!(%error, "cannot release this node's leases; they expire on their own");
    }
    if let Some(listener) = listener {
        listener.abort();
    }
    tracing::info!(node = node.id(), "runtime stopped");
}

/// Renews this node's leases, lets go of agents it lost, adopts agents it holds without a
/// worker, requeues tasks of dead nodes and wakes agents with work nobody told them about.
async fn heartbeat(node: &Arc<Node>, workers: &mut JoinSet<()>) {
    let store = node.core.run_store();
    {
        let _membership = node.membership.lock().await;
        match store.heartbeat(node.id(), node.config.lease).await {
            Ok(held) => {
                let held: HashSet<AgentKey> = held.into_iter().collect();
                let running: Vec<(AgentKey, Arc<Worker>)> = lock(&node.wakeups().workers)
                    .iter()
                    .map(|(key, worker)| (key.clone(), worker.clone()))
                    .collect();
                for (key, worker) in &running {
                    if !held.contains(key) && !worker.is_leaving() {
                        tracing::warn!(owner = %key.owner_id, agent = %key.agent_id, "lost the lease on an agent");
                        worker.leave();
                    }
                }
                for key in held {
                    spawn_worker(node, workers, key);
                }
            }
            Err(error) => tracing::warn!(%error, "heartbeat failed; leases renew on the next one"),
        }
    }
    match store.requeue_expired_tasks().await {
        Ok(0) => {}
        Ok(count) => tracing::info!(count, "tasks of a node that stopped were queued again"),
        Err(error) => tracing::warn!(%error, "cannot requeue expired tasks"),
    }
    match store.agents_with_work(node.id()).await {
        Ok(agents) => agents.iter().for_each(|agent| node.wakeups().agent(agent)),
        Err(error) => tracing::warn!(%error, "cannot look for waiting tasks"),
    }
}

/// Claims agents up to this node's fair share, or lets go of those above it.
async fn balance(node: &Arc<Node>, workers: &mut JoinSet<()>) {
    let store = node.core.run_store();
    let _membership = node.membership.lock().await;
    let share = match store.runtime_load().await {
        Ok(load) => load.fair_share(),
        Err(error) => {
            tracing::warn!(%error, "cannot read the runtime's load");
            return;
        }
    };
    let staying: Vec<Arc<Worker>> = lock(&node.wakeups().workers)
        .values()
        .filter(|worker| !worker.is_leaving())
        .cloned()
        .collect();
    if staying.len() > share {
        for worker in &staying[share..] {
            worker.leave();
        }
        return;
    }
    let wanted = (share - staying.len()).min(CLAIM_BATCH);
    if wanted == 0 {
        return;
    }
    let limit = i64::try_from(wanted).unwrap_or(i64::MAX);
    match store.claim_agents(node.id(), node.config.lease, limit).await {
        Ok(claimed) => {
            if claimed.len() == CLAIM_BATCH {
                // More may be waiting: claim the next batch without waiting for the poll.
                node.wakeups().dispatcher.notify_one();
            }
            for key in claimed {
                spawn_worker(node, workers, key);
            }
        }
        Err(error) => tracing::warn!(%error, "cannot claim agents"),
    }
}

/// Starts a worker for the agent unless this node already runs one.
fn spawn_worker(node: &Arc<Node>, workers: &mut JoinSet<()>, agent: AgentKey) {
    let worker = Arc::new(Worker::default());
    match lock(&node.wakeups().workers).entry(agent.clone()) {
        std::collections::hash_map::Entry::Occupied(_) => return,
        std::collections::hash_map::Entry::Vacant(slot) => slot.insert(worker.clone()),
    };
    tracing::debug!(owner = %agent.owner_id, agent = %agent.agent_id, "running agent");
    workers.spawn(super::worker::work(node.clone(), agent, worker));
}
