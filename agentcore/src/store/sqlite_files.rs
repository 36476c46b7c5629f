//! A SQLite database as a file, for backup and restore (`crate::backup`): a consistent copy, a
//! check that a file is a whole database of this service, and whether a live server uses one.
//! Each opens its own connection to the file: no store is open while these run.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};

use super::DatabaseUrl;

/// What went wrong, in words for the operator.
pub(crate) type Failure = String;

/// The file a SQLite URL names; refuses an in-memory database.
pub(crate) fn path_of(url: &DatabaseUrl) -> Result<PathBuf, Failure> {
    let options = SqliteConnectOptions::from_str(url.expose())
        .map_err(|e| format!("the database URL is not a SQLite URL: {e}"))?;
    let path = options.get_filename().to_path_buf();
    if path.as_os_str().is_empty() || url.expose().contains(":memory:") {
        return Err("an in-memory database cannot be backed up or restored".into());
    }
    Ok(path)
}

async fn open(path: &Path, read_only: bool) -> Result<SqliteConnection, Failure> {
    SqliteConnectOptions::new()
        .filename(path)
        .read_only(read_only)
        .busy_timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

/// Copies the database at `database` to `file` with `VACUUM INTO`: one consistent copy taken
/// inside a read transaction, while a server may keep writing.
pub(crate) async fn copy_into(database: &Path, file: &Path) -> Result<(), Failure> {
    let mut conn = open(database, false).await?;
    sqlx::query("VACUUM INTO ?")
        .bind(file.display().to_string())
        .execute(&mut conn)
        .await
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    conn.close().await.ok();
    Ok(())
}

/// Checks that `path` is a whole SQLite database of this service.
pub(crate) async fn check(path: &Path) -> Result<(), Failure> {
    let mut conn = open(path, true).await?;
    let verdict: String =
        sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(&mut conn)
            .await
            .map_err(|e| format!("{} is not a SQLite database: {e}", path.display()))?;
    if verdict != "ok" {
        return Err(format!("{} is damaged: {verdict}", path.display()));
    }
    let migrations: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(&mut conn)
    .await
    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    conn.close().await.ok();
    if migrations == 0 {
        return Err(format!("{} is not a database of this service", path.display()));
    }
    Ok(())
}

/// A node whose heartbeat on `database` is still alive (its id and when it runs out), if any.
pub(crate) async fn live_node(database: &Path) -> Result<Option<(String, DateTime<Utc>)>, Failure> {
    let mut conn = open(database, true).await?;
    let live: Vec<(String, DateTime<Utc>)> =
        sqlx::query_as("SELECT id, alive_until FROM runtime_nodes WHERE alive_until > ?")
            .bind(Utc::now())
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
    conn.close().await.ok();
    Ok(live.into_iter().next())
}
