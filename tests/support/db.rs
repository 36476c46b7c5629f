//! A database of its own for each test, on either backend, and a store over it.

use agentcore::store::{DatabaseUrl, Store};
use sqlx::Connection;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database of its own for one test; dropped with it.
pub struct TestDb {
    pub backend: Backend,
    pub url: DatabaseUrl,
    raw_url: String,
    _dir: Option<tempfile::TempDir>,
    pg: Option<(String, String)>,
}

impl TestDb {
    /// A stand-in naming the same database that owns nothing: dropping it removes nothing.
    pub fn stand_in(&self) -> TestDb {
        TestDb {
            backend: self.backend,
            url: self.url.clone(),
            raw_url: String::new(),
            _dir: None,
            pg: None,
        }
    }

    /// `None` when PostgreSQL is not configured and not required.
    pub async fn create(backend: Backend) -> Option<Self> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temporary directory");
                let raw_url = format!("sqlite://{}", dir.path().join("agentd.db").display());
                Some(Self {
                    backend,
                    url: DatabaseUrl::new(&raw_url),
                    raw_url,
                    _dir: Some(dir),
                    pg: None,
                })
            }
            Backend::Postgres => {
                let admin = match std::env::var("AGENTD_TEST_POSTGRES_URL") {
                    Ok(url) if !url.is_empty() => url,
                    _ if std::env::var("AGENTD_TEST_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") => {
                        panic!(
                            "AGENTD_TEST_REQUIRE_POSTGRES=1 but AGENTD_TEST_POSTGRES_URL is not set"
                        )
                    }
                    _ => {
                        eprintln!(
                            "note: PostgreSQL test skipped: AGENTD_TEST_POSTGRES_URL is not set"
                        );
                        return None;
                    }
                };
                let name = format!("agentd_test_{}", uuid::Uuid::new_v4().simple());
                let mut conn =
                    sqlx::PgConnection::connect(&admin).await.expect("connect to PostgreSQL");
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .expect("create database");
                conn.close().await.ok();
                let raw_url = with_database(&admin, &name);
                Some(Self {
                    backend,
                    url: DatabaseUrl::new(&raw_url),
                    raw_url,
                    _dir: None,
                    pg: Some((admin, name)),
                })
            }
        }
    }

    /// The URL to hand a server process.
    pub fn url_for_process(&self) -> String {
        self.raw_url.clone()
    }

    /// The SQLite database's files (the database, its WAL and shared memory).
    pub fn files(&self) -> Vec<std::path::PathBuf> {
        let Some(dir) = &self._dir else { return Vec::new() };
        ["agentd.db", "agentd.db-wal", "agentd.db-shm"].iter().map(|f| dir.path().join(f)).collect()
    }

    /// A direct connection, for checking what the service wrote.
    pub async fn count(&self, sql: &str, binds: &[&str]) -> i64 {
        with_connection!(self, |conn| {
            let mut query = sqlx::query_scalar::<_, i64>(sql);
            for bind in binds {
                query = query.bind(*bind);
            }
            query.fetch_one(&mut conn).await.unwrap()
        })
    }

    /// One text value read directly, as a copy of the database would show it.
    pub async fn text(&self, sql: &str, binds: &[&str]) -> String {
        with_connection!(self, |conn| {
            let mut query = sqlx::query_scalar::<_, String>(sql);
            for bind in binds {
                query = query.bind(*bind);
            }
            query.fetch_one(&mut conn).await.unwrap()
        })
    }

    /// Moves every lease, due time and throttle `seconds` into the past: as if that much time
    /// had passed on the database's clock, which is the one that judges them.
    pub async fn travel(&self, seconds: i64) {
        let columns = [
            ("agents", "lease_until"),
            ("agents", "next_run_at"),
            ("tasks", "lease_until"),
            ("outbox", "next_attempt_at"),
            ("outbox", "lease_until"),
            ("runtime_nodes", "alive_until"),
        ];
        for (table, column) in columns {
            let moved = match self.backend {
                Backend::Sqlite => {
                    format!("strftime('%Y-%m-%dT%H:%M:%f+00:00', {column}, '-{seconds} seconds')")
                }
                Backend::Postgres => format!("{column} - interval '{seconds} seconds'"),
            };
            let sql = format!("UPDATE {table} SET {column} = {moved} WHERE {column} IS NOT NULL");
            self.execute(&sql, &[]).await;
        }
    }

    /// Brings a new database to the schema of migration `version` and no further: the
    /// database an earlier release made, for upgrade tests.
    pub async fn migrate_to(&self, version: i64) {
        let dir = match self.backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        };
        let path = format!("{}/../agentcore/migrations/{dir}", env!("CARGO_MANIFEST_DIR"));
        let mut migrator = sqlx::migrate::Migrator::new(std::path::Path::new(&path))
            .await
            .expect("the migrations are readable");
        let earlier: Vec<_> =
            migrator.migrations.iter().filter(|m| m.version <= version).cloned().collect();
        assert_eq!(earlier.len() as i64, version, "migrations 1 to {version} exist");
        migrator.migrations = std::borrow::Cow::Owned(earlier);
        match self.backend {
            Backend::Sqlite => {
                let url = format!("{}?mode=rwc", self.raw_url);
                let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
                migrator.run(&mut conn).await.expect("the earlier migrations apply");
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.raw_url).await.unwrap();
                migrator.run(&mut conn).await.expect("the earlier migrations apply");
            }
        }
    }

    pub async fn execute(&self, sql: &str, binds: &[&str]) {
        with_connection!(self, |conn| {
            let mut query = sqlx::query(sql);
            for bind in binds {
                query = query.bind(*bind);
            }
            query.execute(&mut conn).await.unwrap();
        })
    }
}

/// Runs `$body` with `$conn` bound to a fresh connection of the database's own driver.
macro_rules! with_connection {
    ($db:expr, |$conn:ident| $body:block) => {
        match $db.backend {
            Backend::Sqlite => {
                let mut $conn = sqlx::SqliteConnection::connect(&$db.raw_url).await.unwrap();
                $body
            }
            Backend::Postgres => {
                let mut $conn = sqlx::PgConnection::connect(&$db.raw_url).await.unwrap();
                $body
            }
        }
    };
}
use with_connection;

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((admin, name)) = self.pg.take() else { return };
        // Drop runs inside the test's runtime, which cannot block on itself: use a thread.
        let dropped = std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&admin).await.ok()?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut conn)
                    .await
                    .ok()
            })
        });
        let _ = dropped.join();
    }
}

/// `url` with its database name replaced.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}

/// A store on a fresh database, for the storage conformance suite.
pub struct TestStore {
    pub store: Arc<dyn Store>,
    pub db: TestDb,
}

pub async fn store(backend: Backend) -> Option<TestStore> {
    let db = TestDb::create(backend).await?;
    let store = agentcore::store::connect(&db.url).await.expect("open the store");
    Some(TestStore { store, db })
}
