//! Storage faults: what a failed statement says about the database, and whether writes work.
//!
//! A write refused for a reason outside the service (a full disk, a database that cannot be
//! reached) becomes [`Error::Storage`] instead of `internal`, so callers get an answer they
//! can act on. Every write a store makes passes through [`StorageHealth::watch`]: the first
//! refusal logs one error line naming the database and the cause, repeats are counted (and
//! summarised at most once a minute), and the next write that succeeds clears the fault. The
//! readiness check reports the fault while it lasts.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result, StorageFault};

/// How often a lasting fault is logged again, with the number of writes refused meanwhile.
const LOG_AGAIN_AFTER: Duration = Duration::from_secs(60);

/// The write health of one database, shared by every connection of a store.
#[derive(Debug)]
pub struct StorageHealth {
    /// The database, as an operator names it (a file path, or a URL without its password).
    database: String,
    state: Mutex<State>,
    full: AtomicU64,
    unavailable: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    fault: Option<Fault>,
}

#[derive(Debug)]
struct Fault {
    kind: StorageFault,
    cause: String,
    since: Instant,
    logged_at: Instant,
    /// Writes refused since the line logged at `logged_at`.
    unlogged: u64,
    refused: u64,
}

/// Writes refused for a storage fault since the process started, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageFaultCounts {
    pub full: u64,
    pub unavailable: u64,
}

impl StorageHealth {
    pub fn new(database: impl Into<String>) -> Self {
        Self {
            database: database.into(),
            state: Mutex::default(),
            full: AtomicU64::new(0),
            unavailable: AtomicU64::new(0),
        }
    }

    /// Notes the outcome of one write and passes it on unchanged. Only a success that is
    /// `evidence` (a write that stored something new) ends a fault.
    pub fn watch<T>(&self, result: Result<T>, evidence: bool) -> Result<T> {
        match &result {
            Ok(_) if evidence => self.succeeded(),
            Ok(_) => {}
            Err(Error::Storage { fault, cause }) => self.refused(*fault, cause),
            Err(_) => {}
        }
        result
    }

    /// Why writes fail right now, for the readiness check; `None` while they work.
    pub fn fault(&self) -> Option<(StorageFault, String)> {
        let state = self.lock();
        let fault = state.fault.as_ref()?;
        let why = format!(
            "writes to the database fail: {} ({} refused in the last {} s; last cause: {})",
            fault.kind.describe(),
            fault.refused,
            fault.since.elapsed().as_secs(),
            fault.cause
        );
        Some((fault.kind, why))
    }

    pub fn counts(&self) -> StorageFaultCounts {
        StorageFaultCounts {
            full: self.full.load(Ordering::Relaxed),
            unavailable: self.unavailable.load(Ordering::Relaxed),
        }
    }

    fn refused(&self, kind: StorageFault, cause: &str) {
        match kind {
            StorageFault::Full => self.full.fetch_add(1, Ordering::Relaxed),
            StorageFault::Unavailable => self.unavailable.fetch_add(1, Ordering::Relaxed),
        };
        let mut state = self.lock();
        let now = Instant::now();
        match &mut state.fault {
            Some(fault) if fault.kind == kind => {
                fault.refused += 1;
                fault.cause = cause.to_owned();
                if now.duration_since(fault.logged_at) < LOG_AGAIN_AFTER {
                    fault.unlogged += 1;
                    return;
                }
                tracing::error!(
                    database = %self.database,
                    refused = fault.unlogged + 1,
                    %cause,
                    "writes still refused: {}; {}",
                    kind.describe(),
                    kind.remedy()
                );
                fault.logged_at = now;
                fault.unlogged = 0;
            }
            _ => {
                tracing::error!(
                    database = %self.database,
                    %cause,
                    "write refused: {}; {}",
                    kind.describe(),
                    kind.remedy()
                );
                state.fault = Some(Fault {
                    kind,
                    cause: cause.to_owned(),
                    since: now,
                    logged_at: now,
                    unlogged: 0,
                    refused: 1,
                });
            }
        }
    }

    fn succeeded(&self) {
        let mut state = self.lock();
        if let Some(fault) = state.fault.take() {
            tracing::warn!(
                database = %self.database,
                refused = fault.refused,
                after_seconds = fault.since.elapsed().as_secs(),
                "writes succeed again"
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }
}

impl StorageFault {
    fn describe(self) -> &'static str {
        match self {
            StorageFault::Full => "the disk is full",
            StorageFault::Unavailable => "the database cannot be reached or is busy",
        }
    }

    fn remedy(self) -> &'static str {
        match self {
            StorageFault::Full => {
                "free space on the database's disk; writes resume by themselves, no restart needed"
            }
            StorageFault::Unavailable => {
                "check that the database server runs and accepts connections; writes resume by \
                 themselves"
            }
        }
    }
}

/// Whether `error` means the connection it came from is lost (a server restarted, a link
/// dropped, SQLite's thread gone), so that connections of its time are not used again.
pub(crate) fn breaks_connection(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // admin/crash shutdown, cannot connect now, class 08 (connection exceptions)
            matches!(code.as_ref(), "57P01" | "57P02" | "57P03") || code.starts_with("08")
        }),
        _ => false,
    }
}

/// The storage fault a database error stands for, if it is one.
pub(crate) fn fault_of(error: &sqlx::Error) -> Option<StorageFault> {
    match error {
        sqlx::Error::Database(db) => {
            if let Some(sqlite) = db.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
                let code: i64 = sqlx::error::DatabaseError::code(sqlite)?.parse().ok()?;
                // Primary result codes (the low byte of an extended one).
                match code & 0xff {
                    13 => Some(StorageFault::Full),
                    // BUSY, LOCKED, IOERR, CANTOPEN, READONLY: the file cannot be written now.
                    5 | 6 | 8 | 10 | 14 => Some(StorageFault::Unavailable),
                    _ => None,
                }
            } else {
                let code = db.code()?;
                match code.as_ref() {
                    // disk_full
                    "53100" => Some(StorageFault::Full),
                    // too_many_connections, admin/crash shutdown, cannot_connect_now,
                    // read_only_sql_transaction (a standby after a failover)
                    "53300" | "57P01" | "57P02" | "57P03" | "25006" => {
                        Some(StorageFault::Unavailable)
                    }
                    // Class 08: connection exceptions.
                    sqlstate if sqlstate.starts_with("08") => Some(StorageFault::Unavailable),
                    _ => None,
                }
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => Some(StorageFault::Unavailable),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Error {
        Error::Storage { fault: StorageFault::Full, cause: "database or disk is full".into() }
    }

    #[test]
    fn a_refused_write_is_a_fault_until_a_write_succeeds() {
        let health = StorageHealth::new("sqlite:///data/agentd.db");
        assert_eq!(health.fault(), None);
        assert!(health.watch::<()>(Err(full()), true).is_err());
        assert!(health.watch::<()>(Err(full()), false).is_err());
        let (kind, fault) = health.fault().expect("a fault while writes fail");
        assert_eq!(kind, StorageFault::Full);
        assert!(fault.contains("the disk is full"), "{fault}");
        assert!(fault.contains("2 refused"), "{fault}");
        assert_eq!(health.counts(), StorageFaultCounts { full: 2, unavailable: 0 });
        // Other errors say nothing about the storage.
        assert!(health.watch::<()>(Err(Error::Unauthorized), true).is_err());
        assert!(health.fault().is_some());
        // A lease renewed in place proves nothing about room for new data.
        assert_eq!(health.watch(Ok(6), false).ok(), Some(6));
        assert!(health.fault().is_some());
        assert_eq!(health.watch(Ok(7), true).ok(), Some(7));
        assert_eq!(health.fault(), None);
        assert_eq!(health.counts().full, 2, "the count is kept for the metric");
    }

    #[test]
    fn connection_errors_are_the_database_being_unavailable() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(fault_of(&io), Some(StorageFault::Unavailable));
        assert_eq!(fault_of(&sqlx::Error::PoolTimedOut), Some(StorageFault::Unavailable));
        assert_eq!(fault_of(&sqlx::Error::RowNotFound), None);
    }
}
