//! PostgreSQL's statements 2 to 4 (see `mod.rs`): 3 and 4 as one statement each, with
//! data-modifying `WITH` clauses.

use std::sync::LazyLock;

use serde_json::json;

use super::{Finished, Started};
use crate::error::{Error, Result};
use crate::store::db::{Query, QueryAs, query, query_as};
use crate::store::rows::NextTaskRow;
use crate::store::runtime::{finish_args, sql};
use crate::store::shared::chrono_duration;
use crate::store::sql::{INSERT_POST, after_previous_entry};
use crate::store::steps::step_args;

/// Statement 3: the finish's writes, answering the agent's next queued task, if any.
pub(super) fn finish<'q>(finished: &Finished<'q>) -> Result<QueryAs<'q, NextTaskRow>> {
    let Finished { node, agent, task, done, at, last } = *finished;
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

/// Statement 4: the start, its entry and its post.
pub(super) fn start<'q>(started: &Started<'q>) -> Result<Query<'q>> {
    let Started { node, task, now, lease, entry, post, .. } = *started;
    let payload =
        post.map(|p| serde_json::to_string(&p.body)).transpose().map_err(Error::internal)?;
    Ok(query(&START)
        .bind(task.id.as_str())
        .bind(node)
        .bind(now + chrono_duration(lease))
        .bind(now)
        .bind(entry.action.as_str())
        .bind(&entry.details)
        .bind(post.map(|p| p.nonce.as_str()))
        .bind(payload))
}

/// Statement 2 (`$1` owner, `$2` agent, `$3` task), both rows locked.
pub(super) static RUN_AND_TASK: LazyLock<String> =
    LazyLock::new(|| super::run_and_task("now()", " FOR UPDATE OF a, t"));

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
