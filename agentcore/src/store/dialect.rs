//! Where the two backends' SQL differs: one method of [`Backend`] per difference. Everything
//! else an area runs is the same text on both (`$n` placeholders work on SQLite too).

use super::Backend;
use super::sql::{self, Clock};

impl Backend {
    /// The database's clock: the time every node agrees on.
    ///
    /// On SQLite, written as sqlx writes `DateTime<Utc>` (RFC 3339 with `+00:00`), so text
    /// comparison is time order; every process on one file shares the machine's clock. On
    /// PostgreSQL `now()` is the transaction's start: one value for every statement of it.
    pub(crate) const fn clock(self) -> Clock {
        match self {
            Backend::Sqlite => Clock {
                now: "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')",
                plus: |seconds| {
                    format!(
                        "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', printf('%+.3f seconds', {seconds}))"
                    )
                },
            },
            Backend::Postgres => Clock {
                now: "now()",
                plus: |seconds| format!("(now() + {seconds}::float8 * interval '1 second')"),
            },
        }
    }

    /// The database's clock as the statement runs, not as its transaction began: for a time
    /// read after waiting on a lock (PostgreSQL's `now()` is the transaction's start).
    pub(crate) const fn wall_clock(self) -> &'static str {
        match self {
            Backend::Sqlite => "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')",
            Backend::Postgres => "clock_timestamp()",
        }
    }

    /// The operator that finds a `LIKE` pattern letter case aside: SQLite's `LIKE` already
    /// ignores the case of ASCII letters; PostgreSQL's `ILIKE` that of every letter.
    pub(crate) const fn like_any_case(self) -> &'static str {
        match self {
            Backend::Sqlite => "LIKE",
            Backend::Postgres => "ILIKE",
        }
    }

    /// The suffix that locks a selected row for its transaction. SQLite's `BEGIN IMMEDIATE`
    /// already holds the write lock: its rows need no lock of their own.
    pub(crate) const fn lock(self) -> &'static str {
        match self {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR UPDATE",
        }
    }

    /// The suffix that locks the selected rows of `agents a` in the order of their keys, as
    /// Rust orders `AgentKey`s (bytes: PostgreSQL's `"C"` collation), the order in which a
    /// transaction of finishes locks its agents (`finish_lanes.rs`); none on SQLite.
    pub(crate) const fn lock_agents_in_key_order(self) -> &'static str {
        match self {
            Backend::Sqlite => "",
            Backend::Postgres => {
                " ORDER BY a.owner_id COLLATE \"C\", a.id COLLATE \"C\" FOR UPDATE"
            }
        }
    }

    /// The suffix of a claim: on PostgreSQL two nodes claiming at once take different agents
    /// instead of waiting on each other; SQLite's single writer already keeps claims apart.
    pub(crate) const fn skip_locked(self) -> &'static str {
        match self {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// The statement that tells every node at commit (`$1` the payload), on the channel
    /// `postgres.rs` listens on (`WAKE_CHANNEL`). SQLite has one
    /// process per file in practice: wake-ups stay in process, with the fallback poll for
    /// anything else.
    pub(crate) const fn notify(self) -> Option<&'static str> {
        match self {
            Backend::Sqlite => None,
            Backend::Postgres => Some("SELECT pg_notify('agentd_wake', $1)"),
        }
    }

    /// The statement that applies Stripe events one at a time. On PostgreSQL, across nodes:
    /// events are rare and touch users, customers and subscriptions in orders no row-lock
    /// sequence could keep deadlock-free. SQLite's `BEGIN IMMEDIATE` already does it.
    pub(crate) const fn serialize_billing(self) -> Option<&'static str> {
        match self {
            Backend::Sqlite => None,
            Backend::Postgres => Some("SELECT pg_advisory_xact_lock(7402318821156)"),
        }
    }

    /// The lanes (owner and channel) with undelivered posts. PostgreSQL walks the
    /// `outbox_lanes` index one lane to the next (a loose index scan), so the cost follows the
    /// number of lanes, not of waiting posts: with posts held back by Discord's limits a
    /// `DISTINCT` read every waiting row, 5 ms a look at 20,000, on every wake-up. SQLite keeps
    /// its `DISTINCT`: with `ANALYZE`'s statistics it skips from lane to lane by itself
    /// (0.01 ms at 20,000 waiting posts), without them it reads each entry of the index
    /// (1 ms), and the same walk as a recursive query is slower still there (24 ms).
    pub(crate) const fn outbox_lanes(self) -> &'static str {
        match self {
            Backend::Sqlite => sql::SELECT_OUTBOX_LANES,
            Backend::Postgres => sql::SELECT_OUTBOX_LANES_SKIPPING,
        }
    }

    /// How an activity entry is inserted: as dated on SQLite (one clock for every process on
    /// the file), never before the agent's previous entry on PostgreSQL (nodes with different
    /// clocks write one agent's activity).
    pub(crate) const fn insert_activity(self) -> &'static str {
        match self {
            Backend::Sqlite => sql::INSERT_ACTIVITY,
            Backend::Postgres => sql::INSERT_ACTIVITY_MONOTONIC,
        }
    }

    /// The UTC day of a model step (`s.created_at`), as the usage report groups it.
    pub(crate) const fn day_of_step(self) -> &'static str {
        match self {
            Backend::Sqlite => "substr(s.created_at, 1, 10)",
            Backend::Postgres => "to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
        }
    }
}
