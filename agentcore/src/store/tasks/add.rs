//! An add through the API as one statement on each backend, holding the agent's lock for the
//! database's work alone: SQLite runs it as one script in the group-commit batcher
//! (`store/script.rs`), PostgreSQL in its agent's lane (`store/add_lanes.rs`), one call of the
//! `add_tasks` function with the other adds to that agent waiting on the node, outside any
//! other transaction, so the lock is never held while a client waits to be scheduled. Both
//! write what [`super::write_task`] writes, the way every other writer of an agent's tasks
//! does: under the agent's lock, dated after the agent's latest task.

use sqlx::Row as _;

use super::{AddedTask, creator, trace_of};
use crate::domain::activity::NewActivity;
use crate::domain::runtime::AgentKey;
use crate::domain::task::Task;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};
use crate::store::add_lanes::{Add, AddLanes};
use crate::store::script::{Script, Scripts, Value};

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

/// PostgreSQL: the add in its agent's lane (`store/add_lanes.rs`): one call of `add_tasks`
/// with the adds to the agent waiting beside it, outside any other transaction; the lane
/// wakes an active agent's nodes after the commit.
pub(super) async fn by_lane(
    lanes: &AddLanes,
    owner: &WorkspaceId,
    task: &Task,
    activity: &NewActivity,
) -> Result<AddedTask> {
    let (creator_agent, creator_task) = creator(task);
    // Read here, in the caller's span: the lane runs in a task of its own.
    let trace = trace_of(task);
    let add = Add {
        id: task.id.as_str().to_owned(),
        title: task.title.clone(),
        description: task.description.clone(),
        priority: task.priority,
        at: task.created_at,
        depth: task.depth,
        creator_agent: creator_agent.map(str::to_owned),
        creator_task: creator_task.map(str::to_owned),
        trace_id: trace.as_ref().map(|t| t.trace_id().to_owned()),
        parent_span_id: trace.as_ref().map(|t| t.parent_span_id().to_owned()),
        action: activity.action.as_str().to_owned(),
        details: activity.details.clone(),
        entry_task: activity.task_id.clone(),
    };
    let agent = AgentKey::new(owner.as_str(), task.agent_id.as_str());
    added(task, lanes.write(agent, add).await?)
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
