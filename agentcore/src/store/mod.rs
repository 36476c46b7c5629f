//! Storage: one trait, a SQLite and a PostgreSQL implementation.
//!
//! The backend is picked from the URL scheme. Each area's code is written once for both
//! (`db.rs`), with the same SQL where the dialects agree and a method of `Backend` where they
//! do not (`dialect.rs`); each backend has its own migrations under `migrations/<backend>/`,
//! applied at start.
//! Read-modify-write operations take the row lock first (`BEGIN IMMEDIATE` on SQLite,
//! `FOR UPDATE` on PostgreSQL) and hand the current row to a pure function from the domain, so
//! the rules live in one place and the stores only move data.

mod access;
mod add_lanes;
mod agents;
mod approvals;
mod audit;
mod audit_lanes;
mod billing;
mod budget;
mod chat;
mod db;
mod dialect;
mod events;
#[cfg(test)]
mod explain;
mod finish_lanes;
mod health;
mod lanes;
mod mcp;
mod model_health;
mod outbox;
mod postgres;
mod rate_limits;
mod readers;
mod retention;
mod rows;
mod runtime;
mod schedules;
pub(crate) mod script;
mod shared;
mod sql;
mod sqlite;
pub(crate) mod sqlite_files;
mod steps;
mod tasks;
mod triggers;
mod users;
mod wake_after_commit;
mod webhook_deliveries;
mod webhooks;
mod workspaces;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};

use crate::domain::runtime::AgentKey;
use crate::domain::user::UserId;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Result};

pub use access::{AccessStore, InviteRecord, KeyRecord};
pub use agents::{AgentChange, AgentDecision, AgentStore, AgentWithTask};
pub use approvals::{ApprovalRef, ApprovalStore, Decided};
pub use audit::{AuditFilter, AuditStore};
pub use billing::{BillingStore, UserPlan};
pub use budget::{BudgetStore, UserBudget};
pub use chat::{ChatStore, ConnectionRecord};
pub(crate) use events::NUMBERED_OWNERS;
pub use events::{EventBounds, EventStore};
pub use health::{StorageFaultCounts, StorageHealth};
pub use mcp::{McpServerRecord, McpStore};
pub use model_health::ModelHealthStore;
pub use outbox::{Finished, OutboxStore};
pub use postgres::PostgresStore;
pub use rate_limits::{RateLimitStore, Slot, SlotAsk};
pub use retention::{Prunable, RetentionStore};
pub use runtime::{Backlogs, NextClaim, RuntimeLoad, RuntimeStore};
pub use schedules::{FireDecision, ScheduleDecision, ScheduleStore};
pub use sqlite::SqliteStore;
pub use steps::{RunContext, RunRef, StepStore};
pub use tasks::{AddedTask, TaskChange, TaskDecision, TaskStore, TaskWrite};
pub use triggers::{CallMaker, CallOutcome, CallTarget, TriggerDecision, TriggerStore};
pub use users::{UserRecord, UserStore};
pub use webhook_deliveries::{
    AttemptWrite, ClaimedDelivery, NewDelivery, Recorded, SendTarget, WebhookDeliveryStore,
};
pub use webhooks::{WebhookRecord, WebhookStore};
pub use workspaces::{MemberChange, WorkspaceStore};

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

/// Everything the service keeps, one trait per area. Every agent-scoped call takes the owner,
/// a workspace: rows of other workspaces do not exist for it, and a missing agent or task is the matching
/// `NotFound` error. Callers bring the area traits they use into scope
/// (`use crate::store::TaskStore`).
#[async_trait]
pub trait Store:
    UserStore
    + WorkspaceStore
    + AccessStore
    + AuditStore
    + AgentStore
    + TaskStore
    + BillingStore
    + McpStore
    + ScheduleStore
    + TriggerStore
    + RetentionStore
    + EventStore
    + RunStore
    + DeliveryStore
    + WebhookStore
    + WebhookDeliveryStore
    + WebhookWorkStore
    + Send
    + Sync
    + fmt::Debug
    + 'static
{
    fn backend(&self) -> Backend;

    /// Succeeds when the database answers.
    async fn ping(&self) -> Result<()>;

    /// Whether writes work: every write this store makes reports its outcome here.
    fn health(&self) -> &StorageHealth;

    /// Told after each write transaction commits, where events are numbered after their
    /// commit ([`EventStore::number_events`]: PostgreSQL); None where they are numbered as
    /// they are written (SQLite).
    fn commits(&self) -> Option<Arc<tokio::sync::Notify>>;

    /// Adds waiting on this node for a transaction of their agent's adds in flight
    /// (PostgreSQL's lanes, `add_lanes.rs`); always 0 on SQLite.
    fn adds_waiting(&self) -> usize;

    /// Audit entries waiting on this node for a transaction of their workspace's entries in
    /// flight (PostgreSQL's lanes, `audit_lanes.rs`); always 0 on SQLite.
    fn audit_entries_waiting(&self) -> usize;

    /// Finished tasks waiting on this node for a transaction of finishes in flight
    /// (`finish_lanes.rs`).
    fn finishes_waiting(&self) -> usize;

    /// Transactions of finished tasks this store committed (`finish_lanes.rs`).
    fn finish_transactions(&self) -> u64;

    /// Closes every connection; later calls fail.
    async fn close(&self);

    /// The stored secret called `name`, storing `candidate` first if there is none yet.
    /// Every process sharing the database gets the same value.
    async fn secret_or_insert(&self, name: &str, candidate: &str) -> Result<String>;

    /// Replaces the secret `name` by `new` if it still holds `old` (else changes nothing).
    async fn replace_secret(&self, name: &str, old: &str, new: &str) -> Result<()>;

    /// Calls `wake` with every signal published by any node, and with `Connected` / `Lost` as
    /// the listening connection comes and goes, until `stop`. `None` when the backend has no
    /// notifications (SQLite). Signals sent while the listener reconnects are lost: the
    /// heartbeat's look for agents with work covers wake-ups, and the token cache forgets
    /// everything on either change.
    fn listen(
        &self,
        wake: Wake,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::task::JoinHandle<()>>;
}

/// The store as the agent runtime uses it: claims and leases, a run's steps and memory, the
/// approvals of its calls, its budget's reservations and its shared rate limits' slots. The runtime is given this, not the
/// whole [`Store`].
pub trait RunStore:
    RuntimeStore
    + StepStore
    + ApprovalStore
    + BudgetStore
    + EventStore
    + RateLimitStore
    + ModelHealthStore
{
}

impl<
    T: RuntimeStore
        + StepStore
        + ApprovalStore
        + BudgetStore
        + EventStore
        + RateLimitStore
        + ModelHealthStore
        + ?Sized,
> RunStore for T
{
}

/// The store as the outbox's delivery uses it: the posts, and the connections they go out
/// through.
pub trait DeliveryStore: OutboxStore + ChatStore {}

impl<T: OutboxStore + ChatStore + ?Sized> DeliveryStore for T {}

/// The store as the webhooks' worker uses it: the events it fans out, and the deliveries.
pub trait WebhookWorkStore: WebhookDeliveryStore + EventStore {}

impl<T: WebhookDeliveryStore + EventStore + ?Sized> WebhookWorkStore for T {}

/// Receives signals: see [`Signal`].
pub type Wake = Arc<dyn Fn(Signal) + Send + Sync>;

/// What one node tells the others through the store's notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// This agent has work.
    Agent(AgentKey),
    /// Agents may be free to claim.
    Claimable,
    /// Every token of this user was revoked (a logout).
    Revoked(UserId),
    /// This workspace's events grew (PostgreSQL's `number_events` sends it as it numbers them).
    Events(WorkspaceId),
    /// Who belongs to this workspace, or with which role, changed.
    Members(WorkspaceId),
    /// This API key was revoked.
    KeyRevoked(String),
    /// The listener is (again) connected: what was sent meanwhile is lost.
    Connected,
    /// The listener lost its connection.
    Lost,
}

/// What a node publishes on the store's notification channel (PostgreSQL's `NOTIFY`): an
/// agent's wake-up once the change it announces has committed (`wake_after_commit.rs`), the
/// others at the commit of theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// This agent has work: `owner/agent` (neither holds a `/`).
    Agent(AgentKey),
    /// Agents were let go and may be claimed: `claimable`.
    Claimable,
    /// Every token of this user was revoked: `revoked:<user>`.
    Revoked(UserId),
    /// This workspace's events grew: `events:<workspace>` (sent by the database itself, see
    /// `number_events` in the migrations).
    Events(WorkspaceId),
    /// Who belongs to this workspace, or with which role, changed: `members:<workspace>`.
    Members(WorkspaceId),
    /// This API key was revoked: `key:<id>`.
    KeyRevoked(String),
}

const REVOKED: &str = "revoked:";
const EVENTS: &str = "events:";
const MEMBERS: &str = "members:";
const KEY_REVOKED: &str = "key:";
const CLAIMABLE: &str = "claimable";

impl Notice {
    /// The notification's payload.
    pub fn to_payload(&self) -> String {
        match self {
            Notice::Agent(agent) => format!("{}/{}", agent.owner_id, agent.agent_id),
            Notice::Claimable => CLAIMABLE.to_owned(),
            Notice::Revoked(user) => format!("{REVOKED}{user}"),
            Notice::Events(workspace) => format!("{EVENTS}{workspace}"),
            Notice::Members(workspace) => format!("{MEMBERS}{workspace}"),
            Notice::KeyRevoked(key) => format!("{KEY_REVOKED}{key}"),
        }
    }

    /// What a payload announces. Anything else (a node of an earlier version announced
    /// `Claimable` with an empty payload) reads as `Claimable`: a wake-up for nothing costs one
    /// claim query, a lost one a poll interval.
    pub fn from_payload(payload: &str) -> Self {
        if let Some(user) = payload.strip_prefix(REVOKED) {
            return Notice::Revoked(UserId::from_trusted(user.to_owned()));
        }
        if let Some(workspace) = payload.strip_prefix(EVENTS) {
            return Notice::Events(WorkspaceId::from_trusted(workspace.to_owned()));
        }
        if let Some(workspace) = payload.strip_prefix(MEMBERS) {
            return Notice::Members(WorkspaceId::from_trusted(workspace.to_owned()));
        }
        if let Some(key) = payload.strip_prefix(KEY_REVOKED) {
            return Notice::KeyRevoked(key.to_owned());
        }
        match payload.split_once('/') {
            Some((owner, agent)) if !owner.is_empty() && !agent.is_empty() => {
                Notice::Agent(AgentKey::new(owner, agent))
            }
            _ => Notice::Claimable,
        }
    }
}

impl From<Notice> for Signal {
    fn from(notice: Notice) -> Self {
        match notice {
            Notice::Agent(agent) => Signal::Agent(agent),
            Notice::Claimable => Signal::Claimable,
            Notice::Revoked(user) => Signal::Revoked(user),
            Notice::Events(workspace) => Signal::Events(workspace),
            Notice::Members(workspace) => Signal::Members(workspace),
            Notice::KeyRevoked(key) => Signal::KeyRevoked(key),
        }
    }
}

#[cfg(test)]
mod notice_tests {
    use super::*;

    #[test]
    fn every_notice_reads_back_from_its_payload() {
        let notices = [
            Notice::Agent(AgentKey::new("u_1", "writer")),
            Notice::Claimable,
            Notice::Revoked(UserId::from_trusted("u_1".to_owned())),
            Notice::Events(WorkspaceId::from_trusted("u_1".to_owned())),
            Notice::Members(WorkspaceId::from_trusted("w_1".to_owned())),
            Notice::KeyRevoked("k_1".to_owned()),
        ];
        for notice in notices {
            assert_eq!(Notice::from_payload(&notice.to_payload()), notice);
        }
        assert_eq!(Notice::from_payload(""), Notice::Claimable);
        assert_eq!(Notice::from_payload("u_1/"), Notice::Claimable);
    }
}

/// Maps a driver error, turning a unique violation into `on_unique`.
pub(crate) fn db_error(error: sqlx::Error, on_unique: Option<Error>) -> Error {
    if health::breaks_connection(&error) {
        readers::connection_lost();
    }
    match (&error, on_unique) {
        (sqlx::Error::Database(db), Some(conflict)) if db.is_unique_violation() => conflict,
        _ => match health::fault_of(&error) {
            Some(fault) => Error::Storage { fault, cause: error.to_string() },
            None => Error::internal(error),
        },
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
