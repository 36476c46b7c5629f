//! An add through the API as one statement on each backend, holding the agent's lock for the
//! database's work alone: SQLite runs it as one script in the group-commit batcher
//! (`store/script.rs`), PostgreSQL as one call of the `add_task` function outside a
//! transaction (migration 0025), so the lock is never held while a client waits to be
//! scheduled. Both write what [`super::write_task`] writes, the way every other writer of an
//! agent's tasks does: under the agent's lock, dated after the agent's latest task.

use std::sync::Arc;

use sqlx::Row as _;

use super::{AddedTask, creator, trace_of};
use crate::domain::activity::NewActivity;
use crate::domain::agent::AgentStatus;
use crate::domain::runtime::AgentKey;
use crate::domain::task::Task;
use crate::domain::trace::TraceContext;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};
use crate::store::Notice;
use crate::store::db::{Ex, query_as};
use crate::store::script::{Script, Scripts, Value};
use crate::store::wake_after_commit::{SendOnDrop, WakeAfterCommit};

/// SQLite: the add as one script (`sql::INSERT_TASK_SCRIPT`).
pub(super) async fn by_script(
    scripts: &Scripts,
    owner: &WorkspaceId,
    task: &Task,
    activity: &NewActivity,
) -> Result<AddedTask> {
    let (creator_agent, creator_task) = creator(task);
    let trace = trace_of(task);
    let values = vec![
        Value::Text(task.id.as_str().to_owned()),
        Value::Text(owner.as_str().to_owned()),
        Value::Text(task.agent_id.as_str().to_owned()),
        Value::Text(task.title.clone()),
        Value::MaybeText(task.description.clone()),
        Value::Int(task.priority.into()),
        Value::Time(task.created_at),
        Value::Int(task.depth.into()),
        Value::MaybeText(creator_agent.map(str::to_owned)),
        Value::MaybeText(creator_task.map(str::to_owned)),
        Value::Text(activity.action.as_str().to_owned()),
        Value::Text(activity.details.clone()),
        Value::MaybeText(activity.task_id.clone()),
        Value::MaybeText(trace.as_ref().map(|t| t.trace_id().to_owned())),
        Value::MaybeText(trace.map(|t| t.parent_span_id().to_owned())),
    ];
    let row = scripts.run(Script { body: sql::INSERT_TASK_SCRIPT.as_str(), values }).await?;
    let status: Option<String> = row.try_get(0)?;
    let created_at: Option<chrono::DateTime<chrono::Utc>> = row.try_get(1)?;
    added(task, status.zip(created_at))
}

/// PostgreSQL: the add as one call of `add_task`, on the writer pool outside a transaction
/// (the statement commits as it ends); then, for an active agent, the nodes' wake-up through
/// `wakes` (`store/wake_after_commit.rs`).
pub(super) async fn by_function(
    writer: Ex<'_>,
    wakes: Option<&Arc<WakeAfterCommit>>,
    owner: &WorkspaceId,
    task: &Task,
    activity: &NewActivity,
) -> Result<AddedTask> {
    let (creator_agent, creator_task) = creator(task);
    let trace = trace_of(task);
    let wake = Notice::Agent(AgentKey::new(owner.as_str(), task.agent_id.as_str()));
    // Sent when this is dropped, also when the caller stops waiting with the call in flight
    // (the function may commit all the same); cleared when the add woke nobody.
    let mut send =
        wakes.map(|wakes| SendOnDrop { wakes: Arc::clone(wakes), notices: vec![wake.clone()] });
    let row: Option<(String, chrono::DateTime<chrono::Utc>)> = query_as(sql::ADD_TASK)
        .bind(task.id.as_str())
        .bind(owner.as_str())
        .bind(task.agent_id.as_str())
        .bind(&task.title)
        .bind(&task.description)
        .bind(task.priority)
        .bind(task.created_at)
        .bind(task.depth)
        .bind(creator_agent)
        .bind(creator_task)
        .bind(trace.as_ref().map(TraceContext::trace_id))
        .bind(trace.as_ref().map(TraceContext::parent_span_id))
        .bind(activity.action.as_str())
        .bind(&activity.details)
        .bind(&activity.task_id)
        .bind(wake.to_payload())
        .fetch_optional(writer)
        .await?;
    let added = added(task, row);
    if !matches!(&added, Ok(added) if added.agent_status == AgentStatus::Active)
        && let Some(send) = &mut send
    {
        send.notices.clear();
    }
    added
}

/// What an add answered: the agent's status and the creation time stored, or nothing when
/// the owner has no such agent.
fn added(task: &Task, row: Option<(String, chrono::DateTime<chrono::Utc>)>) -> Result<AddedTask> {
    let (status, created_at) =
        row.ok_or_else(|| Error::not_found(Resource::Agent, task.agent_id.as_str()))?;
    Ok(AddedTask { agent_status: status.parse().map_err(Error::internal)?, created_at })
}

/// The statements of an add.
pub(super) mod sql {
    /// PostgreSQL: `add_task` (migrations 0025 and 0028) with the task (`$1` id, `$2` owner,
    /// `$3` agent, `$4` title, `$5` description, `$6` priority, `$7` the node's time, `$8`
    /// depth, `$9`, `$10` the creating agent and task, `$11`, `$12` the trace id and parent
    /// span id), its entry (`$13` action, `$14` details, `$15` task id) and the wake-up (`$16`,
    /// which the function no longer sends: the caller does, after the commit).
    pub(crate) const ADD_TASK: &str = "SELECT agent_status, stored_at FROM add_task($1, $2, $3, \
        $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)";
    /// [`crate::domain::task::creation_time`] in SQLite's SQL: `latest` (text, may be null) and
    /// `requested` are expressions.
    pub(crate) fn created_at(requested: &str, latest: &str) -> String {
        format!(
            "CASE WHEN {latest} >= {requested} \
             THEN strftime('%Y-%m-%dT%H:%M:%f+00:00', {latest}, '+0.001 seconds') \
             ELSE {requested} END"
        )
    }
    /// SQLite: [`crate::store::tasks::TaskStore::insert_task`] as one script
    /// (`store/script.rs`). The task (`$1` id, `$2` owner, `$3` agent, `$4` title, `$5` description, `$6` priority, `$7` the
    /// node's time, `$8` depth, `$9`, `$10` the creating agent and task) only when the agent
    /// exists, dated after the agent's latest task when the node's time is not (a millisecond
    /// after: SQLite's date arithmetic counts milliseconds); its activity entry (`$11` action,
    /// `$12` details, `$13` task id) at the same time (`$14`, `$15` the trace id and parent
    /// span id); then the agent's status and the date written, both null when there is no
    /// such agent.
    pub(crate) static INSERT_TASK_SCRIPT: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| {
            format!(
                "INSERT INTO tasks (id, owner_id, agent_id, title, description, priority, status, \
                    attempts, created_at, updated_at, depth, created_by_agent, created_by_task, \
                    trace_id, parent_span_id) \
                 SELECT $1, $2, $3, $4, $5, $6, 'queued', 0, at, at, $8, $9, $10, $14, $15 \
                 FROM (SELECT {} AS at \
                    FROM (SELECT (SELECT created_at FROM tasks WHERE owner_id = $2 \
                        AND agent_id = $3 ORDER BY created_at DESC LIMIT 1) AS latest)) \
                 WHERE EXISTS (SELECT 1 FROM agents WHERE owner_id = $2 AND id = $3); \
                 INSERT INTO activity (owner_id, agent_id, action, details, task_id, created_at) \
                 SELECT owner_id, agent_id, $11, $12, $13, created_at FROM tasks \
                 WHERE id = $1 AND owner_id = $2 AND agent_id = $3; \
                 SELECT (SELECT status FROM agents WHERE owner_id = $2 AND id = $3), \
                    (SELECT created_at FROM tasks WHERE id = $1 AND owner_id = $2 \
                        AND agent_id = $3)",
                created_at("$7", "latest")
            )
        });
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Duration, Utc};
    use sqlx::Connection as _;

    use crate::domain::task::creation_time;

    /// SQLite's script decides a task's creation time in SQL, the other writers of tasks in
    /// Rust: the same cases through both give the same times (PostgreSQL's `add_task` is
    /// checked through the store, in `tests/api/storage/writes.rs`).
    #[tokio::test]
    async fn sqlites_creation_time_is_the_domains() {
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:").await.unwrap();
        let statement = format!("SELECT {}", super::sql::created_at("$1", "$2"));
        let base: DateTime<Utc> = "2026-11-27T08:00:00Z".parse().unwrap();
        let micros = [0, 1, 400, 499, 500, 501, 600, 999, 250_000, 999_499, 999_500, 999_999];
        let mut cases = 0;
        for requested in micros {
            for latest in micros.iter().map(|m| Some(*m)).chain([None]) {
                let requested = base + Duration::microseconds(requested);
                let latest = latest.map(|m| base + Duration::microseconds(m));
                let sqlite: DateTime<Utc> = sqlx::query_scalar(&statement)
                    .bind(requested)
                    .bind(latest)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
                let rust = creation_time(requested, latest);
                assert_eq!(sqlite, rust, "requested {requested}, latest {latest:?}");
                if let Some(latest) = latest {
                    assert!(rust > latest || requested > latest, "not after {latest}");
                }
                cases += 1;
            }
        }
        assert_eq!(cases, 12 * 13);
    }
}
