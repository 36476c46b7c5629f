//! The runtime's statements, the same on both backends.

use crate::store::sql::Clock;
use crate::store::tasks::sql::TASK_COLUMNS;

/// The node is alive for `$2` seconds more.
pub(crate) fn upsert_node(clock: Clock) -> String {
    format!(
        "INSERT INTO runtime_nodes (id, started_at, alive_until) VALUES ($1, {}, {}) \
         ON CONFLICT (id) DO UPDATE SET alive_until = excluded.alive_until",
        clock.now,
        (clock.plus)("$2")
    )
}
/// Nodes silent for longer than `$1` seconds (a negative number) are forgotten.
pub(crate) fn forget_dead_nodes(clock: Clock) -> String {
    format!("DELETE FROM runtime_nodes WHERE alive_until < {}", (clock.plus)("$1"))
}
pub(crate) const DELETE_NODE: &str = "DELETE FROM runtime_nodes WHERE id = $1";
/// Locks, in the order of their keys (`$1` the node; `lock` is
/// `Backend::lock_agents_in_key_order`), every agent the node holds or runs a task of, before
/// a statement that changes many of them: the heartbeat's renewals, a node's release. A
/// transaction of finishes locks its agents in that order too, and each task only under its
/// agent's lock, so neither waits for the other in a circle (`finish_lanes.rs`). `None` where
/// the backend needs no row locks (SQLite's writer holds the file).
pub(crate) fn lock_agents_of_node(lock: &str) -> Option<String> {
    (!lock.is_empty()).then(|| {
        format!(
            "SELECT a.owner_id FROM agents a WHERE (a.owner_id, a.id) IN (SELECT owner_id, id \
             FROM agents WHERE lease_owner = $1 UNION SELECT owner_id, agent_id FROM tasks \
             WHERE lease_owner = $1 AND status = 'in_progress'){lock}"
        )
    })
}
/// Only active agents stay held: a stopped one is let go even if no wake-up said so.
pub(crate) fn renew_agent_leases(clock: Clock) -> String {
    format!(
        "UPDATE agents SET lease_until = {} WHERE lease_owner = $1 AND status = 'active' \
         RETURNING owner_id, id AS agent_id",
        (clock.plus)("$2")
    )
}
pub(crate) fn renew_task_leases(clock: Clock) -> String {
    format!(
        "UPDATE tasks SET lease_until = {} WHERE lease_owner = $1 AND status = 'in_progress'",
        (clock.plus)("$2")
    )
}
/// The queued and running tasks summed over the agents' kept counts (`backlog_counts`, one row
/// an agent), not counted over the tasks, whose history only grows; the undelivered posts
/// through their partial index.
pub(crate) const BACKLOGS: &str = "SELECT \
    CAST(COALESCE(SUM(queued), 0) AS BIGINT) AS queued_tasks, \
    CAST(COALESCE(SUM(in_progress), 0) AS BIGINT) AS tasks_in_progress, \
    (SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL) AS outbox_pending \
    FROM backlog_counts";
pub(crate) fn runtime_load(clock: Clock) -> String {
    format!(
        "SELECT (SELECT COUNT(*) FROM agents WHERE status = 'active') AS active, \
         (SELECT COUNT(*) FROM runtime_nodes WHERE alive_until > {}) AS nodes",
        clock.now
    )
}
/// Leases (`$2` seconds) up to `$3` active agents nobody holds; `lock` skips rows another
/// node is claiming.
pub(crate) fn claim_agents(clock: Clock, lock: &str) -> String {
    format!(
        "UPDATE agents SET lease_owner = $1, lease_until = {until} WHERE (owner_id, id) IN \
         (SELECT owner_id, id FROM agents WHERE status = 'active' \
         AND (lease_until IS NULL OR lease_until < {now}) LIMIT $3{lock}) \
         RETURNING owner_id, id AS agent_id",
        until = (clock.plus)("$2"),
        now = clock.now
    )
}
pub(crate) const RELEASE_AGENT: &str = "UPDATE agents SET lease_owner = NULL, lease_until = NULL \
    WHERE owner_id = $1 AND id = $2 AND lease_owner = $3";
pub(crate) const RELEASE_AGENTS_OF_NODE: &str =
    "UPDATE agents SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1";
pub(crate) const REQUEUE_TASKS_OF_NODE: &str = "UPDATE tasks SET status = 'queued', \
    lease_owner = NULL, lease_until = NULL, started_at = NULL, updated_at = $2 \
    WHERE lease_owner = $1 AND status = 'in_progress'";
/// What a leaving worker left in progress (a run interrupted, an outcome never written) goes
/// back to the queue: the node's heartbeat would otherwise renew its lease while nothing runs it.
pub(crate) const REQUEUE_AGENT_TASKS_OF_NODE: &str = "UPDATE tasks SET status = 'queued', \
    lease_owner = NULL, lease_until = NULL, started_at = NULL, updated_at = $4 \
    WHERE owner_id = $1 AND agent_id = $2 AND lease_owner = $3 AND status = 'in_progress'";
/// Tasks whose node stopped renewing their lease go back to the queue.
pub(crate) fn requeue_expired_tasks(clock: Clock) -> String {
    format!(
        "UPDATE tasks SET status = 'queued', lease_owner = NULL, lease_until = NULL, \
         started_at = NULL, updated_at = $1 WHERE status = 'in_progress' AND lease_until < {}",
        clock.now
    )
}
/// The agent's run state, locked, with the database's clock as `db_now`.
pub(crate) fn select_agent_run(lock: &str, clock: Clock) -> String {
    format!(
        "SELECT name, status AS agent_status, status_before_vacation, role_prompt, model, throttle_seconds, \
         lease_owner, next_run_at, failure_streak, tools, max_steps, mcp_servers, approval_tools, \
         fallback_models, memory, {} AS db_now \
         FROM agents \
         WHERE owner_id = $1 AND id = $2{lock}",
        clock.now
    )
}
pub(crate) const SELECT_TASKS_IN_PROGRESS: &str = "SELECT id, lease_owner, lease_until FROM tasks \
    WHERE owner_id = $1 AND agent_id = $2 AND status = 'in_progress'";
pub(crate) const REQUEUE_TASK: &str = "UPDATE tasks SET status = 'queued', lease_owner = NULL, \
    lease_until = NULL, started_at = NULL, updated_at = $2 WHERE id = $1";
pub(crate) fn select_next_task() -> String {
    format!(
        "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND status = 'queued' \
         ORDER BY priority DESC, created_at, id LIMIT 1"
    )
}
/// Every run counts as an attempt when it starts, so a run cut off by a crash is counted too.
pub(crate) const START_TASK: &str = "UPDATE tasks SET status = 'in_progress', lease_owner = $2, \
    lease_until = $3, started_at = $4, updated_at = $4, attempts = attempts + 1 WHERE id = $1";
/// Writes a finished task, only while `$2` still holds it.
pub(crate) const FINISH_TASK: &str = "UPDATE tasks SET status = $3, result = $4, error = $5, \
    attempts = $6, input_tokens = $7, output_tokens = $8, updated_at = $9, completed_at = $9, \
    steps = $10, cache_read_tokens = $11, cache_write_tokens = $12, lease_owner = NULL, \
    lease_until = NULL WHERE id = $1 AND lease_owner = $2 AND status = 'in_progress'";
/// A queued task given up at its claim (too many interrupted runs): failed without a run.
pub(crate) const FAIL_QUEUED_TASK: &str = "UPDATE tasks SET status = 'failed', result = NULL, \
    error = $2, updated_at = $3, completed_at = $3 WHERE id = $1 AND status = 'queued'";
pub(crate) const UPDATE_AGENT_AFTER_TASK: &str = "UPDATE agents SET status = $3, \
    status_before_vacation = $4, failure_streak = $5, next_run_at = $6, \
    updated_at = CASE WHEN status = $3 THEN updated_at ELSE $7 END \
    WHERE owner_id = $1 AND id = $2";
/// Active agents this node holds that have a task waiting and may run it now.
pub(crate) fn agents_with_work(clock: Clock) -> String {
    format!(
        "SELECT a.owner_id, a.id AS agent_id FROM agents a \
         WHERE a.lease_owner = $1 AND a.status = 'active' \
         AND (a.next_run_at IS NULL OR a.next_run_at <= {}) \
         AND EXISTS (SELECT 1 FROM tasks t WHERE t.owner_id = a.owner_id AND t.agent_id = a.id \
         AND t.status = 'queued')",
        clock.now
    )
}

/// A task a person cancelled (`$1` its id).
pub(crate) const TASK_CANCELLED: &str =
    "SELECT 1 FROM tasks WHERE id = $1 AND status = 'cancelled'";
