//! SQLite's statements 2 to 4 (see `mod.rs`): 3 and 4 as strings of the plain path's own
//! statements, run in one hand-off each.

use std::sync::LazyLock;

use super::{Finished, Started};
use crate::domain::chat::NewPost;
use crate::error::{Error, Result};
use crate::store::Backend;
use crate::store::db::Arg;
use crate::store::runtime::{finish_args, sql};
use crate::store::shared::{chrono_duration, nth_instant};
use crate::store::sql::{INSERT_ACTIVITY, insert_post_for_mapping};
use crate::store::steps::{sql::INSERT_STEP, step_args};

/// Statement 2 (`$1` owner, `$2` agent, `$3` task): the transaction holds SQLite's write lock
/// already, so nothing is locked here.
pub(super) static RUN_AND_TASK: LazyLock<String> =
    LazyLock::new(|| super::run_and_task(Backend::Sqlite.clock().now, ""));

/// Statements sent as one string, each written with its own parameters from `$1` and
/// renumbered past the ones before it: `args` holds every statement's values in order.
#[derive(Default)]
pub(super) struct Batch<'q> {
    pub(super) sql: String,
    pub(super) args: Vec<Arg<'q>>,
}

impl<'q> Batch<'q> {
    fn then(&mut self, statement: &str, args: Vec<Arg<'q>>) {
        if !self.sql.is_empty() {
            self.sql.push_str("; ");
        }
        crate::store::script::renumber(statement, self.args.len(), &mut self.sql);
        self.args.extend(args);
    }
}

/// Statement 3: what the plain path writes for a finish, in its order (the task, its last
/// step, the agent, the entries, the posts: a stream announces them in that order), then the
/// agent's next queued task with the count of its other tasks in progress.
///
/// Unlike PostgreSQL's statement, nothing here depends on `FINISH_TASK` finding its row: the
/// caller checked the lease and the status under the write lock, so it does. The writes after
/// the task's are `write_after_task`'s, which the plain claim still uses: change both.
pub(super) fn finish<'q>(finished: &Finished<'q>) -> Result<Batch<'q>> {
    let Finished { node, agent, task, done, at, last } = *finished;
    let (owner, id) = (agent.owner_id.as_str(), agent.agent_id.as_str());
    let mut batch = Batch::default();
    batch.then(sql::FINISH_TASK, finish_args(task, node, done, at));
    if let Some(step) = last {
        batch.then(INSERT_STEP, step_args(task, step)?);
    }
    let status_before = done.agent.status_before_vacation.map(|s| s.as_str());
    batch.then(
        sql::UPDATE_AGENT_AFTER_TASK,
        vec![
            owner.into(),
            id.into(),
            done.agent.status.as_str().into(),
            status_before.into(),
            done.agent.failure_streak.into(),
            done.agent.next_run_at.into(),
            at.into(),
        ],
    );
    for (nth, entry) in done.activity.iter().enumerate() {
        batch.then(INSERT_ACTIVITY, entry_args(owner, id, entry, nth_instant(at, nth)));
    }
    for post in &done.posts {
        batch.then(&POST, post_args(owner, id, post, at)?);
    }
    batch.then(&NEXT, vec![owner.into(), id.into(), task.as_str().into()]);
    Ok(batch)
}

/// Statement 4: what `claim_in` writes for a task it starts.
pub(super) fn start<'q>(started: &Started<'q>) -> Result<Batch<'q>> {
    let Started { agent, node, task, now, lease, entry, post } = *started;
    let (owner, id) = (agent.owner_id.as_str(), agent.agent_id.as_str());
    let mut batch = Batch::default();
    let until = now + chrono_duration(lease);
    batch.then(
        sql::START_TASK,
        vec![task.id.as_str().into(), node.into(), until.into(), now.into()],
    );
    batch.then(INSERT_ACTIVITY, entry_args(owner, id, entry, now));
    if let Some(post) = post {
        batch.then(&POST, post_args(owner, id, post, now)?);
    }
    Ok(batch)
}

/// `INSERT_ACTIVITY`'s values.
fn entry_args<'q>(
    owner: &'q str,
    agent: &'q str,
    entry: &'q crate::domain::activity::NewActivity,
    at: chrono::DateTime<chrono::Utc>,
) -> Vec<Arg<'q>> {
    let task = entry.task_id.as_deref();
    vec![
        owner.into(),
        agent.into(),
        entry.action.as_str().into(),
        (&entry.details).into(),
        task.into(),
        at.into(),
    ]
}

/// `POST`'s values.
fn post_args<'q>(
    owner: &'q str,
    agent: &'q str,
    post: &'q NewPost,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<Arg<'q>>> {
    let payload = serde_json::to_string(&post.body).map_err(Error::internal)?;
    Ok(vec![owner.into(), agent.into(), post.nonce.as_str().into(), payload.into(), at.into()])
}

/// A post to the agent's mapped channel (`$1` owner, `$2` agent, `$3` nonce, `$4` payload,
/// `$5` the time), as `queue_post` queues it.
static POST: LazyLock<String> = LazyLock::new(|| insert_post_for_mapping(Backend::Sqlite.clock()));

/// The agent's next queued task (`$1` owner, `$2` agent) and how many of its tasks other
/// than `$3` are in progress.
static NEXT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {}, (SELECT COUNT(*) FROM tasks r WHERE r.owner_id = $1 AND r.agent_id = $2 \
            AND r.status = 'in_progress' AND r.id <> $3) AS running \
         FROM tasks WHERE owner_id = $1 AND agent_id = $2 AND status = 'queued' \
         ORDER BY priority DESC, created_at, id LIMIT 1",
        crate::store::tasks::sql::TASK_COLUMNS_LIST
    )
});
