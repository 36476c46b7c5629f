//! The production backend: PostgreSQL, shared by any number of `agentd` nodes.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{Pool, Postgres};
use tokio::sync::Notify;

use super::add_lanes::{AddLanes, Adds};
use super::audit_lanes::{AuditLanes, Audits};
use super::db::{Begin, Ex, Reader, SqlStore, Tx};
use super::finish_lanes::FinishLanes;
use super::readers::Readers;
use super::script::Scripts;
use super::wake_after_commit::WakeAfterCommit;
use super::{Backend, DatabaseUrl, Notice, Signal, StorageHealth, Wake};
use crate::error::Result;

const MAX_CONNECTIONS: u32 = 16;
/// Connections for plain reads, beside the pool (`readers.rs`), opened as load asks.
const READERS: usize = 8;
/// The channel wake-ups travel on: `owner/agent` for one agent, empty for "look again".
const WAKE_CHANNEL: &str = "agentd_wake";
/// Transactions of finished tasks in flight at once, each of a quarter of the node's agents
/// (`finish_lanes.rs`): a quarter of the pool.
const FINISH_LANES: u8 = 4;

#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: Pool<Postgres>,
    readers: Readers<Postgres>,
    health: Arc<StorageHealth>,
    /// Told after each write transaction commits: its events want numbers.
    commits: Arc<Notify>,
    /// Sends agents' wake-ups after their changes commit.
    wakes: Arc<WakeAfterCommit>,
    /// Each agent's adds that wait meanwhile, committed together.
    adds: AddLanes,
    /// Each workspace's audit entries that wait meanwhile, committed together.
    audits: AuditLanes,
    /// Transactions begin here: the pool, and what follows each commit.
    begin: Begin,
    /// The node's finished tasks that wait meanwhile, committed together.
    finishes: FinishLanes,
}

/// A pooled connection idle longer than this is pinged before it is used again.
const TEST_IDLE_AFTER: Duration = Duration::from_secs(1);

impl PostgresStore {
    /// Connects and applies the migrations. Concurrent nodes serialise on sqlx's migration lock.
    pub async fn connect(url: &DatabaseUrl) -> Result<Self> {
        let options = PgConnectOptions::from_str(url.expose())?.application_name("agentd");
        // sqlx pings a connection before every use by default: a round trip to the server per
        // request. Only a connection that sat idle a while is tested (a restart of the server
        // or a dropped link shows there); one in steady use proves itself with every query.
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(10))
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for > TEST_IDLE_AFTER {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        let health = Arc::new(StorageHealth::new(url.redacted()));
        let readers = Readers::new(options, READERS, Some(TEST_IDLE_AFTER));
        let wakes = WakeAfterCommit::start(pool.clone());
        let adds = Adds::lanes(pool.clone(), Arc::clone(&wakes));
        let audits = Audits::lanes(pool.clone());
        let commits = Arc::default();
        let begin = Begin::Postgres {
            pool: pool.clone(),
            commits: Arc::clone(&commits),
            wakes: Arc::clone(&wakes),
        };
        let finishes = FinishLanes::new(begin.clone(), FINISH_LANES);
        Ok(Self { pool, readers, health, commits, wakes, adds, audits, begin, finishes })
    }
}

/// The store's connections: a pool for writes, the readers for plain reads.
impl SqlStore for PostgresStore {
    fn dialect(&self) -> Backend {
        Backend::Postgres
    }

    fn storage_health(&self) -> &StorageHealth {
        &self.health
    }

    fn writer(&self) -> Ex<'_> {
        Ex::PostgresPool(&self.pool)
    }

    async fn read(&self) -> Result<Reader> {
        Ok(Reader::Postgres(self.readers.acquire().await?))
    }

    async fn begin_write(&self) -> Result<Tx> {
        self.begin.begin().await
    }

    /// Statements go one by one: PostgreSQL takes no multi-statement query with parameters,
    /// and its transactions do not stop other writers.
    fn scripts(&self) -> Option<&Scripts> {
        None
    }

    fn commits(&self) -> Option<&Arc<Notify>> {
        Some(&self.commits)
    }

    fn adds(&self) -> Option<&AddLanes> {
        Some(&self.adds)
    }

    fn audits(&self) -> Option<&AuditLanes> {
        Some(&self.audits)
    }

    fn finishes(&self) -> &FinishLanes {
        &self.finishes
    }

    /// Listens on the wake-up channel, reconnecting after a lost connection (and then asking
    /// for a claim round, since notifications sent meanwhile are gone).
    fn listener(
        &self,
        wake: Wake,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let pool = self.pool.clone();
        Some(tokio::spawn(async move {
            while !*stop.borrow() {
                let mut listener = match PgListener::connect_with(&pool).await {
                    Ok(listener) => listener,
                    Err(error) => {
                        tracing::warn!(%error, "cannot listen for wake-ups; retrying");
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                            _ = stop.changed() => return,
                        }
                    }
                };
                if let Err(error) = listener.listen(WAKE_CHANNEL).await {
                    tracing::warn!(%error, "cannot listen for wake-ups; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        _ = stop.changed() => return,
                    }
                }
                wake(Signal::Connected);
                loop {
                    tokio::select! {
                        received = listener.try_recv() => match received {
                            Ok(Some(notification)) => {
                                wake(Notice::from_payload(notification.payload()).into());
                            }
                            Ok(None) => {
                                tracing::warn!("lost the wake-up connection; reconnecting");
                                wake(Signal::Lost);
                                break;
                            }
                            Err(error) => {
                                tracing::warn!(%error, "lost the wake-up connection; reconnecting");
                                wake(Signal::Lost);
                                break;
                            }
                        },
                        _ = stop.changed() => return,
                    }
                }
            }
        }))
    }

    async fn close_pools(&self) {
        self.wakes.stop().await;
        self.readers.close().await;
        self.pool.close().await;
    }
}
