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

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Connection as _, Pool, Sqlite, Transaction};

use super::readers::{Read, Readers};
use super::script::{Script, Scripts};
use super::{Backend, DatabaseUrl, StorageHealth, Wake, sql};
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
}

impl SqliteStore {
    const BACKEND: Backend = Backend::Sqlite;
    /// Every process on one file shares one clock: entries are dated as written.
    const INSERT_ACTIVITY: &'static str = sql::INSERT_ACTIVITY;
    /// SQLite's own clock, written as sqlx writes `DateTime<Utc>` (RFC 3339 with `+00:00`), so
    /// text comparison is time order. Every process on one file shares the machine's clock.
    pub(super) const CLOCK: sql::Clock = sql::Clock {
        now: "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')",
        plus: |seconds| {
            format!(
                "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', printf('%+.3f seconds', {seconds}))"
            )
        },
    };
    /// `BEGIN IMMEDIATE` already holds the write lock: selected rows need no lock of their own.
    const LOCK: &'static str = "";
    /// The UTC day of a model step (stored as RFC 3339 text in UTC), as the usage report
    /// groups it.
    const DAY_OF_STEP: &'static str = "substr(s.created_at, 1, 10)";
    /// The single writer already keeps two claims apart.
    const SKIP_LOCKED: &'static str = "";
    /// One process per file in practice: wake-ups stay in process, with the fallback poll for
    /// anything else.
    const NOTIFY: Option<&'static str> = None;
    /// `BEGIN IMMEDIATE` already applies Stripe events one at a time.
    const SERIALIZE_BILLING: Option<&'static str> = None;
    /// The busiest writes go to the database's thread as one script each (`script.rs`).
    const SCRIPTS: bool = true;

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
        Ok(Self { writer, readers, scripts, health })
    }

    fn storage_health(&self) -> &StorageHealth {
        &self.health
    }

    /// A connection for a plain read (`readers.rs`).
    async fn read(&self) -> Result<Read<Sqlite>> {
        match &self.readers {
            Some(readers) => readers.acquire().await,
            None => Ok(self.writer.acquire().await?.into()),
        }
    }

    fn writer(&self) -> &Pool<Sqlite> {
        &self.writer
    }

    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Runs `script` as one write transaction in one round trip, committed with whatever
    /// other scripts wait (see `script.rs`); returns its last statement's row.
    async fn script(&self, script: Script) -> Result<SqliteRow> {
        self.scripts.run(script).await
    }

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

super::every_area!(SqliteStore, Sqlite);
