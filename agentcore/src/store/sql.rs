//! SQL every area shares, and `Clock`, the database's time in SQL. `$n` placeholders work on
//! SQLite too (sqlx binds them by number). Each area keeps its own statements in its module
//! (`users::sql`, `agents::sql`, ...); what differs per dialect is a method of `Backend`
//! (`dialect.rs`).

/// The database's time in a backend's SQL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// The time now, as the column types store it.
    pub now: &'static str,
    /// Now plus the seconds (a float) in the given parameter.
    pub plus: fn(&str) -> String,
}

pub(crate) const INSERT_SECRET: &str = "INSERT INTO secrets (name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING";

pub(crate) const SELECT_SECRET: &str = "SELECT value FROM secrets WHERE name = $1";
pub(crate) const REPLACE_SECRET: &str =
    "UPDATE secrets SET value = $3 WHERE name = $1 AND value = $2";

/// Existence check that also locks the row when `lock` is the backend's row-lock suffix.
pub(crate) fn agent_exists(lock: &str) -> String {
    format!("SELECT 1 FROM agents WHERE owner_id = $1 AND id = $2{lock}")
}

pub(crate) const INSERT_ACTIVITY: &str = "INSERT INTO activity \
    (owner_id, agent_id, action, details, task_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)";

/// PostgreSQL: an entry's time `$at` for the agent of `$owner` and `$agent` (SQL expressions,
/// literals here), never before the agent's previous entry (a microsecond after it at
/// least). Several nodes write one agent's activity with their own clocks; this keeps paging
/// by time (`before`) in the order entries were written in, whichever node wrote them.
macro_rules! after_previous_entry {
    ($at:literal, $owner:literal, $agent:literal) => {
        concat!(
            "GREATEST(",
            $at,
            ", (SELECT p.created_at + interval '1 microsecond' \
             FROM activity p WHERE p.owner_id = ",
            $owner,
            " AND p.agent_id = ",
            $agent,
            " ORDER BY p.id DESC LIMIT 1))"
        )
    };
}
pub(crate) use after_previous_entry;

/// PostgreSQL: an entry dated by [`after_previous_entry`].
pub(crate) const INSERT_ACTIVITY_MONOTONIC: &str = concat!(
    "INSERT INTO activity (owner_id, agent_id, action, details, task_id, created_at) \
     SELECT $1, $2, $3, $4, $5, ",
    after_previous_entry!("$6", "$1", "$2")
);

/// The columns a post is queued with, before its values.
pub(crate) const INSERT_POST: &str = "INSERT INTO outbox (owner_id, agent_id, guild_id, \
    channel_id, nonce, payload, attempts, next_attempt_at, created_at)";

/// Queues a post to the agent's mapped channel; inserts nothing when the agent is unmapped.
/// Due at once by the database's clock (`$5`, the node's time, only dates it).
pub(crate) fn insert_post_for_mapping(clock: Clock) -> String {
    format!(
        "{INSERT_POST} SELECT owner_id, agent_id, guild_id, channel_id, $3, $4, 0, {}, $5 \
         FROM chat_mappings WHERE owner_id = $1 AND agent_id = $2",
        clock.now
    )
}

/// The lanes with undelivered posts (`Backend::outbox_lanes`).
pub(crate) const SELECT_OUTBOX_LANES: &str =
    "SELECT DISTINCT owner_id, channel_id FROM outbox WHERE delivered_at IS NULL";
/// PostgreSQL: [`SELECT_OUTBOX_LANES`] as a walk of the `outbox_lanes` index, one probe a lane.
pub(crate) const SELECT_OUTBOX_LANES_SKIPPING: &str = "WITH RECURSIVE lanes AS ( \
    (SELECT owner_id, channel_id FROM outbox WHERE delivered_at IS NULL \
     ORDER BY owner_id, channel_id LIMIT 1) \
    UNION ALL \
    SELECT next.owner_id, next.channel_id FROM lanes, LATERAL \
    (SELECT owner_id, channel_id FROM outbox WHERE delivered_at IS NULL \
     AND (owner_id, channel_id) > (lanes.owner_id, lanes.channel_id) \
     ORDER BY owner_id, channel_id LIMIT 1) next) \
    SELECT owner_id, channel_id FROM lanes";
