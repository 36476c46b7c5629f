//! The embedded default: one SQLite file in WAL mode.
//!
//! SQLite has one writer at a time. Writes go through a pool of one connection, so within a
//! process they queue in Rust instead of spinning on the file lock; write transactions start
//! with `BEGIN IMMEDIATE`, so a second process on the same file (`agentctl --local` beside a
//! running `agentd`) waits on the busy timeout instead of failing half-way. Reads use their own
//! pool and never wait for writers.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection as _, Pool, Sqlite};

use super::db::{Begin, Ex, Reader, SqlStore, Tx};
use super::finish_lanes::FinishLanes;
use super::readers::Readers;
use super::script::Scripts;
use super::{Backend, DatabaseUrl, StorageHealth, Wake};
use crate::error::{Error, Result};

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
const READERS: usize = 8;

#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: Pool<Sqlite>,
    /// None for an in-memory database, whose reads share the writer's connection.
    readers: Option<Readers<Sqlite>>,
    scripts: Scripts,
    health: Arc<StorageHealth>,
    /// The node's finished tasks that wait for the writer meanwhile, committed together.
    finishes: FinishLanes,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and applies the migrations.
    pub async fn connect(url: &DatabaseUrl) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url.expose())?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let health = Arc::new(StorageHealth::new(options.get_filename().display().to_string()));
        let in_memory = options.get_filename().to_string_lossy().is_empty()
            || url.expose().contains(":memory:")
            || url.expose().contains("mode=memory");
        let parent = options.get_filename().parent().filter(|d| !d.as_os_str().is_empty());
        if let (false, Some(dir)) = (in_memory, parent) {
            std::fs::create_dir_all(dir).map_err(Error::internal)?;
        }
        // A connection to a local file cannot go stale: no ping to its thread before each use
        // (sqlx's default), which costs a thread hand-off per use.
        let mut writer = SqlitePoolOptions::new();
        if !in_memory {
            // A write that failed half-way (a full disk, an I/O error, a future dropped inside
            // its transaction) may leave the connection believing it is still in a
            // transaction: SQLite rolls some failures back by itself, and then the ROLLBACK
            // sqlx sends fails and its transaction depth stays at one, which refuses every
            // later BEGIN. Such a connection is closed on its way back to the pool and a fresh
            // one opened for the next write. (An in-memory database would be lost with it.)
            writer = writer.after_release(|conn, _| {
                Box::pin(async move {
                    if conn.is_in_transaction() {
                        // The rollback of a dropped transaction is queued; a ping waits for it.
                        conn.ping().await?;
                    }
                    Ok(!conn.is_in_transaction())
                })
            });
        }
        let writer = writer
            .test_before_acquire(false)
            .max_connections(1)
            .min_connections(u32::from(in_memory))
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&writer).await?;
        // An in-memory database exists once per connection: readers must share the writer's.
        // A local file's connection never goes stale: no ping before use.
        let readers = (!in_memory).then(|| Readers::new(options.read_only(true), READERS, None));
        let scripts = Scripts::start(writer.clone());
        // One lane: one writer.
        let finishes = FinishLanes::new(Begin::Sqlite(writer.clone()), 1);
        Ok(Self { writer, readers, scripts, health, finishes })
    }
}

/// The store's connections: reads on their own connections, writes through the one writer.
impl SqlStore for SqliteStore {
    fn dialect(&self) -> Backend {
        Backend::Sqlite
    }

    fn storage_health(&self) -> &StorageHealth {
        &self.health
    }

    fn writer(&self) -> Ex<'_> {
        Ex::SqlitePool(&self.writer)
    }

    async fn read(&self) -> Result<Reader> {
        let read = match &self.readers {
            Some(readers) => readers.acquire().await?,
            None => self.writer.acquire().await?.into(),
        };
        Ok(Reader::Sqlite(read))
    }

    async fn begin_write(&self) -> Result<Tx> {
        Begin::Sqlite(self.writer.clone()).begin().await
    }

    fn scripts(&self) -> Option<&Scripts> {
        Some(&self.scripts)
    }

    /// SQLite numbers events as they are written: nobody waits for a commit.
    fn commits(&self) -> Option<&std::sync::Arc<tokio::sync::Notify>> {
        None
    }

    fn adds(&self) -> Option<&super::add_lanes::AddLanes> {
        None
    }

    fn audits(&self) -> Option<&super::audit_lanes::AuditLanes> {
        None
    }

    fn finishes(&self) -> &FinishLanes {
        &self.finishes
    }

    /// One process per file in practice: wake-ups stay in process, with the fallback poll for
    /// anything else.
    fn listener(
        &self,
        _wake: Wake,
        _stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        None
    }

    async fn close_pools(&self) {
        if let Some(readers) = &self.readers {
            readers.close().await;
        }
        self.writer.close().await;
    }
}
