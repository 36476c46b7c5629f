//! The agent runtime: every active agent works through its backlog, one task at a time.
//!
//! Each process is a node with a fresh id. A node holds a lease on each agent it runs and on
//! each task in progress; one heartbeat renews them all (every third of the lease), so a long
//! model call keeps its task. A node takes a fair share of the active agents (the active count
//! over the live nodes, rounded up) and lets go of agents above its share between tasks, so work
//! spreads as nodes come and go. An agent this node runs gets a worker: a task that waits on a
//! wake-up or its throttle timer, claims the next task in one fenced transaction, calls the
//! model (bounded by a node-wide semaphore, 3 attempts with backoff for transient failures) and
//! writes the outcome fenced on the task's lease, with its activity and channel posts.
//!
//! Wake-ups: in process, adding a task, starting an agent or retrying a task wakes the agent's
//! worker, or the dispatcher when no worker runs it here. On PostgreSQL the same changes publish
//! `pg_notify` at commit, so every node hears them. A slow fallback poll covers the rest
//! (missed notifications, expired leases, takeovers). An idle agent costs a parked task, not a
//! polling loop.
//!
//! See RUNTIME.md in the specification and ARCHITECTURE.md for the reasoning.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::core::Core;
use crate::domain::now;
use crate::domain::runtime::{AgentKey, Claim, ClaimedTask, Outcome};
use crate::models::ModelError;
use crate::telemetry::{self, Metrics, ModelCallMetrics, ProviderCalls};

/// How the runtime runs. `agentd` fills it from `runtime.*`.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeConfig {
    /// Model calls in flight at once on this node, across all agents.
    pub max_concurrent_calls: usize,
    /// How long a node's claim on an agent or task lasts without renewal: a dead node's work
    /// moves to another node after at most this long.
    pub lease: Duration,
    /// How long shutdown waits for tasks in progress before giving them back to the queue.
    pub shutdown_grace: Duration,
    /// The fallback look at the database when no wake-up came.
    pub poll: Duration,
    /// The first retry's delay after a transient failure; doubled for the next.
    pub retry_base: Duration,
    /// The longest wait between attempts, whatever the provider's `Retry-After` says.
    pub retry_max: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_concurrent_calls: 64,
            lease: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            poll: Duration::from_secs(5),
            retry_base: Duration::from_secs(2),
            retry_max: Duration::from_secs(120),
        }
    }
}

/// Model calls per task before it fails.
pub const ATTEMPTS_PER_TASK: i32 = 3;
/// Agents claimed in one statement.
const CLAIM_BATCH: usize = 500;
/// Tries at writing a task's outcome before leaving it to lease expiry.
const FINISH_TRIES: u32 = 5;

/// Where wake-ups go: the worker of an agent this node runs, else the dispatcher.
#[derive(Debug, Default)]
pub(crate) struct Wakeups {
    workers: Mutex<HashMap<AgentKey, Arc<Worker>>>,
    dispatcher: Notify,
}

impl Wakeups {
    /// The agent may have work: wake its worker here, or the dispatcher to claim it.
    pub(crate) fn agent(&self, agent: &AgentKey) {
        match lock(&self.workers).get(agent) {
            Some(worker) => worker.wake.notify_one(),
            None => self.dispatcher.notify_one(),
        }
    }

    /// Agents may be free to claim (another node let go of some): the dispatcher looks.
    pub(crate) fn claimable(&self) {
        self.dispatcher.notify_one();
    }
}

/// What this node's runtime has done since it started, for operators and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    pub tasks_completed: u64,
    pub tasks_failed: u64,
    /// Outcomes not written: the task, its agent or the lease was gone when the call ended.
    pub results_dropped: u64,
    /// Agents this node runs now.
    pub agents_running: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    completed: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    /// Per provider, in the order of [`telemetry::PROVIDERS`].
    pub(crate) models: [ProviderCalls; telemetry::PROVIDERS.len()],
}

impl Core {
    /// What this node counted, and the work waiting in the database.
    pub async fn metrics(&self) -> crate::Result<Metrics> {
        let backlogs = self.store().backlogs().await?;
        let calls = &self.counters().models;
        let model_calls = telemetry::PROVIDERS
            .iter()
            .zip(calls)
            .map(|(provider, calls)| ModelCallMetrics {
                provider,
                latency: calls.latency.snapshot(),
                transient_errors: calls.transient_errors.load(Ordering::Relaxed),
                permanent_errors: calls.permanent_errors.load(Ordering::Relaxed),
            })
            .collect();
        Ok(Metrics {
            runtime: self.runtime_stats(),
            model_calls,
            discord_rate_limited: self.discord_rate_limited(),
            queued_tasks: backlogs.queued_tasks,
            tasks_in_progress: backlogs.tasks_in_progress,
            outbox_pending: backlogs.outbox_pending,
        })
    }

    pub fn runtime_stats(&self) -> RuntimeStats {
        let counters = self.counters();
        RuntimeStats {
            tasks_completed: counters.completed.load(Ordering::Relaxed),
            tasks_failed: counters.failed.load(Ordering::Relaxed),
            results_dropped: counters.dropped.load(Ordering::Relaxed),
            agents_running: lock(&self.wakeups().workers).len() as u64,
        }
    }
}

impl Counters {
    /// One model call of `provider` that took `elapsed` and failed with `error`, if it did.
    fn model_call(&self, provider: &str, elapsed: Duration, error: Option<&ModelError>) {
        let Some(index) = telemetry::PROVIDERS.iter().position(|p| *p == provider) else {
            return;
        };
        let calls = &self.models[index];
        calls.latency.observe(elapsed);
        match error {
            Some(ModelError::Transient { .. }) => &calls.transient_errors,
            Some(ModelError::Permanent { .. }) => &calls.permanent_errors,
            None => return,
        }
        .fetch_add(1, Ordering::Relaxed);
    }
}

/// One agent's worker, as the rest of the node sees it.
#[derive(Debug, Default)]
struct Worker {
    wake: Notify,
    /// Set to make the worker let go of its agent after the task in progress.
    leaving: AtomicBool,
}

impl Worker {
    fn leave(&self) {
        self.leaving.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::SeqCst)
    }
}

/// The running runtime. Call [`Runtime::shutdown`] to stop it; dropping it leaves it running.
#[derive(Debug)]
pub struct Runtime {
    stop: Arc<watch::Sender<bool>>,
    task: tokio::task::JoinHandle<()>,
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
        let _ = self.task.await;
    }
}

impl Core {
    /// Starts running active agents in the background. Start it once per `Core`.
    pub fn start_runtime(&self) -> Runtime {
        let (stop, stopped) = watch::channel(false);
        let node = Arc::new(Node {
            core: self.clone(),
            config: self.runtime_config(),
            calls: Semaphore::new(self.runtime_config().max_concurrent_calls.max(1)),
            membership: tokio::sync::Mutex::new(()),
            stopped: stopped.clone(),
        });
        let task = tokio::spawn(dispatch(node, stopped));
        Runtime { stop: Arc::new(stop), task }
    }
}

/// What the dispatcher and the workers of this node share.
struct Node {
    core: Core,
    config: RuntimeConfig,
    calls: Semaphore,
    /// Held while agents are claimed, released or adopted, so a worker leaving and the
    /// dispatcher claiming never disagree about which agents have a worker.
    membership: tokio::sync::Mutex<()>,
    stopped: watch::Receiver<bool>,
}

impl Node {
    fn id(&self) -> &str {
        self.core.node_id()
    }

    fn wakeups(&self) -> &Wakeups {
        self.core.wakeups()
    }

    fn lease_until(&self, from: DateTime<Utc>) -> DateTime<Utc> {
        from + chrono::Duration::from_std(self.config.lease).unwrap_or(chrono::Duration::MAX)
    }

    fn stopping(&self) -> bool {
        *self.stopped.borrow()
    }
}

/// The node's main loop: heartbeats, fair-share claims, and the end of it all at shutdown.
async fn dispatch(node: Arc<Node>, mut stop: watch::Receiver<bool>) {
    let store = node.core.store();
    let wakeups = node.core.clone();
    let listener = store.listen(
        Arc::new(move |agent| match agent {
            Some(agent) => wakeups.wakeups().agent(&agent),
            None => wakeups.wakeups().claimable(),
        }),
        stop.clone(),
    );
    let heartbeat_every = node.config.lease / 3;
    let mut workers = JoinSet::new();
    let mut next_heartbeat = Instant::now();
    tracing::info!(node = node.id(), "runtime started");
    while !*stop.borrow() {
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
    if let Err(error) = store.release_node(node.id(), now()).await {
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
    let store = node.core.store();
    let at = now();
    {
        let _membership = node.membership.lock().await;
        match store.heartbeat(node.id(), at, node.lease_until(at)).await {
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
    match store.requeue_expired_tasks(at).await {
        Ok(0) => {}
        Ok(count) => tracing::info!(count, "tasks of a node that stopped were queued again"),
        Err(error) => tracing::warn!(%error, "cannot requeue expired tasks"),
    }
    match store.agents_with_work(node.id(), at).await {
        Ok(agents) => agents.iter().for_each(|agent| node.wakeups().agent(agent)),
        Err(error) => tracing::warn!(%error, "cannot look for waiting tasks"),
    }
}

/// Claims agents up to this node's fair share, or lets go of those above it.
async fn balance(node: &Arc<Node>, workers: &mut JoinSet<()>) {
    let store = node.core.store();
    let _membership = node.membership.lock().await;
    let at = now();
    let share = match store.runtime_load(at).await {
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
    match store.claim_agents(node.id(), at, node.lease_until(at), limit).await {
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
    workers.spawn(work(node.clone(), agent, worker));
}

/// Runs one agent's tasks until it stops being this node's to run.
async fn work(node: Arc<Node>, agent: AgentKey, worker: Arc<Worker>) {
    let store = node.core.store();
    while !worker.is_leaving() && !node.stopping() {
        let at = now();
        let wait = match store.claim_task(&agent, node.id(), at, node.lease_until(at)).await {
            Ok(Claim::Task(claimed)) => {
                run_task(&node, &agent, *claimed).await;
                continue;
            }
            Ok(Claim::Wait(until)) => {
                until.map(|until| (until - Utc::now()).to_std().unwrap_or_default())
            }
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

/// Calls the model for one task and writes what came of it.
async fn run_task(node: &Node, agent: &AgentKey, claimed: ClaimedTask) {
    let task_id = claimed.task.id.clone();
    let (outcome, calls) = call_model(node, &claimed).await;
    let store = node.core.store();
    for attempt in 1..=FINISH_TRIES {
        match store.finish_task(agent, &task_id, node.id(), &outcome, calls).await {
            Ok(true) => {
                let counter = match outcome {
                    Outcome::Complete { .. } => &node.core.counters().completed,
                    Outcome::Failed { .. } => &node.core.counters().failed,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                break;
            }
            Ok(false) => {
                tracing::info!(agent = %agent.agent_id, task = %task_id, "result dropped: the task, its agent or its lease is gone");
                node.core.counters().dropped.fetch_add(1, Ordering::Relaxed);
                break;
            }
            Err(error) if attempt < FINISH_TRIES => {
                tracing::warn!(%error, task = %task_id, "cannot write a task's outcome; retrying");
                tokio::time::sleep(node.config.retry_base * attempt).await;
            }
            Err(error) => {
                // The lease runs out and the task runs again, on this node or another.
                tracing::error!(%error, task = %task_id, "cannot write a task's outcome");
            }
        }
    }
    node.core.wake_outbox();
}

/// The model's answer to the task, with up to three attempts; and how many calls were made.
async fn call_model(node: &Node, claimed: &ClaimedTask) -> (Outcome, i32) {
    let models = node.core.models();
    let resolved = models.resolve(
        claimed.agent.model.as_deref(),
        &claimed.agent.role_prompt,
        &claimed.user_message(),
    );
    let (provider, request) = match resolved {
        Ok(resolved) => resolved,
        Err(error) => {
            return (Outcome::Failed { error: error.to_string(), permanent: true }, 0);
        }
    };
    let label = models.provider_of(claimed.agent.model.as_deref());
    let mut calls = 0;
    loop {
        calls += 1;
        let answer = {
            let Ok(_permit) = node.calls.acquire().await else {
                return (
                    Outcome::Failed { error: "the runtime stopped".into(), permanent: false },
                    calls - 1,
                );
            };
            let started = std::time::Instant::now();
            let answer = provider.complete(&request).await;
            node.core.counters().model_call(label, started.elapsed(), answer.as_ref().err());
            answer
        };
        match answer {
            Ok(completion) => {
                return (
                    Outcome::Complete { text: completion.text, usage: completion.usage },
                    calls,
                );
            }
            Err(ModelError::Permanent { reason }) => {
                return (Outcome::Failed { error: reason, permanent: true }, calls);
            }
            Err(ModelError::Transient { reason, .. }) if calls >= ATTEMPTS_PER_TASK => {
                return (Outcome::Failed { error: reason, permanent: false }, calls);
            }
            Err(ModelError::Transient { reason, retry_after }) => {
                let delay = retry_delay(&node.config, calls, retry_after);
                tracing::info!(task = %claimed.task.id, attempt = calls, ?delay, %reason, "model call failed; retrying");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Exponential backoff from `retry_base`, never shorter than the provider's `Retry-After`, never
/// longer than `retry_max`.
fn retry_delay(config: &RuntimeConfig, calls: i32, retry_after: Option<Duration>) -> Duration {
    let factor = 2u32.saturating_pow(u32::try_from(calls - 1).unwrap_or(0).min(16));
    let backoff = config.retry_base.saturating_mul(factor);
    backoff.max(retry_after.unwrap_or_default()).min(config.retry_max)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_and_respect_retry_after_within_the_cap() {
        let config = RuntimeConfig {
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(30),
            ..RuntimeConfig::default()
        };
        assert_eq!(retry_delay(&config, 1, None), Duration::from_secs(1));
        assert_eq!(retry_delay(&config, 2, None), Duration::from_secs(2));
        assert_eq!(retry_delay(&config, 2, Some(Duration::from_secs(7))), Duration::from_secs(7));
        assert_eq!(
            retry_delay(&config, 1, Some(Duration::from_secs(600))),
            Duration::from_secs(30)
        );
    }
}
