//! The runtime's leases: live nodes, agents leased to a node, tasks claimed and finished.
//!
//! Leases name the node (`lease_owner`) and expire (`lease_until`); every statement that acts on a
//! lease checks the owner, so a node that lost one changes nothing. Every time another node also
//! relies on (a lease's end, a due time, a throttle) is the database's: [`Clock`](super::sql::Clock)
//! writes "now" and "now plus $n seconds" in the backend's SQL, so nodes whose own clocks disagree
//! still agree on who holds what.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use claim::claim_in;

use crate::domain::runtime::{AgentKey, AgentRun, Claim, Finish, Outcome, finish};
use crate::domain::steps::Step;
use crate::domain::task::{Task, TaskId};
use crate::domain::workspace::WorkspaceId;
use crate::error::Result;
use crate::store::Notice;
use crate::store::db::{Arg, SqlStore, Tx, query, query_as, query_scalar};
use crate::store::finish_lanes::Finishing;
use crate::store::rows::{AgentKeyRow, AgentRunRow};
use crate::store::shared::{
    housekeeping, insert_activity, nth_instant, publish, queue_post, watched_if,
};

/// Leases of agents and tasks to nodes; every time here is the database's.
#[async_trait]
pub trait RuntimeStore: Send + Sync {
    /// Keeps `node` counted as alive and renews every lease it holds (agents and tasks in
    /// progress) for `lease` from now. Returns the agents it still holds.
    async fn heartbeat(&self, node: &str, lease: Duration) -> Result<Vec<AgentKey>>;
    /// Work waiting across all users: tasks queued and in progress, posts not yet delivered.
    async fn backlogs(&self) -> Result<Backlogs>;
    /// How many agents are active, and how many nodes are alive now.
    async fn runtime_load(&self) -> Result<RuntimeLoad>;
    /// The database's clock, which judges every lease and due time.
    async fn database_time(&self) -> Result<DateTime<Utc>>;
    /// Leases up to `limit` active agents that nobody holds to `node`, for `lease`.
    async fn claim_agents(&self, node: &str, lease: Duration, limit: i64) -> Result<Vec<AgentKey>>;
    /// Gives up `node`'s lease on the agent, if it still holds it, and queues again the
    /// agent's tasks `node` left in progress (its worker is leaving: nothing runs them).
    async fn release_agent(&self, agent: &AgentKey, node: &str) -> Result<()>;
    /// Gives up everything `node` holds; its tasks in progress go back to the queue.
    async fn release_node(&self, node: &str) -> Result<()>;
    /// Puts tasks whose lease ran out back in the queue; returns how many.
    async fn requeue_expired_tasks(&self) -> Result<u64>;
    /// Takes the agent's next task for `node` (leased for `lease`), if the agent is active,
    /// leased by `node`, past its throttle, and has no task in progress elsewhere. Tasks left
    /// in progress by a node that lost them are queued again first. A task whose `attempts`
    /// (runs claimed and never finished) reached `max_attempts` is failed instead of run, with
    /// its activity and post.
    async fn claim_task(
        &self,
        agent: &AgentKey,
        node: &str,
        lease: Duration,
        max_attempts: i32,
    ) -> Result<Claim>;
    /// Writes the outcome of a task with its activity, posts and the agent's next run, and its
    /// run's `last` step when given (the answer that ended it: one transaction fewer per task),
    /// only while `node` still holds the task. `false`: the lease was lost or the task or agent
    /// was deleted, and nothing was written.
    async fn finish_task(
        &self,
        agent: &AgentKey,
        task: &TaskId,
        node: &str,
        outcome: &Outcome,
        calls: i32,
        last: Option<&Step>,
    ) -> Result<bool> {
        let next = NextClaim::None;
        Ok(self.finish_then_claim(agent, task, node, outcome, calls, last, next).await?.0)
    }
    /// [`RuntimeStore::finish_task`], then, in the same transaction and when the outcome was
    /// written, the agent's next claim as [`RuntimeStore::claim_task`] would make it (leased for
    /// `lease`): one transaction a task fewer. The claim is `None` when nothing was written.
    #[allow(clippy::too_many_arguments, reason = "finish_task's, and the claim's two")]
    async fn finish_then_claim(
        &self,
        agent: &AgentKey,
        task: &TaskId,
        node: &str,
        outcome: &Outcome,
        calls: i32,
        last: Option<&Step>,
        next: NextClaim,
    ) -> Result<(bool, Option<Claim>)>;
    /// Active agents `node` holds that have a queued task and may run it now.
    async fn agents_with_work(&self, node: &str) -> Result<Vec<AgentKey>>;
    /// Whether a person cancelled the task (its run stops at once).
    async fn task_cancelled(&self, task: &TaskId) -> Result<bool>;
}

/// What the claim after a finished task asks for: no claim, or one leased for `lease` with
/// `max_attempts` (see [`RuntimeStore::claim_task`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextClaim {
    None,
    Leased { lease: Duration, max_attempts: i32 },
}

/// Work waiting in the database, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct Backlogs {
    pub queued_tasks: i64,
    pub tasks_in_progress: i64,
    pub outbox_pending: i64,
}

/// The numbers behind each node's fair share of agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct RuntimeLoad {
    pub active: i64,
    pub nodes: i64,
}

impl RuntimeLoad {
    /// The agents one node should hold: the active ones spread over the live nodes, rounded up
    /// so every agent has a place.
    pub fn fair_share(&self) -> usize {
        let nodes = self.nodes.max(1);
        usize::try_from((self.active.max(0) + nodes - 1) / nodes).unwrap_or(usize::MAX)
    }
}

#[async_trait::async_trait]
impl<S: SqlStore> RuntimeStore for S {
    async fn heartbeat(&self, node: &str, lease: Duration) -> Result<Vec<AgentKey>> {
        housekeeping(self.storage_health(), async {
            let clock = self.dialect().clock();
            let lease = lease.as_secs_f64();
            let mut tx = self.begin_write().await?;
            query(&sql::upsert_node(clock)).bind(node).bind(lease).execute(&mut tx).await?;
            lock_agents_of_node(&mut tx, node).await?;
            let held: Vec<AgentKeyRow> = query_as(&sql::renew_agent_leases(clock))
                .bind(node)
                .bind(lease)
                .fetch_all(&mut tx)
                .await?;
            query(&sql::renew_task_leases(clock)).bind(node).bind(lease).execute(&mut tx).await?;
            // Nodes silent for an hour are gone; live counting only looks at `alive_until`.
            query(&sql::forget_dead_nodes(clock)).bind(-3600.0_f64).execute(&mut tx).await?;
            tx.commit().await?;
            Ok(held.into_iter().map(AgentKey::from).collect())
        })
        .await
    }

    async fn backlogs(&self) -> Result<Backlogs> {
        Ok(query_as(sql::BACKLOGS).fetch_one(&mut self.read().await?).await?)
    }

    async fn runtime_load(&self) -> Result<RuntimeLoad> {
        let statement = sql::runtime_load(self.dialect().clock());
        Ok(query_as(&statement).fetch_one(&mut self.read().await?).await?)
    }

    async fn database_time(&self) -> Result<DateTime<Utc>> {
        let statement = format!("SELECT {}", self.dialect().clock().now);
        Ok(query_scalar(&statement).fetch_one(&mut self.read().await?).await?)
    }

    async fn claim_agents(&self, node: &str, lease: Duration, limit: i64) -> Result<Vec<AgentKey>> {
        housekeeping(self.storage_health(), async {
            let statement = sql::claim_agents(self.dialect().clock(), self.dialect().skip_locked());
            let claimed: Vec<AgentKeyRow> = query_as(&statement)
                .bind(node)
                .bind(lease.as_secs_f64())
                .bind(limit)
                .fetch_all(self.writer())
                .await?;
            Ok(claimed.into_iter().map(AgentKey::from).collect())
        })
        .await
    }

    async fn release_agent(&self, agent: &AgentKey, node: &str) -> Result<()> {
        housekeeping(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let released = query(sql::RELEASE_AGENT)
                .bind(&agent.owner_id)
                .bind(&agent.agent_id)
                .bind(node)
                .execute(&mut tx)
                .await?;
            let requeued = query(sql::REQUEUE_AGENT_TASKS_OF_NODE)
                .bind(&agent.owner_id)
                .bind(&agent.agent_id)
                .bind(node)
                .bind(crate::domain::now())
                .execute(&mut tx)
                .await?;
            if released.rows_affected() > 0 {
                publish(&mut tx, &Notice::Claimable).await?;
            } else if requeued.rows_affected() > 0 {
                // Another node holds the agent already: its worker waits for this task's lease.
                publish(&mut tx, &Notice::Agent(agent.clone())).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn release_node(&self, node: &str) -> Result<()> {
        let now = crate::domain::now();
        housekeeping(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            // Agents before tasks, the lock order of every writer.
            lock_agents_of_node(&mut tx, node).await?;
            query(sql::RELEASE_AGENTS_OF_NODE).bind(node).execute(&mut tx).await?;
            query(sql::REQUEUE_TASKS_OF_NODE).bind(node).bind(now).execute(&mut tx).await?;
            query(sql::DELETE_NODE).bind(node).execute(&mut tx).await?;
            publish(&mut tx, &Notice::Claimable).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn requeue_expired_tasks(&self) -> Result<u64> {
        housekeeping(self.storage_health(), async {
            let done = query(&sql::requeue_expired_tasks(self.dialect().clock()))
                .bind(crate::domain::now())
                .execute(self.writer())
                .await?;
            Ok(done.rows_affected())
        })
        .await
    }

    async fn claim_task(
        &self,
        agent: &AgentKey,
        node: &str,
        lease: Duration,
        max_attempts: i32,
    ) -> Result<Claim> {
        housekeeping(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let Some((run, now)) = lock_agent_run(&mut tx, agent).await? else {
                return Ok(Claim::Lost);
            };
            let claim = claim_in(&mut tx, agent, run, now, node, lease, max_attempts).await?;
            tx.commit().await?;
            Ok(claim)
        })
        .await
    }

    async fn finish_then_claim(
        &self,
        agent: &AgentKey,
        task: &TaskId,
        node: &str,
        outcome: &Outcome,
        calls: i32,
        last: Option<&crate::domain::steps::Step>,
        next: NextClaim,
    ) -> Result<(bool, Option<Claim>)> {
        let finishing = Finishing {
            agent: agent.clone(),
            task: task.clone(),
            node: node.to_owned(),
            outcome: outcome.clone(),
            calls,
            last: last.cloned(),
            next,
        };
        watched_if(self.storage_health(), self.finishes().write(finishing), |(written, _)| *written)
            .await
    }

    async fn agents_with_work(&self, node: &str) -> Result<Vec<AgentKey>> {
        let rows: Vec<AgentKeyRow> = query_as(&sql::agents_with_work(self.dialect().clock()))
            .bind(node)
            .fetch_all(&mut self.read().await?)
            .await?;
        Ok(rows.into_iter().map(AgentKey::from).collect())
    }

    async fn task_cancelled(&self, task: &TaskId) -> Result<bool> {
        let found: Option<i32> = query_scalar(sql::TASK_CANCELLED)
            .bind(task.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        Ok(found.is_some())
    }
}

/// The finish of `current` (see [`finish`]), after counting the run's `last` step; `None` when
/// that step is not the run's next (the task row is locked, so no other writer counts one
/// meanwhile: a step out of turn means the run's view is stale).
fn decide_finish(
    run: &AgentRun,
    mut current: Task,
    outcome: &Outcome,
    calls: i32,
    last: Option<&Step>,
    at: DateTime<Utc>,
) -> Option<Finish> {
    if let Some(step) = last {
        if step.seq != current.steps + 1 {
            return None;
        }
        crate::domain::steps::count_step(&mut current, step);
    }
    Some(finish(run, &current, outcome, calls, at))
}

/// `FINISH_TASK`'s parameters, `$1` to `$12`.
fn finish_args<'q>(
    task: &'q TaskId,
    node: &'q str,
    done: &'q Finish,
    at: DateTime<Utc>,
) -> Vec<Arg<'q>> {
    let usage = done.task.usage;
    vec![
        task.as_str().into(),
        node.into(),
        done.task.status.as_str().into(),
        (&done.task.result).into(),
        (&done.task.error).into(),
        done.task.attempts.into(),
        usage.map(|u| u.input_tokens).into(),
        usage.map(|u| u.output_tokens).into(),
        at.into(),
        done.task.steps.into(),
        usage.map_or(0, |u| u.cache_read_tokens).into(),
        usage.map_or(0, |u| u.cache_write_tokens).into(),
    ]
}

/// The agent as a finish left it, for the claim after it under the same lock.
fn run_after(run: AgentRun, done: &Finish) -> AgentRun {
    AgentRun {
        status: done.agent.status,
        status_before_vacation: done.agent.status_before_vacation,
        failure_streak: done.agent.failure_streak,
        next_run_at: Some(done.agent.next_run_at),
        ..run
    }
}

/// What a finished task writes besides the task row: the agent's run state, the
/// activity entries and the posts to its channel.
pub(super) async fn write_after_task(
    tx: &mut Tx,
    agent: &AgentKey,
    done: &crate::domain::runtime::Finish,
    at: DateTime<Utc>,
) -> Result<()> {
    let (owner, id) = (agent.owner_id.as_str(), agent.agent_id.as_str());
    query(sql::UPDATE_AGENT_AFTER_TASK)
        .bind(owner)
        .bind(id)
        .bind(done.agent.status.as_str())
        .bind(done.agent.status_before_vacation.map(|s| s.as_str()))
        .bind(done.agent.failure_streak)
        .bind(done.agent.next_run_at)
        .bind(at)
        .execute(&mut *tx)
        .await?;
    let owner_id = WorkspaceId::from_trusted(owner.to_owned());
    for (nth, entry) in done.activity.iter().enumerate() {
        insert_activity(&mut *tx, &owner_id, &done.task.agent_id, entry, nth_instant(at, nth))
            .await?;
    }
    for post in &done.posts {
        queue_post(&mut *tx, owner, id, post, at).await?;
    }
    Ok(())
}

/// Locks, in key order, every agent `node` holds or runs a task of (`sql::lock_agents_of_node`).
async fn lock_agents_of_node(tx: &mut Tx, node: &str) -> Result<()> {
    if let Some(statement) = sql::lock_agents_of_node(tx.dialect().lock_agents_in_key_order()) {
        query(&statement).bind(node).execute(&mut *tx).await?;
    }
    Ok(())
}

/// Locks the agent row and reads its run state; `None` when the agent is gone.
async fn lock_agent_run(
    tx: &mut Tx,
    agent: &AgentKey,
) -> Result<Option<(AgentRun, DateTime<Utc>)>> {
    let statement = sql::select_agent_run(tx.dialect().lock(), tx.dialect().clock());
    let row: Option<AgentRunRow> = query_as(&statement)
        .bind(&agent.owner_id)
        .bind(&agent.agent_id)
        .fetch_optional(&mut *tx)
        .await?;
    row.map(|row| {
        let now = row.db_now;
        AgentRun::try_from(row).map(|run| (run, now))
    })
    .transpose()
}

mod claim;
mod finish;
/// A finish and the next claim in `tx` (the caller commits): what one finish of a lane writes
/// (`finish_lanes.rs`).
pub(crate) use finish::finish_then_claim as finish_in;
pub(super) mod sql;
