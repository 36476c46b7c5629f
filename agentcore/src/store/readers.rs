//! The connections plain reads use, kept by the store instead of by sqlx's pool.
//!
//! sqlx's pool tests every connection on its way back: a spawned task pings it, which is a
//! hand-off to the connection's thread on SQLite and a round trip to the server on PostgreSQL.
//! For a read that is one statement, that doubles the cost of the request. A read here takes a
//! connection and puts it back as it is: a cancelled read leaves nothing behind that the next
//! use would not wait for itself (SQLite's thread runs its commands in order; sqlx's PostgreSQL
//! connection drains what a cancelled query left before sending the next).
//!
//! What the ping on release would have caught, a broken connection, is caught by the error it
//! causes instead: every error that means a lost connection starts a new *generation*
//! (`connection_lost`, called where driver errors are mapped), and connections of an older
//! generation are closed instead of being used again. A connection idle longer than
//! `test_idle_after` is pinged before its next use, as the main pool does on PostgreSQL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{ConnectOptions, Connection, Database};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::Result;

/// Bumped by every error that stands for a lost connection, in any store of the process.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Says that a connection was found broken: connections made before are not used again.
/// (Process-wide: a store that did not lose its connections only reopens its readers.)
pub(super) fn connection_lost() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// How long a read waits for a free connection before failing as the pools do.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// A fixed number of read connections, opened when first needed.
pub(crate) struct Readers<DB: Database> {
    inner: Arc<Inner<DB>>,
}

impl<DB: Database> Clone for Readers<DB> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<DB: Database> std::fmt::Debug for Readers<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.inner.idle.lock().map_or(0, |idle| idle.len());
        f.debug_struct("Readers").field("idle", &idle).finish_non_exhaustive()
    }
}

struct Inner<DB: Database> {
    options: <DB::Connection as Connection>::Options,
    idle: Mutex<Vec<Idle<DB>>>,
    permits: Arc<Semaphore>,
    test_idle_after: Option<Duration>,
}

struct Idle<DB: Database> {
    conn: DB::Connection,
    generation: u64,
    since: Instant,
}

impl<DB: Database> Readers<DB> {
    /// Up to `size` connections opened with `options`; one idle longer than `test_idle_after`
    /// (none: never) is pinged before it is used again.
    pub(crate) fn new(
        options: <DB::Connection as Connection>::Options,
        size: usize,
        test_idle_after: Option<Duration>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                idle: Mutex::new(Vec::with_capacity(size)),
                permits: Arc::new(Semaphore::new(size)),
                test_idle_after,
            }),
        }
    }

    /// A connection for one read, back among the idle ones when the guard drops.
    pub(crate) async fn acquire(&self) -> Result<Read<DB>> {
        let permit =
            tokio::time::timeout(ACQUIRE_TIMEOUT, Arc::clone(&self.inner.permits).acquire_owned())
                .await
                .map_err(|_| sqlx::Error::PoolTimedOut)?
                .map_err(|_| sqlx::Error::PoolClosed)?;
        let current = generation();
        loop {
            let idle = self.inner.idle.lock().ok().and_then(|mut idle| idle.pop());
            let Some(mut idle) = idle else { break };
            if idle.generation != current {
                // Closing politely would wait on a connection that may be dead: just drop it.
                continue;
            }
            let stale =
                self.inner.test_idle_after.is_some_and(|after| idle.since.elapsed() > after);
            if stale && idle.conn.ping().await.is_err() {
                continue;
            }
            return Ok(self.guard(idle.conn, idle.generation, permit));
        }
        let conn = self.inner.options.connect().await?;
        Ok(self.guard(conn, current, permit))
    }

    fn guard(
        &self,
        conn: DB::Connection,
        generation: u64,
        permit: OwnedSemaphorePermit,
    ) -> Read<DB> {
        Read {
            held: Held::Own { conn: Some(conn), generation, inner: Arc::clone(&self.inner) },
            _permit: Some(permit),
        }
    }

    /// Refuses further reads and closes the idle connections.
    pub(crate) async fn close(&self) {
        self.inner.permits.close();
        let idle = self.inner.idle.lock().map(|mut idle| std::mem::take(&mut *idle));
        for idle in idle.unwrap_or_default() {
            let _ = idle.conn.close().await;
        }
    }
}

/// One connection lent for a read: the store's own, or one of a sqlx pool's (an in-memory
/// SQLite database exists once per connection, so its reads share the writer's pool).
pub(crate) struct Read<DB: Database> {
    held: Held<DB>,
    _permit: Option<OwnedSemaphorePermit>,
}

enum Held<DB: Database> {
    Own { conn: Option<DB::Connection>, generation: u64, inner: Arc<Inner<DB>> },
    Pooled(PoolConnection<DB>),
}

impl<DB: Database> From<PoolConnection<DB>> for Read<DB> {
    fn from(conn: PoolConnection<DB>) -> Self {
        Self { held: Held::Pooled(conn), _permit: None }
    }
}

impl<DB: Database> std::ops::Deref for Read<DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        match &self.held {
            Held::Own { conn, .. } => {
                conn.as_ref().unwrap_or_else(|| unreachable!("taken only by drop"))
            }
            Held::Pooled(conn) => conn,
        }
    }
}

impl<DB: Database> std::ops::DerefMut for Read<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        match &mut self.held {
            Held::Own { conn, .. } => {
                conn.as_mut().unwrap_or_else(|| unreachable!("taken only by drop"))
            }
            Held::Pooled(conn) => conn,
        }
    }
}

impl<DB: Database> Drop for Read<DB> {
    fn drop(&mut self) {
        let Held::Own { conn, generation, inner } = &mut self.held else { return };
        let Some(conn) = conn.take() else { return };
        // A connection of an older generation is dropped; the permit goes back either way
        // (after this), and the next read opens a fresh connection.
        if *generation == self::generation()
            && let Ok(mut idle) = inner.idle.lock()
        {
            idle.push(Idle { conn, generation: *generation, since: Instant::now() });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::Sqlite;
    use sqlx::sqlite::SqliteConnectOptions;

    use super::*;

    async fn readers(dir: &tempfile::TempDir) -> Readers<Sqlite> {
        let url = format!("sqlite://{}", dir.path().join("r.db").display());
        let options = SqliteConnectOptions::from_str(&url).unwrap().create_if_missing(true);
        // A temporary table lives on one connection: it tells connections apart.
        Readers::new(options, 1, None)
    }

    async fn has_marker(readers: &Readers<Sqlite>) -> bool {
        let mut read = readers.acquire().await.unwrap();
        sqlx::query("SELECT 1 FROM temp.marker").fetch_all(&mut *read).await.is_ok()
    }

    #[tokio::test]
    async fn a_connection_is_used_again_until_a_lost_connection_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let readers = readers(&dir).await;
        {
            let mut read = readers.acquire().await.unwrap();
            sqlx::query("CREATE TEMP TABLE marker (x)").execute(&mut *read).await.unwrap();
        }
        assert!(has_marker(&readers).await, "the connection was not kept");
        assert!(has_marker(&readers).await, "the connection was not kept twice");
        connection_lost();
        assert!(!has_marker(&readers).await, "a connection from before the loss was used");
        readers.close().await;
        assert!(readers.acquire().await.is_err(), "a closed set still lends connections");
    }

    #[tokio::test]
    async fn a_read_cancelled_mid_statement_leaves_the_connection_usable() {
        let dir = tempfile::tempdir().unwrap();
        let readers = readers(&dir).await;
        let long = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                    SELECT x FROM c LIMIT 50000000";
        for _ in 0..3 {
            let cancelled = tokio::time::timeout(Duration::from_millis(20), async {
                let mut read = readers.acquire().await.unwrap();
                sqlx::query_scalar::<_, i64>(long).fetch_all(&mut *read).await.unwrap().len()
            })
            .await;
            assert!(cancelled.is_err(), "the long read finished inside its timeout");
            let mut read = readers.acquire().await.unwrap();
            let answer: i64 =
                sqlx::query_scalar("SELECT 41 + 1").fetch_one(&mut *read).await.unwrap();
            assert_eq!(answer, 42);
        }
    }
}
