//! Taking an agent's next task inside a write transaction that already holds the agent's row:
//! a claim of its own (`claim_task`) or the one that follows a finished task in the finish's
//! transaction (`finish_then_claim`). The caller commits. A task's first start queues its
//! "Working on" post, with its Cancel button, in the same transaction.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{sql, write_after_task};
use crate::domain::activity::{Action, NewActivity};
use crate::domain::agent::AgentStatus;
use crate::domain::chat::NewPost;
use crate::domain::runtime::{
    AgentKey, AgentRun, Claim, ClaimedTask, Outcome, finish, started_post,
};
use crate::domain::task::{Task, TaskStatus};
use crate::domain::workspace::WorkspaceId;
use crate::error::Result;
use crate::store::db::{Tx, query, query_as};
use crate::store::rows::TaskRow;
use crate::store::shared::{chrono_duration, insert_activity, queue_post};

/// Takes the agent's next task for `node` (see `RuntimeStore::claim_task`), its
/// run state `run` read under the agent's lock at the database's time `now`.
pub(super) async fn claim_in(
    tx: &mut Tx,
    agent: &AgentKey,
    run: AgentRun,
    now: DateTime<Utc>,
    node: &str,
    lease: Duration,
    max_attempts: i32,
) -> Result<Claim> {
    let (owner, id) = (agent.owner_id.as_str(), agent.agent_id.as_str());
    if let Some(refused) = unclaimable(&run, now, node) {
        return Ok(refused);
    }
    let running: Vec<(String, Option<String>, Option<DateTime<Utc>>)> =
        query_as(sql::SELECT_TASKS_IN_PROGRESS).bind(owner).bind(id).fetch_all(&mut *tx).await?;
    for (task_id, holder, lease_until) in running {
        match (holder, lease_until) {
            // Another node still runs it: one task at a time, so wait for it.
            (Some(holder), Some(lease_until)) if holder != node && lease_until >= now => {
                return Ok(wait_until(lease_until, now));
            }
            // Expired, or left behind by this node's own failed write: run it again.
            _ => {
                query(sql::REQUEUE_TASK).bind(&task_id).bind(now).execute(&mut *tx).await?;
            }
        }
    }
    let next: Option<TaskRow> =
        query_as(&sql::select_next_task()).bind(owner).bind(id).fetch_optional(&mut *tx).await?;
    let Some(next) = next else {
        return Ok(Claim::Wait(None));
    };
    let mut task = Task::try_from(next)?;
    if task.attempts >= max_attempts {
        // Every earlier run was cut off (each claim counts one attempt, and a
        // run that ends writes its outcome): this task may be what kills the
        // process. Fail it and let the agent go on with its next one.
        let error = format!(
            "Interrupted {} times: each run of this task stopped before it \
                 finished (the server stopped, lost the task or lost its database), \
                 so it is not run again. Retry it to run it once more.",
            task.attempts
        );
        let outcome = Outcome::Failed { error, permanent: false };
        let done = finish(&run, &task, &outcome, 1, now);
        query(sql::FAIL_QUEUED_TASK)
            .bind(task.id.as_str())
            .bind(&done.task.error)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        write_after_task(tx, agent, &done, now).await?;
        return Ok(wait_until(done.agent.next_run_at, now));
    }
    query(sql::START_TASK)
        .bind(task.id.as_str())
        .bind(node)
        .bind(now + chrono_duration(lease))
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let (entry, post) = start(&mut task, now);
    let owner = WorkspaceId::from_trusted(owner.to_owned());
    insert_activity(&mut *tx, &owner, &task.agent_id, &entry, now).await?;
    if let Some(post) = post {
        queue_post(&mut *tx, owner.as_str(), id, &post, now).await?;
    }
    Ok(Claim::Task(Box::new(ClaimedTask { task, agent: run })))
}

/// Why the agent cannot take a task now, if it cannot: no longer active or held by `node`
/// ([`Claim::Lost`]), or throttled until later ([`Claim::Wait`]). Throttles and leases are
/// judged by the database's clock (`now`, read with the lock), which every node shares; waits
/// go back as durations, which need no clock at all.
pub(super) fn unclaimable(run: &AgentRun, now: DateTime<Utc>, node: &str) -> Option<Claim> {
    if run.status != AgentStatus::Active || run.lease_owner.as_deref() != Some(node) {
        return Some(Claim::Lost);
    }
    run.next_run_at.filter(|at| *at > now).map(|at| wait_until(at, now))
}

fn wait_until(at: DateTime<Utc>, now: DateTime<Utc>) -> Claim {
    Claim::Wait(Some((at - now).to_std().unwrap_or(Duration::ZERO)))
}

/// A queued task as its start writes it at `now` (one more attempt), with the `task_started`
/// entry and, on its first run, the "Working on" post.
pub(super) fn start(task: &mut Task, now: DateTime<Utc>) -> (NewActivity, Option<NewPost>) {
    task.status = TaskStatus::InProgress;
    task.attempts += 1;
    task.started_at = Some(now);
    task.updated_at = now;
    let entry = NewActivity::for_task(
        Action::TaskStarted,
        task.id.as_str(),
        format!("Task '{}' started.", task.title),
    );
    (entry, started_post(task))
}
