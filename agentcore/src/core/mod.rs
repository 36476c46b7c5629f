//! The facade: every operation of the service as one async method of [`Core`].
//!
//! Callers (the HTTP server, the CLI, embedders) parse input into domain types first (see
//! [`crate::api`]) and authenticate to get a [`Principal`]; every method that touches a user's
//! resources takes one, and sees nothing that belongs to anyone else.

mod accounts;
mod agents;
mod backlog;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;

use crate::auth::{self, Auth};
use crate::domain::user::UserId;
use crate::error::{Error, Result};
use crate::store::{self, DatabaseUrl, Store};

pub use accounts::Session;

/// What the library needs to run. `agentd` and `agentctl` fill it from their configuration.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub database_url: DatabaseUrl,
    /// Signs tokens. When absent, one is generated on first start and kept in the database, so
    /// every process sharing the database (and every restart) accepts the same tokens.
    pub jwt_secret: Option<SecretString>,
    /// Lifetime of new tokens; `None` means they do not expire.
    pub token_ttl: Option<Duration>,
}

impl CoreConfig {
    pub fn new(database_url: DatabaseUrl) -> Self {
        Self { database_url, jwt_secret: None, token_ttl: None }
    }

    /// The embedded default: `agentd.db` in `data_dir`.
    pub fn sqlite_in(data_dir: &std::path::Path) -> Self {
        Self::new(DatabaseUrl::sqlite_file(&store::default_sqlite_path(data_dir)))
    }
}

/// The platform's data directory for the service (`~/.local/share/agentd` on Linux).
pub fn default_data_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "agentd").map(|dirs| dirs.data_dir().to_path_buf())
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user_id: UserId,
}

/// The service. Cheap to clone; clones share the database pool.
#[derive(Debug, Clone)]
pub struct Core {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    auth: Auth,
}

const JWT_SECRET_NAME: &str = "jwt_secret";

impl Core {
    /// Connects to the database, brings its schema up to date and loads the signing secret.
    pub async fn open(config: CoreConfig) -> Result<Self> {
        let store = store::connect(&config.database_url).await?;
        let secret = match config.jwt_secret {
            Some(secret) => secret,
            None => SecretString::from(
                store.secret_or_insert(JWT_SECRET_NAME, &auth::random_secret()?).await?,
            ),
        };
        let auth = Auth::new(&secret, config.token_ttl);
        Ok(Self { inner: Arc::new(Inner { store, auth }) })
    }

    /// Succeeds when the database answers.
    pub async fn ready(&self) -> Result<()> {
        self.inner.store.ping().await
    }

    pub fn backend(&self) -> store::Backend {
        self.inner.store.backend()
    }

    /// Closes the database pool. Later calls fail.
    pub async fn close(&self) {
        self.inner.store.close().await;
    }

    fn store(&self) -> &dyn Store {
        self.inner.store.as_ref()
    }

    fn auth(&self) -> &Auth {
        &self.inner.auth
    }
}

impl From<&Session> for Principal {
    fn from(session: &Session) -> Self {
        Principal { user_id: session.user.id.clone() }
    }
}

/// Fails unless `principal` still names a user; used where a missing user must read as 401.
fn unauthorized_unless<T>(value: Option<T>) -> Result<T> {
    value.ok_or(Error::Unauthorized)
}
