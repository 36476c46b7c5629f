//! PostgreSQL's finish of a task and the agent's next claim, in five statements where the
//! plain path (`finish_then_claim` in `mod.rs`, which SQLite runs in process) takes fourteen:
//!
//! 1. `BEGIN`;
//! 2. the agent's run state and the task, both locked, with the database's time;
//! 3. everything the finish writes (the task's outcome, the run's last step, the agent's run
//!    state, the activity entries and the posts) as one statement, which also reads the agent's
//!    next queued task and how many others are in progress;
//! 4. that task's start (its lease, the `task_started` entry, the "Working on" post);
//! 5. `COMMIT`.
//!
//! The decisions stay in Rust, between statements 2 and 3 (`domain::runtime::finish`) and 3
//! and 4 (`claim::start`), exactly as on the plain path; only the statements around them are
//! merged. Anything unusual at the claim (another task still in progress, a task out of
//! attempts, no task left) goes the plain way, `claim::claim_in`, inside the same transaction.
//!
//! Why statement 3 may read the next task: every writer that inserts an agent's tasks, or
//! queues one again for a person (a retry), holds the agent's row lock, which this transaction
//! has held since statement 2, so the statement's snapshot has every such task; and the
//! finished task is never queued. The runtime's own requeues (an expired lease, a node let go)
//! take no agent lock: a task they requeue is either still in progress in that snapshot,
//! counted in `running`, which sends the claim the plain way (it reads again), or already
//! queued in it, a candidate like any other.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::claim::{claim_in, start, unclaimable};
use super::{NextClaim, decide_finish, finish_args, run_after, sql};
use crate::domain::runtime::{AgentKey, AgentRun, Claim, ClaimedTask, Finish, Outcome};
use crate::domain::steps::Step;
use crate::domain::task::{Task, TaskId, TaskStatus};
use crate::error::{Error, Result};
use crate::store::db::{Tx, query, query_as};
use crate::store::rows::{NextTaskRow, RunAndTaskRow};
use crate::store::shared::chrono_duration;
use crate::store::sql::{INSERT_POST, after_previous_entry};
use crate::store::steps::step_args;

/// [`super::RuntimeStore::finish_then_claim`] on PostgreSQL, in `tx`; the caller commits.
#[allow(clippy::too_many_arguments, reason = "finish_then_claim's, and its transaction")]
pub(super) async fn finish_then_claim(
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
    let row: Option<RunAndTaskRow> = query_as(&LOCK_RUN_AND_TASK)
        .bind(owner)
        .bind(id)
        .bind(task.as_str())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = row else { return Ok((false, None)) };
    // What the plain path's `FINISH_TASK` checks in its `WHERE`: the row is locked, so it holds
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
    let queued: Option<NextTaskRow> =
        write_finish(node, agent, task, &done, at, last)?.fetch_optional(&mut *tx).await?;
    let NextClaim::Leased { lease, max_attempts } = next else { return Ok((true, None)) };
    let run = run_after(run, &done);
    if let Some(refused) = unclaimable(&run, at, node) {
        return Ok((true, Some(refused)));
    }
    let claim = match queued {
        Some(queued) if queued.running == 0 => {
            let task = Task::try_from(queued.task)?;
            if task.attempts < max_attempts {
                start_next(tx, node, run, task, at, lease).await?
            } else {
                claim_in(tx, agent, run, at, node, lease, max_attempts).await?
            }
        }
        _ => claim_in(tx, agent, run, at, node, lease, max_attempts).await?,
    };
    Ok((true, Some(claim)))
}

/// Statement 3: the finish's writes, answering the agent's next queued task, if any.
fn write_finish<'q>(
    node: &'q str,
    agent: &'q AgentKey,
    task: &'q TaskId,
    done: &'q Finish,
    at: DateTime<Utc>,
    last: Option<&'q Step>,
) -> Result<crate::store::db::QueryAs<'q, NextTaskRow>> {
    let entries: Vec<_> = (done.activity.iter().enumerate())
        .map(|(nth, entry)| {
            let (action, details) = (entry.action.as_str(), &entry.details);
            json!({"nth": nth, "action": action, "details": details, "task_id": entry.task_id})
        })
        .collect();
    let posts = (done.posts.iter().enumerate())
        .map(|(nth, post)| {
            let payload = serde_json::to_string(&post.body).map_err(Error::internal)?;
            Ok(json!({"nth": nth, "nonce": post.nonce, "payload": payload}))
        })
        .collect::<Result<Vec<_>>>()?;
    let statement: &'static str = if last.is_some() { &FINISH_WITH_STEP } else { &FINISH };
    let mut statement = query_as(statement)
        .bind_all(finish_args(task, node, done, at))
        .bind(agent.owner_id.as_str())
        .bind(agent.agent_id.as_str())
        .bind(done.agent.status.as_str())
        .bind(done.agent.status_before_vacation.map(|s| s.as_str()))
        .bind(done.agent.failure_streak)
        .bind(done.agent.next_run_at)
        .bind(serde_json::Value::Array(entries).to_string())
        .bind(serde_json::Value::Array(posts).to_string());
    if let Some(step) = last {
        statement = statement.bind_all(step_args(task, step)?);
    }
    Ok(statement)
}

/// Statement 4: `task` started for `node`, with its entry and post; what `claim_in` writes
/// for a task it starts.
async fn start_next(
    tx: &mut Tx,
    node: &str,
    run: AgentRun,
    mut task: Task,
    now: DateTime<Utc>,
    lease: std::time::Duration,
) -> Result<Claim> {
    let (entry, post) = start(&mut task, now);
    let payload = post
        .as_ref()
        .map(|p| serde_json::to_string(&p.body))
        .transpose()
        .map_err(Error::internal)?;
    query(&START)
        .bind(task.id.as_str())
        .bind(node)
        .bind(now + chrono_duration(lease))
        .bind(now)
        .bind(entry.action.as_str())
        .bind(entry.details)
        .bind(post.map(|p| p.nonce))
        .bind(payload)
        .execute(&mut *tx)
        .await?;
    Ok(Claim::Task(Box::new(ClaimedTask { task, agent: run })))
}

/// The task's columns (`TASK_COLUMNS`'), qualified by `t`.
fn task_columns() -> String {
    let list = crate::store::tasks::sql::TASK_COLUMNS_LIST;
    list.split(", ").map(|c| format!("t.{c}")).collect::<Vec<_>>().join(", ")
}

/// Statement 2 (`$1` owner, `$2` agent, `$3` task).
static LOCK_RUN_AND_TASK: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT a.name, a.status AS agent_status, a.status_before_vacation, a.role_prompt, \
         a.model, a.throttle_seconds, a.lease_owner, a.next_run_at, a.failure_streak, a.tools, \
         a.max_steps, a.mcp_servers, a.approval_tools, a.fallback_models, a.memory, \
         now() AS db_now, {}, t.lease_owner AS task_lease_owner \
         FROM agents a JOIN tasks t ON t.owner_id = a.owner_id AND t.agent_id = a.id \
         WHERE a.owner_id = $1 AND a.id = $2 AND t.id = $3 FOR UPDATE OF a, t",
        task_columns()
    )
});

/// Statement 3 without a step: `FINISH_TASK` (`$1`–`$12`), the agent's run state (`$13`
/// owner, `$14` agent, `$15` status, `$16` the status before a vacation, `$17` failure streak,
/// `$18` next run; `$9` the time), the entries (`$19`, JSON: `nth`, `action`, `details`,
/// `task_id`, each dated a microsecond after the one before, never before the agent's last)
/// and the posts (`$20`, JSON: `nth`, `nonce`, `payload`; none when unmapped), then the next
/// queued task with the count of the agent's other tasks in progress.
static FINISH: LazyLock<String> = LazyLock::new(|| finish_statement(None));
/// Statement 3 with the run's last step (`$21`–`$40`, `INSERT_STEP`'s parameters), inserted
/// before the entries as on the plain path: the events of a transaction are numbered in the
/// order its rows were inserted, so a stream shows the step before the task's end. The order
/// of a statement's `WITH` writes is the database's choice, so the entries are made from the
/// step's returned row: none can be inserted before it.
static FINISH_WITH_STEP: LazyLock<String> = LazyLock::new(|| {
    let placeholders: Vec<String> = (21..=40).map(|n| format!("${n}")).collect();
    finish_statement(Some(format!(
        "step AS ({} SELECT {} FROM fin RETURNING task_id), ",
        crate::store::steps::sql::INSERT_STEP_COLUMNS,
        placeholders.join(", ")
    )))
});

fn finish_statement(step: Option<String>) -> String {
    let next = crate::store::tasks::sql::TASK_COLUMNS_LIST;
    // What the entries are made from: the step's row when there is one, else the finish's.
    let entries_after = if step.is_some() { "step" } else { "fin" };
    format!(
        "WITH fin AS ({finish} RETURNING owner_id), \
         {step}\
         agent AS (UPDATE agents SET status = $15, status_before_vacation = $16, \
            failure_streak = $17, next_run_at = $18, \
            updated_at = CASE WHEN status = $15 THEN updated_at ELSE $9 END \
            WHERE owner_id = $13 AND id = $14 AND EXISTS (SELECT 1 FROM fin)), \
         entries AS (INSERT INTO activity (owner_id, agent_id, action, details, task_id, \
            created_at) \
            SELECT $13, $14, e.action, e.details, e.task_id, \
            {first_entry} + e.nth * interval '1 microsecond' \
            FROM {entries_after}, jsonb_to_recordset($19::jsonb) \
                AS e(nth INTEGER, action TEXT, details TEXT, task_id TEXT) \
            ORDER BY e.nth), \
         posts AS ({insert_post} \
            SELECT m.owner_id, m.agent_id, m.guild_id, m.channel_id, p.nonce, p.payload, 0, \
            now(), $9 \
            FROM fin, chat_mappings m, jsonb_to_recordset($20::jsonb) \
                AS p(nth INTEGER, nonce TEXT, payload TEXT) \
            WHERE m.owner_id = $13 AND m.agent_id = $14 ORDER BY p.nth) \
         SELECT {next}, (SELECT COUNT(*) FROM tasks r WHERE r.owner_id = $13 \
            AND r.agent_id = $14 AND r.status = 'in_progress' AND r.id <> $1) AS running \
         FROM tasks WHERE owner_id = $13 AND agent_id = $14 AND status = 'queued' \
         ORDER BY priority DESC, created_at, id LIMIT 1",
        finish = sql::FINISH_TASK,
        step = step.unwrap_or_default(),
        first_entry = after_previous_entry!("$9", "$13", "$14"),
        insert_post = INSERT_POST,
    )
}

/// Statement 4: `START_TASK` (`$1` task, `$2` node, `$3` lease end, `$4` the time), the
/// entry (`$5` action, `$6` details, dated as the plain path dates it) and the post (`$7`
/// nonce, `$8` payload; none when null or when the agent is unmapped).
static START: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH started AS ({start} RETURNING owner_id, agent_id), \
         entry AS (INSERT INTO activity (owner_id, agent_id, action, details, task_id, \
            created_at) \
            SELECT s.owner_id, s.agent_id, $5, $6, $1, {entry_at} FROM started s) \
         {insert_post} SELECT m.owner_id, m.agent_id, m.guild_id, m.channel_id, $7, $8, 0, now(), $4 \
         FROM started s JOIN chat_mappings m ON m.owner_id = s.owner_id \
            AND m.agent_id = s.agent_id \
         WHERE $7::text IS NOT NULL",
        start = sql::START_TASK,
        entry_at = after_previous_entry!("$4", "s.owner_id", "s.agent_id"),
        insert_post = INSERT_POST,
    )
});
