//! Backup and restore of the embedded SQLite database, with the server key that opens the bot
//! tokens stored in it.
//!
//! A backup is `VACUUM INTO`: one consistent copy taken inside a read transaction, so a
//! server may keep running and writing meanwhile. The key file is copied beside it as
//! `<backup>.key`: a database alone cannot open its bot tokens (by design, see `crypto`).
//! A restore refuses to replace a database that a live server uses, and keeps what it
//! replaces. PostgreSQL has `pg_dump` and `pg_restore` for this; the service does not wrap
//! them.

use std::path::{Path, PathBuf};

use crate::core::CoreConfig;
use crate::crypto::KEY_FILE;
use crate::store::{Backend, sqlite_files};

/// Why a backup or restore was refused or failed, in words for the operator.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AdminError(String);

fn fail(message: impl Into<String>) -> AdminError {
    AdminError(message.into())
}

type Result<T> = std::result::Result<T, AdminError>;

/// Where the server key is, as far as a backup is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerKey {
    /// The key file, and its copy beside the backup (or the copy a restore installed).
    File { key: PathBuf, copy: PathBuf },
    /// `secret_key` is configured: the operator keeps it; there is no file to copy.
    Configured,
    /// No key file yet: no bot token was ever stored.
    None,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    pub database: PathBuf,
    pub file: PathBuf,
    pub bytes: u64,
    pub key: ServerKey,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    pub database: PathBuf,
    /// Where the database that was replaced now is, if there was one.
    pub previous: Option<PathBuf>,
    pub key: ServerKey,
    /// Where the key that was replaced now is, if a different one was.
    pub previous_key: Option<PathBuf>,
}

/// The SQLite file `config` names; refuses PostgreSQL with what to use instead.
fn sqlite_path(config: &CoreConfig) -> Result<PathBuf> {
    let backend = config.database_url.backend().map_err(|e| fail(e.to_string()))?;
    if backend == Backend::Postgres {
        return Err(fail(format!(
            "the database is PostgreSQL ({}): back it up with pg_dump (for example `pg_dump \
             --format=custom --file=agentd.dump <database url>`) and restore it with pg_restore. \
             Keep the server key with the dump: {}",
            config.database_url.redacted(),
            key_location(config)
        )));
    }
    sqlite_files::path_of(&config.database_url).map_err(fail)
}

fn key_location(config: &CoreConfig) -> String {
    match config.secret_key {
        Some(_) => "the value of secret_key (AGENTD_SECRET_KEY), which is configured".into(),
        None => config.data_dir.join(KEY_FILE).display().to_string(),
    }
}

/// Copies the database `config` names to `file` (which must not exist), consistently, while
/// a server may be using it; copies the key file to `<file>.key`.
pub async fn backup(config: &CoreConfig, file: &Path) -> Result<BackupReport> {
    let database = sqlite_path(config)?;
    if !database.exists() {
        return Err(fail(format!("there is no database at {}", database.display())));
    }
    if file.exists() {
        return Err(fail(format!("{} exists already; name a new file", file.display())));
    }
    let key_copy = with_suffix(file, ".key");
    if key_copy.exists() {
        return Err(fail(format!("{} exists already; name a new file", key_copy.display())));
    }
    sqlite_files::copy_into(&database, file).await.map_err(fail)?;
    restrict(file)?;
    sqlite_files::check(file).await.map_err(fail)?;
    let bytes = std::fs::metadata(file).map_err(|e| fail(e.to_string()))?.len();
    let key = match &config.secret_key {
        Some(_) => ServerKey::Configured,
        None => {
            let key = config.data_dir.join(KEY_FILE);
            if key.exists() {
                copy_private(&key, &key_copy)?;
                ServerKey::File { key, copy: key_copy }
            } else {
                ServerKey::None
            }
        }
    };
    Ok(BackupReport { database, file: file.to_path_buf(), bytes, key })
}

/// Replaces the database `config` names with the backup `file`, unless a live server uses
/// it. What it replaces is kept beside it (`<database>.before-restore-<time>`), and so is a
/// different key file; the backup's `<file>.key`, if any, becomes the server key.
pub async fn restore(config: &CoreConfig, file: &Path) -> Result<RestoreReport> {
    let database = sqlite_path(config)?;
    if !file.exists() {
        return Err(fail(format!("there is no backup at {}", file.display())));
    }
    sqlite_files::check(file).await.map_err(fail)?;
    if database.exists() {
        refuse_if_served(&database).await?;
    }
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let incoming = with_suffix(&database, ".restoring");
    std::fs::copy(file, &incoming).map_err(|e| fail(format!("cannot copy the backup: {e}")))?;
    std::fs::File::open(&incoming).and_then(|f| f.sync_all()).map_err(|e| fail(e.to_string()))?;
    restrict(&incoming)?;
    let previous = if database.exists() {
        let previous = with_suffix(&database, &format!(".before-restore-{stamp}"));
        std::fs::rename(&database, &previous).map_err(|e| fail(e.to_string()))?;
        // A stopped server leaves no WAL; if one is there it belongs to the old database.
        for part in ["-wal", "-shm"] {
            let side = with_suffix(&database, part);
            if side.exists() {
                std::fs::rename(&side, with_suffix(&previous, part))
                    .map_err(|e| fail(e.to_string()))?;
            }
        }
        Some(previous)
    } else {
        None
    };
    std::fs::rename(&incoming, &database).map_err(|e| fail(e.to_string()))?;

    let backup_key = with_suffix(file, ".key");
    let (key, previous_key) = match (&config.secret_key, backup_key.exists()) {
        (Some(_), _) => (ServerKey::Configured, None),
        (None, false) => (ServerKey::None, None),
        (None, true) => {
            let key = config.data_dir.join(KEY_FILE);
            let same = std::fs::read(&key).ok() == std::fs::read(&backup_key).ok();
            let previous_key = if key.exists() && !same {
                let moved = with_suffix(&key, &format!(".before-restore-{stamp}"));
                std::fs::rename(&key, &moved).map_err(|e| fail(e.to_string()))?;
                Some(moved)
            } else {
                None
            };
            if !same {
                std::fs::create_dir_all(&config.data_dir).map_err(|e| fail(e.to_string()))?;
                copy_private(&backup_key, &key)?;
            }
            (ServerKey::File { key, copy: backup_key }, previous_key)
        }
    };
    Ok(RestoreReport { database, previous, key, previous_key })
}

/// Refuses while a node's heartbeat on `database` is still alive.
async fn refuse_if_served(database: &Path) -> Result<()> {
    match sqlite_files::live_node(database).await.map_err(fail)? {
        Some((node, until)) => Err(fail(format!(
            "a server is running on {} (node {node}, alive until {}): stop it before \
             restoring. If it was killed, its heartbeat runs out at that time.",
            database.display(),
            until.to_rfc3339()
        ))),
        None => Ok(()),
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Copies a secret file to a new file readable by its owner only.
fn copy_private(from: &Path, to: &Path) -> Result<()> {
    let key =
        std::fs::read(from).map_err(|e| fail(format!("cannot read {}: {e}", from.display())))?;
    crate::crypto::write_private(to, &String::from_utf8_lossy(&key))
        .map_err(|e| fail(format!("cannot write {}: {e}", to.display())))
}

/// The database holds password hashes and sealed tokens: owner only.
fn restrict(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}
