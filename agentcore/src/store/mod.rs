//! Storage: one trait, a SQLite and a PostgreSQL implementation.
//!
//! The backend is picked from the URL scheme. Both run the same SQL where the dialects agree
//! (see [`sql`]); each has its own migrations under `migrations/<backend>/`, applied at start.
//! Read-modify-write operations take the row lock first (`BEGIN IMMEDIATE` on SQLite,
//! `FOR UPDATE` on PostgreSQL) and hand the current row to a pure function from the domain, so
//! the rules live in one place and the stores only move data.

mod common;
mod postgres;
mod rows;
mod sql;
mod sqlite;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret, SecretString};

use crate::domain::activity::{ActivityEntry, ActivityQuery, NewActivity};
use crate::domain::agent::{Agent, AgentFilter, AgentId, AgentStatus, NewAgent};
use crate::domain::billing::{BillingApplied, BillingEvent, Plans};
use crate::domain::chat::{Connection, Mapping, NewPost, OutboxLane, OutboxPost};
use crate::domain::runtime::{AgentKey, Claim, Outcome};
use crate::domain::task::{Task, TaskId, TaskStatus};
use crate::domain::user::UserId;
use crate::error::{Error, Result};

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// Where the data lives. The URL may hold a password, so `Debug` redacts it.
#[derive(Clone)]
pub struct DatabaseUrl(SecretString);

impl DatabaseUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self(SecretString::from(url.into()))
    }

    /// The SQLite file at `path`, created on first use. Characters that mean something in a
    /// URL are escaped, so any path works.
    pub fn sqlite_file(path: &std::path::Path) -> Self {
        let escaped =
            path.display().to_string().replace('%', "%25").replace('?', "%3F").replace('#', "%23");
        Self::new(format!("sqlite://{escaped}"))
    }

    pub fn backend(&self) -> Result<Backend> {
        let url = self.0.expose_secret();
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else {
            Err(Error::NotConfigured(
                "database_url must start with sqlite:// or postgres://".into(),
            ))
        }
    }

    pub(crate) fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// The URL with any password replaced, fit for logs: in the user part and in a
    /// `password=` query parameter.
    pub fn redacted(&self) -> String {
        let url = self.0.expose_secret();
        let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
        let base = match (base.find("://"), base.rfind('@')) {
            (Some(scheme_end), Some(at)) if at > scheme_end => {
                match base[scheme_end + 3..at].split_once(':') {
                    Some((user, _)) => {
                        format!("{}{user}:***{}", &base[..scheme_end + 3], &base[at..])
                    }
                    None => base.to_owned(),
                }
            }
            _ => base.to_owned(),
        };
        let Some(query) = query else { return base };
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        format!("{base}?{}", query.join("&"))
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DatabaseUrl").field(&self.redacted()).finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        })
    }
}

/// Opens the store behind `url` and brings its schema up to date.
pub async fn connect(url: &DatabaseUrl) -> Result<Arc<dyn Store>> {
    Ok(match url.backend()? {
        Backend::Sqlite => Arc::new(SqliteStore::connect(url).await?),
        Backend::Postgres => Arc::new(PostgresStore::connect(url).await?),
    })
}

/// The default database: `agentd.db` in `data_dir`.
pub fn default_sqlite_path(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("agentd.db")
}

/// A user row, with what only the service may see.
#[derive(Debug, Clone)]
pub struct UserRecord {
    pub id: UserId,
    pub email: String,
    pub email_key: String,
    pub name: String,
    pub password_hash: String,
    pub token_version: i64,
    pub created_at: DateTime<Utc>,
}

/// What an agent becomes after a command, what to log about it, and what to post to its
/// channel (queued only when the agent is mapped).
#[derive(Debug, Clone)]
pub struct AgentChange {
    pub agent: Agent,
    pub activity: Vec<NewActivity>,
    pub post: Option<NewPost>,
}

/// A connection row with its sealed bot token (`None` for OAuth connections).
#[derive(Debug, Clone)]
pub struct ConnectionRecord {
    pub connection: Connection,
    pub sealed_token: Option<String>,
}

/// What happens to a task after a command.
#[derive(Debug, Clone)]
pub enum TaskWrite {
    Update(Box<Task>),
    Delete,
}

#[derive(Debug, Clone)]
pub struct TaskChange {
    pub write: TaskWrite,
    pub activity: Vec<NewActivity>,
}

/// Decides an agent's change from its current row, or refuses. `Ok(None)`: nothing to write.
pub type AgentDecision<'a> = &'a (dyn Fn(&Agent) -> Result<Option<AgentChange>> + Send + Sync);
/// Decides a task's change from its current row, or refuses.
pub type TaskDecision<'a> = &'a (dyn Fn(&Task) -> Result<TaskChange> + Send + Sync);

/// Everything the service keeps. Every agent-scoped call takes the owner: rows of other users
/// do not exist for it, and a missing agent or task is the matching `NotFound` error.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug + 'static {
    fn backend(&self) -> Backend;

    /// Succeeds when the database answers.
    async fn ping(&self) -> Result<()>;

    /// Closes every connection; later calls fail.
    async fn close(&self);

    /// The stored secret called `name`, storing `candidate` first if there is none yet.
    /// Every process sharing the database gets the same value.
    async fn secret_or_insert(&self, name: &str, candidate: &str) -> Result<String>;

    /// Fails with `email_taken` when the email key exists.
    async fn insert_user(&self, user: &UserRecord) -> Result<()>;
    async fn user_by_email_key(&self, email_key: &str) -> Result<Option<UserRecord>>;
    async fn user_by_id(&self, id: &UserId) -> Result<Option<UserRecord>>;
    /// Invalidates every token issued so far; returns the new version.
    async fn bump_token_version(&self, id: &UserId) -> Result<i64>;

    /// Fails with `agent_exists` when the owner has an agent with this id, and with
    /// `plan_limit_reached` when the owner's plan allows no more agents (counted in the same
    /// transaction, under the owner's lock, so concurrent creations cannot pass the limit).
    async fn insert_agent(
        &self,
        owner: &UserId,
        agent: &NewAgent,
        at: DateTime<Utc>,
        activity: &NewActivity,
        plans: &Plans,
    ) -> Result<Agent>;
    /// Creates an agent with a first queued task, like [`Store::insert_agent`] and
    /// [`Store::insert_task`] in one transaction, except that a taken id is numbered instead of
    /// refused: `agent.id`, else the first free of `<id>-2`, `<id>-3`, ... The task is written
    /// for the agent as created, whatever its `agent_id` says.
    async fn insert_agent_with_task(
        &self,
        owner: &UserId,
        agent: &NewAgent,
        agent_activity: &NewActivity,
        task: &Task,
        task_activity: &NewActivity,
        plans: &Plans,
    ) -> Result<(Agent, Task)>;
    /// The owner's plan, subscription status and number of agents.
    async fn billing(&self, owner: &UserId) -> Result<(String, Option<String>, i64)>;
    /// Applies a Stripe event in one transaction with the record of its id, so an event is
    /// applied at most once whatever the number of deliveries and nodes; users' plans are
    /// recomputed from their subscriptions with `plans`.
    async fn apply_billing_event(
        &self,
        event: &BillingEvent,
        plans: &Plans,
        at: DateTime<Utc>,
    ) -> Result<BillingApplied>;
    async fn list_agents(&self, owner: &UserId, filter: &AgentFilter) -> Result<Vec<Agent>>;
    async fn agent(&self, owner: &UserId, id: &AgentId) -> Result<Agent>;
    /// Locks the agent, lets `decide` compute the change, writes it with its activity.
    async fn update_agent(
        &self,
        owner: &UserId,
        id: &AgentId,
        decide: AgentDecision<'_>,
    ) -> Result<Agent>;
    /// Removes the agent with its backlog and activity, in one transaction.
    async fn delete_agent(&self, owner: &UserId, id: &AgentId) -> Result<()>;

    /// Adds a task; returns its agent's status (an active agent has work to wake up for).
    async fn insert_task(
        &self,
        owner: &UserId,
        task: &Task,
        activity: &NewActivity,
    ) -> Result<AgentStatus>;
    async fn tasks(
        &self,
        owner: &UserId,
        agent: &AgentId,
        status: Option<TaskStatus>,
    ) -> Result<Vec<Task>>;
    async fn task(&self, owner: &UserId, agent: &AgentId, id: &TaskId) -> Result<Task>;
    /// Locks the task, lets `decide` compute the change, writes it with its activity.
    /// Returns the task as written (or as it was, when deleted).
    async fn update_task(
        &self,
        owner: &UserId,
        agent: &AgentId,
        id: &TaskId,
        decide: TaskDecision<'_>,
    ) -> Result<Task>;

    async fn activity(
        &self,
        owner: &UserId,
        agent: &AgentId,
        query: &ActivityQuery,
    ) -> Result<Vec<ActivityEntry>>;
    /// Writes one entry on its own (for events that change nothing else).
    async fn log_activity(
        &self,
        owner: &UserId,
        agent: &AgentId,
        entry: &NewActivity,
    ) -> Result<()>;

    /// Stores a connection, replacing the credentials of an earlier one to the same guild.
    async fn upsert_connection(
        &self,
        owner: &UserId,
        record: &ConnectionRecord,
    ) -> Result<Connection>;
    async fn connections(&self, owner: &UserId) -> Result<Vec<Connection>>;
    /// Fails with `connection_not_found`.
    async fn connection(&self, owner: &UserId, guild_id: &str) -> Result<ConnectionRecord>;
    async fn set_channel_count(&self, owner: &UserId, guild_id: &str, count: i64) -> Result<()>;
    /// Removes the connection with its mappings and pending posts.
    async fn delete_connection(&self, owner: &UserId, guild_id: &str) -> Result<()>;

    /// Maps the agent, replacing its earlier mapping.
    async fn upsert_mapping(&self, owner: &UserId, mapping: &Mapping) -> Result<Mapping>;
    async fn mappings(&self, owner: &UserId) -> Result<Vec<Mapping>>;
    /// Fails with `mapping_not_found`.
    async fn delete_mapping(&self, owner: &UserId, agent: &AgentId) -> Result<()>;

    /// Lanes with posts waiting.
    async fn outbox_lanes(&self) -> Result<Vec<OutboxLane>>;
    /// Leases the oldest post of `lane` to `node` until `lease_until`, if it is due at `now`
    /// and not leased.
    async fn claim_post(
        &self,
        lane: &OutboxLane,
        node: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<OutboxPost>>;
    /// When the oldest post of `lane` may be taken next; `None` when there is none.
    async fn next_post_due(&self, lane: &OutboxLane) -> Result<Option<DateTime<Utc>>>;
    /// Records Discord's id for a delivered post; `false` when `node` no longer held it.
    async fn finish_post(&self, id: i64, node: &str, message_id: &str) -> Result<bool>;
    /// Forgets delivered posts older than `before`.
    async fn prune_delivered(&self, before: DateTime<Utc>) -> Result<u64>;
    /// Releases a post for another attempt at `next_attempt_at`.
    async fn retry_post(
        &self,
        id: i64,
        node: &str,
        next_attempt_at: DateTime<Utc>,
        error: &str,
    ) -> Result<()>;
    /// Drops a post that can never be delivered, logging `activity` for its agent.
    async fn drop_post(&self, post: &OutboxPost, node: &str, activity: &NewActivity) -> Result<()>;

    /// Keeps `node` counted as alive and renews every lease it holds (agents and tasks in
    /// progress) until `until`. Returns the agents it still holds.
    async fn heartbeat(
        &self,
        node: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<AgentKey>>;
    /// Work waiting across all users: tasks queued and in progress, posts not yet delivered.
    async fn backlogs(&self) -> Result<Backlogs>;
    /// How many agents are active, and how many nodes are alive at `now`.
    async fn runtime_load(&self, now: DateTime<Utc>) -> Result<RuntimeLoad>;
    /// Leases up to `limit` active agents that nobody holds to `node`.
    async fn claim_agents(
        &self,
        node: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<AgentKey>>;
    /// Gives up `node`'s lease on the agent, if it still holds it.
    async fn release_agent(&self, agent: &AgentKey, node: &str) -> Result<()>;
    /// Gives up everything `node` holds; its tasks in progress go back to the queue.
    async fn release_node(&self, node: &str, now: DateTime<Utc>) -> Result<()>;
    /// Puts tasks whose lease ran out back in the queue; returns how many.
    async fn requeue_expired_tasks(&self, now: DateTime<Utc>) -> Result<u64>;
    /// Takes the agent's next task for `node`, if the agent is active, leased by `node`, past
    /// its throttle, and has no task in progress elsewhere. Tasks left in progress by a node
    /// that lost them are queued again first.
    async fn claim_task(
        &self,
        agent: &AgentKey,
        node: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Claim>;
    /// Writes the outcome of a task with its activity, posts and the agent's next run, only
    /// while `node` still holds the task. `false`: the lease was lost or the task or agent was
    /// deleted, and nothing was written.
    async fn finish_task(
        &self,
        agent: &AgentKey,
        task: &TaskId,
        node: &str,
        outcome: &Outcome,
        calls: i32,
    ) -> Result<bool>;
    /// Active agents `node` holds that have a queued task and may run it at `now`.
    async fn agents_with_work(&self, node: &str, now: DateTime<Utc>) -> Result<Vec<AgentKey>>;
    /// Calls `wake` with every wake-up published by any node (`None`: agents may be free to
    /// claim), until `stop`. `None` when the backend has no notifications (SQLite: one node).
    /// Wake-ups sent while the listener reconnects are lost; the heartbeat's look for agents
    /// with work covers them.
    fn listen(
        &self,
        wake: Wake,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::task::JoinHandle<()>>;
}

/// Receives wake-ups: the agent that has work, or `None` for "agents may be free to claim".
pub type Wake = Arc<dyn Fn(Option<AgentKey>) + Send + Sync>;

/// Work waiting in the database, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct Backlogs {
    pub queued_tasks: i64,
    pub tasks_in_progress: i64,
    pub outbox_pending: i64,
}

/// The numbers behind each node's fair share of agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct RuntimeLoad {
    pub active: i64,
    pub nodes: i64,
}

impl RuntimeLoad {
    /// The agents one node should hold: the active ones spread over the live nodes, rounded up
    /// so every agent has a place.
    pub fn fair_share(&self) -> usize {
        let nodes = self.nodes.max(1);
        usize::try_from((self.active.max(0) + nodes - 1) / nodes).unwrap_or(usize::MAX)
    }
}

/// Maps a driver error, turning a unique violation into `on_unique`.
pub(crate) fn db_error(error: sqlx::Error, on_unique: Option<Error>) -> Error {
    match (&error, on_unique) {
        (sqlx::Error::Database(db), Some(conflict)) if db.is_unique_violation() => conflict,
        _ => Error::internal(error),
    }
}

impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Self {
        db_error(error, None)
    }
}

impl From<sqlx::migrate::MigrateError> for Error {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        Error::internal(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_passwords_never_reach_debug_output() {
        let url = DatabaseUrl::new("postgres://app:hunter2@db.internal:5432/agents");
        let shown = format!("{url:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("app:***@db.internal"), "{shown}");
        let in_query =
            DatabaseUrl::new("postgres://db/agents?user=app&password=hunter2&sslmode=require");
        assert_eq!(
            in_query.redacted(),
            "postgres://db/agents?user=app&password=***&sslmode=require"
        );
    }

    #[tokio::test]
    async fn sqlite_files_may_have_any_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("odd 100% ?#name").join("agentd.db");
        let store = connect(&DatabaseUrl::sqlite_file(&path)).await.unwrap();
        store.ping().await.unwrap();
        store.close().await;
        assert!(path.exists(), "{} was not created", path.display());
    }

    #[test]
    fn the_backend_follows_the_scheme() {
        assert_eq!(DatabaseUrl::new("postgres://x/y").backend().unwrap(), Backend::Postgres);
        assert_eq!(DatabaseUrl::new("postgresql://x/y").backend().unwrap(), Backend::Postgres);
        assert_eq!(DatabaseUrl::new("sqlite:///tmp/a.db").backend().unwrap(), Backend::Sqlite);
        assert!(DatabaseUrl::new("mysql://x").backend().is_err());
    }
}
