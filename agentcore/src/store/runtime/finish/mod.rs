//! A task's finish and the agent's next claim in five round trips to the database, on both
//! backends, where the plain path (a statement at a time, as `claim_in` still claims) takes
//! fourteen:
//!
//! 1. `BEGIN` (`BEGIN IMMEDIATE` on SQLite: the write lock is held from here);
//! 2. the agent's run state and the task (both locked on PostgreSQL), with the database's time;
//! 3. everything the finish writes (the task's outcome, the run's last step, the agent's run
//!    state, the activity entries and the posts), which also reads the agent's next queued task
//!    and how many others are in progress;
//! 4. that task's start (its lease, the `task_started` entry, the "Working on" post);
//! 5. `COMMIT`.
//!
//! PostgreSQL sends 3 and 4 as single statements with data-modifying `WITH` clauses
//! (`postgres.rs`); SQLite, which has none, as strings of statements (`sqlite.rs`): its driver
//! runs every statement of a string on the connection's thread in one hand-off, where each
//! statement alone would be a hand-off of its own, and every hand-off holds SQLite's one write
//! lock while it waits its turn on the async side.
//!
//! The decisions stay in Rust, between 2 and 3 (`domain::runtime::finish`) and 3 and 4
//! (`claim::start`); only the statements around them are merged. Anything unusual at the claim
//! (another task still in progress, a task out of attempts, no task left) goes the plain way,
//! `claim::claim_in`, inside the same transaction.
//!
//! Why 3 may read the next task: every writer that inserts an agent's tasks, or queues one
//! again for a person (a retry), holds the agent's row lock (on SQLite, the write lock), which
//! this transaction has held since 2, so the statement sees every such task; and the finished
//! task is never queued. The runtime's own requeues (an expired lease, a node let go) take no
//! agent lock on PostgreSQL: a task they requeue is either still in progress in that snapshot,
//! counted in `running`, which sends the claim the plain way (it reads again), or already
//! queued in it, a candidate like any other.

mod postgres;
mod sqlite;

use chrono::{DateTime, Utc};

use super::claim::{claim_in, start, unclaimable};
use super::{NextClaim, decide_finish, run_after};
use crate::domain::runtime::{AgentKey, AgentRun, Claim, ClaimedTask, Finish, Outcome};
use crate::domain::steps::Step;
use crate::domain::task::{Task, TaskId, TaskStatus};
use crate::error::Result;
use crate::store::Backend;
use crate::store::db::{Tx, query_as};
use crate::store::rows::{NextTaskRow, RunAndTaskRow};

/// [`super::RuntimeStore::finish_then_claim`], in `tx`; the caller commits.
#[allow(clippy::too_many_arguments, reason = "finish_then_claim's, and its transaction")]
pub(crate) async fn finish_then_claim(
    tx: &mut Tx,
    agent: &AgentKey,
    task: &TaskId,
    node: &str,
    outcome: &Outcome,
    calls: i32,
    last: Option<&Step>,
    next: NextClaim,
) -> Result<(bool, Option<Claim>)> {
    let (owner, id) = (agent.owner_id.as_str(), agent.agent_id.as_str());
    let backend = tx.dialect();
    let statement = match backend {
        Backend::Postgres => postgres::RUN_AND_TASK.as_str(),
        Backend::Sqlite => sqlite::RUN_AND_TASK.as_str(),
    };
    let row: Option<RunAndTaskRow> = query_as(statement)
        .bind(owner)
        .bind(id)
        .bind(task.as_str())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = row else { return Ok((false, None)) };
    // What the plain `FINISH_TASK` checks in its `WHERE`: the rows are locked, so it holds
    // until the commit.
    if row.task_lease_owner.as_deref() != Some(node) {
        return Ok((false, None));
    }
    let at = row.run.db_now;
    let run = AgentRun::try_from(row.run)?;
    let current = Task::try_from(row.task)?;
    if current.status != TaskStatus::InProgress {
        return Ok((false, None));
    }
    let Some(done) = decide_finish(&run, current, outcome, calls, last, at) else {
        return Ok((false, None));
    };
    let finished = Finished { node, agent, task, done: &done, at, last };
    let queued: Option<NextTaskRow> = match backend {
        Backend::Postgres => postgres::finish(&finished)?.fetch_optional(&mut *tx).await?,
        Backend::Sqlite => {
            // Every row of every statement: a statement before the last that answered rows
            // would fail to read as the next task, where `fetch_optional` would stop at its
            // first row and leave the statements after it unrun.
            let batch = sqlite::finish(&finished)?;
            let mut rows: Vec<NextTaskRow> =
                query_as(&batch.sql).bind_all(batch.args).fetch_all(&mut *tx).await?;
            rows.pop()
        }
    };
    let NextClaim::Leased { lease, max_attempts } = next else { return Ok((true, None)) };
    let run = run_after(run, &done);
    if let Some(refused) = unclaimable(&run, at, node) {
        return Ok((true, Some(refused)));
    }
    let claim = match queued {
        Some(queued) if queued.running == 0 => {
            let task = Task::try_from(queued.task)?;
            if task.attempts < max_attempts {
                start_next(tx, agent, node, run, task, at, lease).await?
            } else {
                claim_in(tx, agent, run, at, node, lease, max_attempts).await?
            }
        }
        _ => claim_in(tx, agent, run, at, node, lease, max_attempts).await?,
    };
    Ok((true, Some(claim)))
}

/// What statement 3 writes: `task`'s finish `done` at `at`, by `node`, after the run's `last`
/// step.
struct Finished<'q> {
    node: &'q str,
    agent: &'q AgentKey,
    task: &'q TaskId,
    done: &'q Finish,
    at: DateTime<Utc>,
    last: Option<&'q Step>,
}

/// Statement 4: `task` started for `node`, with its entry and post; what `claim_in` writes
/// for a task it starts.
async fn start_next(
    tx: &mut Tx,
    agent: &AgentKey,
    node: &str,
    run: AgentRun,
    mut task: Task,
    now: DateTime<Utc>,
    lease: std::time::Duration,
) -> Result<Claim> {
    let (entry, post) = start(&mut task, now);
    let started =
        Started { agent, node, task: &task, now, lease, entry: &entry, post: post.as_ref() };
    match tx.dialect() {
        Backend::Postgres => postgres::start(&started)?.execute(&mut *tx).await?,
        Backend::Sqlite => {
            let batch = sqlite::start(&started)?;
            crate::store::db::query(&batch.sql).bind_all(batch.args).execute(&mut *tx).await?
        }
    };
    Ok(Claim::Task(Box::new(ClaimedTask { task, agent: run })))
}

/// What statement 4 writes: `task` started by `node` at `now` for `lease`, with its `entry`
/// and `post`.
struct Started<'q> {
    agent: &'q AgentKey,
    node: &'q str,
    task: &'q Task,
    now: DateTime<Utc>,
    lease: std::time::Duration,
    entry: &'q crate::domain::activity::NewActivity,
    post: Option<&'q crate::domain::chat::NewPost>,
}

/// Statement 2 (`$1` owner, `$2` agent, `$3` task): the agent's run state and the task, with
/// the database's time `now` (an SQL expression), the rows locked by `lock`.
fn run_and_task(now: &str, lock: &str) -> String {
    let list = crate::store::tasks::sql::TASK_COLUMNS_LIST;
    let task_columns: Vec<String> = list.split(", ").map(|c| format!("t.{c}")).collect();
    format!(
        "SELECT a.name, a.status AS agent_status, a.status_before_vacation, a.role_prompt, \
         a.model, a.throttle_seconds, a.lease_owner, a.next_run_at, a.failure_streak, a.tools, \
         a.max_steps, a.mcp_servers, a.approval_tools, a.fallback_models, a.memory, \
         {now} AS db_now, {}, t.lease_owner AS task_lease_owner \
         FROM agents a JOIN tasks t ON t.owner_id = a.owner_id AND t.agent_id = a.id \
         WHERE a.owner_id = $1 AND a.id = $2 AND t.id = $3{lock}",
        task_columns.join(", ")
    )
}
