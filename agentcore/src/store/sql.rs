//! SQL both backends run as written. `$n` placeholders work on SQLite too (sqlx binds them by
//! number). Statements that differ per dialect live in the backend's own module.

pub(super) const INSERT_SECRET: &str = "INSERT INTO secrets (name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING";
pub(super) const SELECT_SECRET: &str = "SELECT value FROM secrets WHERE name = $1";

pub(super) const INSERT_USER: &str = "INSERT INTO users \
    (id, email, email_key, name, password_hash, token_version, created_at, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $7)";
const USER_COLUMNS: &str =
    "SELECT id, email, email_key, name, password_hash, token_version, created_at FROM users";
pub(super) fn select_user_by_email() -> String {
    format!("{USER_COLUMNS} WHERE email_key = $1")
}
pub(super) fn select_user_by_id() -> String {
    format!("{USER_COLUMNS} WHERE id = $1")
}
pub(super) const BUMP_TOKEN_VERSION: &str = "UPDATE users SET token_version = token_version + 1, \
    updated_at = $2 WHERE id = $1 RETURNING token_version";

pub(super) const INSERT_AGENT: &str = "INSERT INTO agents \
    (owner_id, id, name, status, channel, role_prompt, throttle_seconds, workspace, model, \
    created_at, updated_at) VALUES ($1, $2, $3, 'idle', $4, $5, $6, $7, $8, $9, $9)";

/// Agents with the counts of their backlog; callers add conditions on `a` after `WHERE`.
/// Only columns of `tasks_by_agent_status` are read from `tasks`, so the counts come from the
/// index alone (no table row per task: with thousands of finished tasks that was most of the
/// cost of listing agents). An agent without tasks joins one row of NULLs, which no filter
/// counts.
const AGENT_WITH_SUMMARY: &str = "SELECT a.id, a.name, a.status, a.status_before_vacation, \
    a.channel, a.role_prompt, a.throttle_seconds, a.workspace, a.model, a.created_at, \
    a.updated_at, \
    COUNT(*) FILTER (WHERE t.status = 'queued') AS queued, \
    COUNT(*) FILTER (WHERE t.status = 'in_progress') AS in_progress, \
    COUNT(*) FILTER (WHERE t.status = 'complete') AS complete, \
    COUNT(*) FILTER (WHERE t.status = 'failed') AS failed \
    FROM agents a LEFT JOIN tasks t ON t.owner_id = a.owner_id AND t.agent_id = a.id \
    WHERE a.owner_id = $1";

pub(super) fn select_agents() -> String {
    format!(
        "{AGENT_WITH_SUMMARY} AND ($2 IS NULL OR a.workspace = $2) AND ($3 IS NULL OR a.status = $3) \
         GROUP BY a.owner_id, a.id ORDER BY a.created_at, a.id"
    )
}

pub(super) fn select_agent() -> String {
    format!("{AGENT_WITH_SUMMARY} AND a.id = $2 GROUP BY a.owner_id, a.id")
}

/// The agent's status, locking the row when `lock` is the backend's row-lock suffix.
pub(super) fn agent_status(lock: &str) -> String {
    format!("SELECT status FROM agents WHERE owner_id = $1 AND id = $2{lock}")
}

/// Existence check that also locks the row when `lock` is the backend's row-lock suffix.
pub(super) fn agent_exists(lock: &str) -> String {
    format!("SELECT 1 FROM agents WHERE owner_id = $1 AND id = $2{lock}")
}

/// Moving into `active` clears the failure streak and the throttle wait: a start resumes at once.
pub(super) const UPDATE_AGENT: &str = "UPDATE agents SET name = $3, status = $4, \
    status_before_vacation = $5, channel = $6, role_prompt = $7, throttle_seconds = $8, \
    workspace = $9, model = $10, updated_at = $11, \
    failure_streak = CASE WHEN $4 = 'active' AND status <> 'active' THEN 0 ELSE failure_streak END, \
    next_run_at = CASE WHEN $4 = 'active' AND status <> 'active' THEN NULL ELSE next_run_at END \
    WHERE owner_id = $1 AND id = $2";
pub(super) const DELETE_AGENT: &str = "DELETE FROM agents WHERE owner_id = $1 AND id = $2";

pub(super) const INSERT_ACTIVITY: &str = "INSERT INTO activity \
    (owner_id, agent_id, action, details, task_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)";
pub(super) const SELECT_ACTIVITY: &str = "SELECT action, details, task_id, created_at \
    FROM activity WHERE owner_id = $1 AND agent_id = $2 AND ($3 IS NULL OR created_at < $3) \
    ORDER BY id DESC LIMIT $4";

const TASK_COLUMNS: &str = "SELECT id, agent_id, title, description, priority, status, result, \
    error, attempts, input_tokens, output_tokens, created_at, updated_at, started_at, \
    completed_at FROM tasks";
pub(super) const INSERT_TASK: &str = "INSERT INTO tasks \
    (id, owner_id, agent_id, title, description, priority, status, attempts, created_at, \
    updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'queued', 0, $7, $7)";
pub(super) fn select_tasks() -> String {
    format!("{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND ($3 IS NULL OR status = $3)")
}
pub(super) fn select_task(lock: &str) -> String {
    format!("{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND id = $3{lock}")
}
pub(super) const UPDATE_TASK: &str = "UPDATE tasks SET title = $4, description = $5, \
    priority = $6, status = $7, result = $8, error = $9, attempts = $10, input_tokens = $11, \
    output_tokens = $12, updated_at = $13, started_at = $14, completed_at = $15 \
    WHERE owner_id = $1 AND agent_id = $2 AND id = $3";
pub(super) const DELETE_TASK: &str =
    "DELETE FROM tasks WHERE owner_id = $1 AND agent_id = $2 AND id = $3";

pub(super) const UPSERT_CONNECTION: &str = "INSERT INTO chat_connections \
    (owner_id, guild_id, id, guild_name, kind, bot_token, channel_count, connected_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
    ON CONFLICT (owner_id, guild_id) DO UPDATE SET guild_name = excluded.guild_name, \
    kind = excluded.kind, bot_token = excluded.bot_token, \
    channel_count = excluded.channel_count, connected_at = excluded.connected_at \
    RETURNING id, guild_id, guild_name, kind, bot_token, channel_count, connected_at";
const CONNECTION_COLUMNS: &str = "SELECT id, guild_id, guild_name, kind, bot_token, channel_count, \
    connected_at FROM chat_connections WHERE owner_id = $1";
pub(super) fn select_connections() -> String {
    format!("{CONNECTION_COLUMNS} ORDER BY connected_at, guild_id")
}
pub(super) fn select_connection() -> String {
    format!("{CONNECTION_COLUMNS} AND guild_id = $2")
}
pub(super) const UPDATE_CHANNEL_COUNT: &str =
    "UPDATE chat_connections SET channel_count = $3 WHERE owner_id = $1 AND guild_id = $2";
pub(super) const DELETE_CONNECTION: &str =
    "DELETE FROM chat_connections WHERE owner_id = $1 AND guild_id = $2";

pub(super) const UPSERT_MAPPING: &str = "INSERT INTO chat_mappings \
    (owner_id, agent_id, id, guild_id, channel_id, channel_name, created_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7) \
    ON CONFLICT (owner_id, agent_id) DO UPDATE SET id = excluded.id, \
    guild_id = excluded.guild_id, channel_id = excluded.channel_id, \
    channel_name = excluded.channel_name, created_at = excluded.created_at \
    RETURNING id, agent_id, guild_id, channel_id, channel_name, created_at";
pub(super) const SELECT_MAPPINGS: &str = "SELECT id, agent_id, guild_id, channel_id, channel_name, \
    created_at FROM chat_mappings WHERE owner_id = $1 ORDER BY created_at, agent_id";
pub(super) const DELETE_MAPPING: &str =
    "DELETE FROM chat_mappings WHERE owner_id = $1 AND agent_id = $2";

/// Queues a post to the agent's mapped channel; inserts nothing when the agent is unmapped.
pub(super) const INSERT_POST_FOR_MAPPING: &str = "INSERT INTO outbox \
    (owner_id, agent_id, guild_id, channel_id, nonce, payload, attempts, next_attempt_at, \
    created_at) SELECT owner_id, agent_id, guild_id, channel_id, $3, $4, 0, $5, $5 \
    FROM chat_mappings WHERE owner_id = $1 AND agent_id = $2";
pub(super) const SELECT_OUTBOX_LANES: &str =
    "SELECT DISTINCT owner_id, channel_id FROM outbox WHERE delivered_at IS NULL";
/// Takes the oldest undelivered post of a lane if it is due and nobody holds it: order per
/// lane is kept because only the head is ever taken.
pub(super) const CLAIM_POST: &str = "UPDATE outbox SET lease_owner = $3, lease_until = $5 \
    WHERE id = (SELECT id FROM outbox WHERE owner_id = $1 AND channel_id = $2 \
    AND delivered_at IS NULL ORDER BY id LIMIT 1) \
    AND delivered_at IS NULL AND next_attempt_at <= $4 \
    AND (lease_until IS NULL OR lease_until < $4) \
    RETURNING id, owner_id, agent_id, guild_id, channel_id, nonce, payload, attempts";
pub(super) const SELECT_HEAD_DUE: &str = "SELECT next_attempt_at, lease_until FROM outbox \
    WHERE owner_id = $1 AND channel_id = $2 AND delivered_at IS NULL ORDER BY id LIMIT 1";
pub(super) const DELETE_POST: &str = "DELETE FROM outbox WHERE id = $1 AND lease_owner = $2";
pub(super) const MARK_DELIVERED: &str = "UPDATE outbox SET message_id = $3, delivered_at = $4, \
    lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2";
pub(super) const PRUNE_DELIVERED: &str = "DELETE FROM outbox WHERE delivered_at < $1";
pub(super) const RESCHEDULE_POST: &str = "UPDATE outbox SET attempts = attempts + 1, \
    next_attempt_at = $3, last_error = $4, lease_owner = NULL, lease_until = NULL \
    WHERE id = $1 AND lease_owner = $2";

// The runtime. Leases name the node (`lease_owner`) and expire (`lease_until`); every
// statement that acts on a lease checks the owner, so a node that lost one changes nothing.

pub(super) const UPSERT_NODE: &str = "INSERT INTO runtime_nodes (id, started_at, alive_until) \
    VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET alive_until = excluded.alive_until";
pub(super) const FORGET_DEAD_NODES: &str = "DELETE FROM runtime_nodes WHERE alive_until < $1";
pub(super) const DELETE_NODE: &str = "DELETE FROM runtime_nodes WHERE id = $1";
/// Only active agents stay held: a stopped one is let go even if no wake-up said so.
pub(super) const RENEW_AGENT_LEASES: &str = "UPDATE agents SET lease_until = $2 \
    WHERE lease_owner = $1 AND status = 'active' RETURNING owner_id, id AS agent_id";
pub(super) const RENEW_TASK_LEASES: &str = "UPDATE tasks SET lease_until = $2 \
    WHERE lease_owner = $1 AND status = 'in_progress'";
pub(super) const BACKLOGS: &str = "SELECT \
    (SELECT COUNT(*) FROM tasks WHERE status = 'queued') AS queued_tasks, \
    (SELECT COUNT(*) FROM tasks WHERE status = 'in_progress') AS tasks_in_progress, \
    (SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL) AS outbox_pending";
pub(super) const RUNTIME_LOAD: &str = "SELECT \
    (SELECT COUNT(*) FROM agents WHERE status = 'active') AS active, \
    (SELECT COUNT(*) FROM runtime_nodes WHERE alive_until > $1) AS nodes";
/// Leases up to `$4` active agents nobody holds; `lock` skips rows another node is claiming.
pub(super) fn claim_agents(lock: &str) -> String {
    format!(
        "UPDATE agents SET lease_owner = $1, lease_until = $3 WHERE (owner_id, id) IN \
         (SELECT owner_id, id FROM agents WHERE status = 'active' \
         AND (lease_until IS NULL OR lease_until < $2) LIMIT $4{lock}) \
         RETURNING owner_id, id AS agent_id"
    )
}
pub(super) const RELEASE_AGENT: &str = "UPDATE agents SET lease_owner = NULL, lease_until = NULL \
    WHERE owner_id = $1 AND id = $2 AND lease_owner = $3";
pub(super) const RELEASE_AGENTS_OF_NODE: &str =
    "UPDATE agents SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1";
pub(super) const REQUEUE_TASKS_OF_NODE: &str = "UPDATE tasks SET status = 'queued', \
    lease_owner = NULL, lease_until = NULL, started_at = NULL, updated_at = $2 \
    WHERE lease_owner = $1 AND status = 'in_progress'";
/// Tasks whose node stopped renewing their lease go back to the queue.
pub(super) const REQUEUE_EXPIRED_TASKS: &str = "UPDATE tasks SET status = 'queued', \
    lease_owner = NULL, lease_until = NULL, started_at = NULL, updated_at = $1 \
    WHERE status = 'in_progress' AND lease_until < $1";
pub(super) fn select_agent_run(lock: &str) -> String {
    format!(
        "SELECT name, status, status_before_vacation, role_prompt, model, throttle_seconds, \
         lease_owner, next_run_at, failure_streak FROM agents WHERE owner_id = $1 AND id = $2{lock}"
    )
}
pub(super) const SELECT_TASKS_IN_PROGRESS: &str = "SELECT id, lease_owner, lease_until FROM tasks \
    WHERE owner_id = $1 AND agent_id = $2 AND status = 'in_progress'";
pub(super) const REQUEUE_TASK: &str = "UPDATE tasks SET status = 'queued', lease_owner = NULL, \
    lease_until = NULL, started_at = NULL, updated_at = $2 WHERE id = $1";
pub(super) fn select_next_task() -> String {
    format!(
        "{TASK_COLUMNS} WHERE owner_id = $1 AND agent_id = $2 AND status = 'queued' \
         ORDER BY priority DESC, created_at, id LIMIT 1"
    )
}
/// Every run counts as an attempt when it starts, so a run cut off by a crash is counted too.
pub(super) const START_TASK: &str = "UPDATE tasks SET status = 'in_progress', lease_owner = $2, \
    lease_until = $3, started_at = $4, updated_at = $4, attempts = attempts + 1 WHERE id = $1";
/// Writes a finished task, only while `$2` still holds it.
pub(super) const FINISH_TASK: &str = "UPDATE tasks SET status = $3, result = $4, error = $5, \
    attempts = $6, input_tokens = $7, output_tokens = $8, updated_at = $9, completed_at = $9, \
    lease_owner = NULL, lease_until = NULL \
    WHERE id = $1 AND lease_owner = $2 AND status = 'in_progress'";
pub(super) const UPDATE_AGENT_AFTER_TASK: &str = "UPDATE agents SET status = $3, \
    status_before_vacation = $4, failure_streak = $5, next_run_at = $6, \
    updated_at = CASE WHEN status = $3 THEN updated_at ELSE $7 END \
    WHERE owner_id = $1 AND id = $2";
/// Active agents this node holds that have a task waiting and may run it now.
pub(super) const AGENTS_WITH_WORK: &str = "SELECT a.owner_id, a.id AS agent_id FROM agents a \
    WHERE a.lease_owner = $1 AND a.status = 'active' \
    AND (a.next_run_at IS NULL OR a.next_run_at <= $2) \
    AND EXISTS (SELECT 1 FROM tasks t WHERE t.owner_id = a.owner_id AND t.agent_id = a.id \
    AND t.status = 'queued')";

/// The owner's plan, locking the user row so agent creations of one user queue up.
pub(super) fn user_plan(lock: &str) -> String {
    format!("SELECT plan FROM users WHERE id = $1{lock}")
}
pub(super) const COUNT_AGENTS: &str = "SELECT COUNT(*) FROM agents WHERE owner_id = $1";
pub(super) const SELECT_BILLING: &str = "SELECT plan, subscription_status, \
    (SELECT COUNT(*) FROM agents WHERE owner_id = $1) AS agents_used FROM users WHERE id = $1";
/// The owner's agent ids starting with `$2` (a prefix followed by `%`), to number a new one.
pub(super) const AGENT_IDS_LIKE: &str = "SELECT id FROM agents WHERE owner_id = $1 AND id LIKE $2";

// Stripe. Applying an event reads and writes these under one transaction.
pub(super) const INSERT_BILLING_EVENT: &str = "INSERT INTO billing_events \
    (id, type, created, received_at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING";
pub(super) fn select_subscription(lock: &str) -> String {
    format!(
        "SELECT status, plan, last_event_created, user_id FROM billing_subscriptions \
         WHERE id = $1{lock}"
    )
}
pub(super) const UPSERT_SUBSCRIPTION: &str = "INSERT INTO billing_subscriptions \
    (id, customer_id, user_id, status, plan, last_event_created, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO UPDATE SET \
    customer_id = excluded.customer_id, user_id = excluded.user_id, status = excluded.status, \
    plan = excluded.plan, last_event_created = excluded.last_event_created, \
    updated_at = excluded.updated_at";
pub(super) const USER_ID_BY_ID: &str = "SELECT id FROM users WHERE id = $1";
pub(super) const USER_ID_BY_EMAIL_KEY: &str = "SELECT id FROM users WHERE email_key = $1";
pub(super) const USER_ID_BY_CUSTOMER: &str = "SELECT id FROM users WHERE stripe_customer_id = $1";
/// Users other than `$2` holding customer `$1` or one of its subscriptions.
pub(super) const CUSTOMER_HOLDERS: &str = "SELECT id FROM users \
    WHERE stripe_customer_id = $1 AND id <> $2 \
    UNION SELECT user_id FROM billing_subscriptions WHERE customer_id = $1 AND user_id <> $2";
pub(super) const UNLINK_CUSTOMER: &str =
    "UPDATE users SET stripe_customer_id = NULL WHERE stripe_customer_id = $1 AND id <> $2";
pub(super) const LINK_CUSTOMER: &str = "UPDATE users SET stripe_customer_id = $1 WHERE id = $2";
pub(super) const LINK_CUSTOMER_IF_UNLINKED: &str = "UPDATE users SET stripe_customer_id = $1 \
    WHERE id = $2 AND stripe_customer_id IS NULL";
pub(super) const ATTACH_SUBSCRIPTIONS: &str =
    "UPDATE billing_subscriptions SET user_id = $2 WHERE customer_id = $1";
pub(super) const USER_SUBSCRIPTIONS: &str = "SELECT status, plan, last_event_created \
    FROM billing_subscriptions WHERE user_id = $1";
pub(super) const SET_USER_PLAN: &str =
    "UPDATE users SET plan = $2, subscription_status = $3, updated_at = $4 WHERE id = $1";
