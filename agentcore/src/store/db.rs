//! SQL on either backend in ordinary Rust: what an area's queries are written with.
//!
//! An area writes `query(sql).bind(a).bind(b).execute(&mut tx)` as it would with sqlx, and
//! [`query_as`] and [`query_scalar`] likewise; the connection it runs on ([`Ex`]: a
//! transaction, a read connection or the writer pool) says which backend, and the arguments
//! are encoded for that backend when the statement runs. Nothing is generic over
//! `sqlx::Database`, so an area needs no where-clauses and no macro: the backends' SQL
//! differences are methods of [`Backend`](super::Backend) (`dialect.rs`), their connections
//! come from [`SqlStore`].
//!
//! Why not sqlx's own `Any` driver: it has no date-time or JSON types and checks types at
//! run time. Why not generic code over `sqlx::Database`: every function would restate half of
//! sqlx in its bounds. What this costs: one small vector of arguments per statement.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnection, PgRow};
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use sqlx::{Arguments as _, FromRow, Pool, Postgres, Sqlite, Transaction};
use tokio::sync::Notify;

use super::add_lanes::AddLanes;
use super::audit_lanes::AuditLanes;
use super::finish_lanes::FinishLanes;
use super::readers::Read;
use super::script::Scripts;
use super::wake_after_commit::{SendOnDrop, WakeAfterCommit};
use super::{Backend, Notice, StorageHealth, Wake};
use crate::error::Result;

/// What a backend's store gives the areas: its dialect, its connections and its health.
pub(crate) trait SqlStore: Send + Sync {
    fn dialect(&self) -> Backend;
    fn storage_health(&self) -> &StorageHealth;
    /// The pool writes that need no transaction go to.
    fn writer(&self) -> Ex<'_>;
    /// A connection for a plain read (`readers.rs`).
    fn read(&self) -> impl Future<Output = Result<Reader>> + Send;
    /// A transaction that may write (on SQLite it takes the write lock up front).
    fn begin_write(&self) -> impl Future<Output = Result<Tx>> + Send;
    /// SQLite's batcher of whole transactions (`script.rs`); None on PostgreSQL.
    fn scripts(&self) -> Option<&Scripts>;
    /// Told after each write transaction commits, where events are numbered after their
    /// commit (PostgreSQL: see `EventStore::number_events`); None on SQLite.
    fn commits(&self) -> Option<&Arc<Notify>>;
    /// PostgreSQL's lanes of adds, each agent's waiting adds committed together
    /// (`add_lanes.rs`); None on SQLite, whose adds are scripts.
    fn adds(&self) -> Option<&AddLanes>;
    /// PostgreSQL's lanes of audit entries, each workspace's waiting entries committed
    /// together (`audit_lanes.rs`); None on SQLite, whose one writer takes them in turn.
    fn audits(&self) -> Option<&AuditLanes>;
    /// The lanes of finished tasks, the node's waiting finishes committed together
    /// (`finish_lanes.rs`).
    fn finishes(&self) -> &FinishLanes;
    /// Starts listening for other nodes' wake-ups, where the backend has them.
    fn listener(
        &self,
        wake: Wake,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::task::JoinHandle<()>>;
    fn close_pools(&self) -> impl Future<Output = ()> + Send;
}

/// A connection a statement runs on.
pub(crate) enum Ex<'c> {
    Sqlite(&'c mut SqliteConnection),
    SqlitePool(&'c Pool<Sqlite>),
    Postgres(&'c mut PgConnection),
    PostgresPool(&'c Pool<Postgres>),
}

impl Ex<'_> {
    pub(crate) fn dialect(&self) -> Backend {
        match self {
            Ex::Sqlite(_) | Ex::SqlitePool(_) => Backend::Sqlite,
            Ex::Postgres(_) | Ex::PostgresPool(_) => Backend::Postgres,
        }
    }
}

impl<'c, 'a: 'c> From<&'c mut Ex<'a>> for Ex<'c> {
    fn from(ex: &'c mut Ex<'a>) -> Self {
        match ex {
            Ex::Sqlite(conn) => Ex::Sqlite(conn),
            Ex::SqlitePool(pool) => Ex::SqlitePool(pool),
            Ex::Postgres(conn) => Ex::Postgres(conn),
            Ex::PostgresPool(pool) => Ex::PostgresPool(pool),
        }
    }
}

impl<'c> From<&'c mut SqliteConnection> for Ex<'c> {
    fn from(conn: &'c mut SqliteConnection) -> Self {
        Ex::Sqlite(conn)
    }
}

impl<'c> From<&'c mut PgConnection> for Ex<'c> {
    fn from(conn: &'c mut PgConnection) -> Self {
        Ex::Postgres(conn)
    }
}

/// A write transaction on either backend; PostgreSQL's, once it has committed, tells the
/// store's `commits` and sends the wake-ups it noted.
pub(crate) enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>, AfterCommit),
}

/// What begins a write transaction, apart from its store: a lane's task keeps one.
#[derive(Debug, Clone)]
pub(crate) enum Begin {
    /// `BEGIN IMMEDIATE` on the one writer connection.
    Sqlite(Pool<Sqlite>),
    Postgres {
        pool: Pool<Postgres>,
        commits: Arc<Notify>,
        wakes: Arc<WakeAfterCommit>,
    },
}

impl Begin {
    /// [`SqlStore::begin_write`].
    pub(crate) async fn begin(&self) -> Result<Tx> {
        Ok(match self {
            Begin::Sqlite(writer) => Tx::Sqlite(writer.begin_with("BEGIN IMMEDIATE").await?),
            Begin::Postgres { pool, commits, wakes } => {
                let after = AfterCommit {
                    commits: Arc::clone(commits),
                    wakes: Arc::clone(wakes),
                    noted: Vec::new(),
                };
                Tx::Postgres(pool.begin().await?, after)
            }
        })
    }
}

/// What a PostgreSQL transaction does once it has committed.
pub(crate) struct AfterCommit {
    /// The store's: told of every commit (events want numbers).
    pub(crate) commits: Arc<Notify>,
    /// The store's sender of wake-ups (`wake_after_commit.rs`).
    pub(crate) wakes: Arc<WakeAfterCommit>,
    /// This transaction's wake-ups.
    pub(crate) noted: Vec<Notice>,
}

impl Tx {
    pub(crate) fn dialect(&self) -> Backend {
        match self {
            Tx::Sqlite(_) => Backend::Sqlite,
            Tx::Postgres(..) => Backend::Postgres,
        }
    }

    /// Wakes the nodes with `notice` once this transaction has committed (PostgreSQL; SQLite's
    /// wake-ups stay in the process, rung by the facade).
    pub(crate) fn wake(&mut self, notice: Notice) {
        if let Tx::Postgres(_, after) = self {
            after.noted.push(notice);
        }
    }

    pub(crate) async fn commit(self) -> Result<()> {
        match self {
            Tx::Sqlite(tx) => tx.commit().await?,
            Tx::Postgres(tx, after) => {
                let AfterCommit { commits, wakes, noted } = after;
                // Sent however the commit ends, cut off by a caller that stopped waiting
                // included: a spare wake-up costs a look, a lost one a poll.
                let _send = SendOnDrop { wakes, notices: noted };
                tx.commit().await?;
                commits.notify_one();
            }
        }
        Ok(())
    }
}

impl<'c> From<&'c mut Tx> for Ex<'c> {
    fn from(tx: &'c mut Tx) -> Self {
        match tx {
            Tx::Sqlite(tx) => Ex::Sqlite(tx),
            Tx::Postgres(tx, _) => Ex::Postgres(tx),
        }
    }
}

/// A connection for plain reads on either backend.
pub(crate) enum Reader {
    Sqlite(Read<Sqlite>),
    Postgres(Read<Postgres>),
}

impl<'c> From<&'c mut Reader> for Ex<'c> {
    fn from(read: &'c mut Reader) -> Self {
        match read {
            Reader::Sqlite(conn) => Ex::Sqlite(conn),
            Reader::Postgres(conn) => Ex::Postgres(conn),
        }
    }
}

/// A value bound to a statement's `$n`.
#[derive(Debug)]
pub(crate) enum Arg<'q> {
    Str(Option<&'q str>),
    String(Option<String>),
    Int(Option<i64>),
    Int32(Option<i32>),
    Float(Option<f64>),
    Bool(Option<bool>),
    Time(Option<DateTime<Utc>>),
}

/// `From` for each type a statement binds, by value and as an option.
macro_rules! args_from {
    ($($variant:ident($ty:ty) = |$v:ident| $into:expr;)*) => {
        $(
            impl<'q> From<$ty> for Arg<'q> {
                fn from($v: $ty) -> Self {
                    Arg::$variant(Some($into))
                }
            }
            impl<'q> From<Option<$ty>> for Arg<'q> {
                fn from(value: Option<$ty>) -> Self {
                    Arg::$variant(value.map(|$v| $into))
                }
            }
        )*
    };
}
args_from! {
    Str(&'q str) = |v| v;
    Str(&'q String) = |v| v.as_str();
    String(String) = |v| v;
    Int(i64) = |v| v;
    Int(&'q i64) = |v| *v;
    Int32(i32) = |v| v;
    Int32(&'q i32) = |v| *v;
    Float(f64) = |v| v;
    Bool(bool) = |v| v;
    Time(DateTime<Utc>) = |v| v;
    Time(&'q DateTime<Utc>) = |v| *v;
}

impl<'q> From<&'q Option<String>> for Arg<'q> {
    fn from(value: &'q Option<String>) -> Self {
        Arg::Str(value.as_deref())
    }
}

/// The arguments in `DB`'s encoding.
fn arguments<'q, DB: sqlx::Database>(
    args: Vec<Arg<'q>>,
) -> std::result::Result<DB::Arguments<'q>, sqlx::Error>
where
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<i32>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<f64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<DateTime<Utc>>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut out = DB::Arguments::<'q>::default();
    for arg in args {
        match arg {
            Arg::Str(value) => out.add(value),
            Arg::String(value) => out.add(value),
            Arg::Int(value) => out.add(value),
            Arg::Int32(value) => out.add(value),
            Arg::Float(value) => out.add(value),
            Arg::Bool(value) => out.add(value),
            Arg::Time(value) => out.add(value),
        }
        .map_err(sqlx::Error::Encode)?;
    }
    Ok(out)
}

/// Runs `$call` with `$a` the arguments in the connection's encoding and `$e` the connection.
macro_rules! on_backend {
    ($ex:expr, $args:expr, |$a:ident, $e:ident| $call:expr) => {
        match $ex {
            Ex::Sqlite($e) => {
                let $a = arguments::<Sqlite>($args)?;
                $call
            }
            Ex::SqlitePool($e) => {
                let $a = arguments::<Sqlite>($args)?;
                $call
            }
            Ex::Postgres($e) => {
                let $a = arguments::<Postgres>($args)?;
                $call
            }
            Ex::PostgresPool($e) => {
                let $a = arguments::<Postgres>($args)?;
                $call
            }
        }
    };
}

type DbResult<T> = std::result::Result<T, sqlx::Error>;

/// A statement whose rows, if any, are not read.
#[must_use = "a statement does nothing until it runs"]
pub(crate) struct Query<'q> {
    sql: &'q str,
    args: Vec<Arg<'q>>,
}

pub(crate) fn query(sql: &str) -> Query<'_> {
    Query { sql, args: Vec::new() }
}

/// What a statement changed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    rows_affected: u64,
}

impl Done {
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows_affected
    }
}

impl<'q> Query<'q> {
    pub(crate) fn bind(mut self, value: impl Into<Arg<'q>>) -> Self {
        self.args.push(value.into());
        self
    }

    /// Binds each of `values` in turn.
    pub(crate) fn bind_all(mut self, values: impl IntoIterator<Item = Arg<'q>>) -> Self {
        self.args.extend(values);
        self
    }

    /// The rows, each to be read as one or several records ([`Rows::get`]).
    pub(crate) async fn fetch_all(self, ex: impl Into<Ex<'_>>) -> DbResult<Rows> {
        Ok(on_backend!(ex.into(), self.args, |a, e| {
            sqlx::query_with(self.sql, a).fetch_all(e).await?.into()
        }))
    }

    pub(crate) async fn execute(self, ex: impl Into<Ex<'_>>) -> DbResult<Done> {
        let rows_affected = on_backend!(ex.into(), self.args, |a, e| {
            sqlx::query_with(self.sql, a).execute(e).await?.rows_affected()
        });
        Ok(Done { rows_affected })
    }
}

/// Rows read whole, for a statement whose rows hold more than one record (a join).
pub(crate) enum Rows {
    Sqlite(Vec<SqliteRow>),
    Postgres(Vec<PgRow>),
}

impl From<Vec<SqliteRow>> for Rows {
    fn from(rows: Vec<SqliteRow>) -> Self {
        Rows::Sqlite(rows)
    }
}

impl From<Vec<PgRow>> for Rows {
    fn from(rows: Vec<PgRow>) -> Self {
        Rows::Postgres(rows)
    }
}

impl Rows {
    pub(crate) fn len(&self) -> usize {
        match self {
            Rows::Sqlite(rows) => rows.len(),
            Rows::Postgres(rows) => rows.len(),
        }
    }

    /// Row `index` read as `O` (from the columns `O` names); None past the last row.
    pub(crate) fn get<O: Record>(&self, index: usize) -> Option<DbResult<O>> {
        match self {
            Rows::Sqlite(rows) => rows.get(index).map(O::from_row),
            Rows::Postgres(rows) => rows.get(index).map(O::from_row),
        }
    }
}

/// A row type both backends decode (`#[derive(sqlx::FromRow)]` gives both).
pub(crate) trait Record:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}
impl<T> Record for T where
    T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}

/// A statement whose rows are read as `O`.
#[must_use = "a statement does nothing until it runs"]
pub(crate) struct QueryAs<'q, O> {
    sql: &'q str,
    args: Vec<Arg<'q>>,
    rows: std::marker::PhantomData<fn() -> O>,
}

pub(crate) fn query_as<O: Record>(sql: &str) -> QueryAs<'_, O> {
    QueryAs { sql, args: Vec::new(), rows: std::marker::PhantomData }
}

impl<'q, O: Record> QueryAs<'q, O> {
    pub(crate) fn bind(mut self, value: impl Into<Arg<'q>>) -> Self {
        self.args.push(value.into());
        self
    }

    /// Binds each of `values` in turn.
    pub(crate) fn bind_all(mut self, values: impl IntoIterator<Item = Arg<'q>>) -> Self {
        self.args.extend(values);
        self
    }

    pub(crate) async fn fetch_one(self, ex: impl Into<Ex<'_>>) -> DbResult<O> {
        on_backend!(ex.into(), self.args, |a, e| sqlx::query_as_with(self.sql, a)
            .fetch_one(e)
            .await)
    }

    pub(crate) async fn fetch_optional(self, ex: impl Into<Ex<'_>>) -> DbResult<Option<O>> {
        on_backend!(ex.into(), self.args, |a, e| {
            sqlx::query_as_with(self.sql, a).fetch_optional(e).await
        })
    }

    pub(crate) async fn fetch_all(self, ex: impl Into<Ex<'_>>) -> DbResult<Vec<O>> {
        on_backend!(ex.into(), self.args, |a, e| sqlx::query_as_with(self.sql, a)
            .fetch_all(e)
            .await)
    }
}

/// A statement whose rows are one column, read as `O` (a one-column record).
#[must_use = "a statement does nothing until it runs"]
pub(crate) struct QueryScalar<'q, O>(QueryAs<'q, (O,)>);

pub(crate) fn query_scalar<O>(sql: &str) -> QueryScalar<'_, O>
where
    (O,): Record,
{
    QueryScalar(query_as(sql))
}

impl<'q, O> QueryScalar<'q, O>
where
    (O,): Record,
{
    pub(crate) fn bind(self, value: impl Into<Arg<'q>>) -> Self {
        Self(self.0.bind(value))
    }

    pub(crate) async fn fetch_one(self, ex: impl Into<Ex<'_>>) -> DbResult<O> {
        Ok(self.0.fetch_one(ex).await?.0)
    }

    pub(crate) async fn fetch_optional(self, ex: impl Into<Ex<'_>>) -> DbResult<Option<O>> {
        Ok(self.0.fetch_optional(ex).await?.map(|(value,)| value))
    }

    pub(crate) async fn fetch_all(self, ex: impl Into<Ex<'_>>) -> DbResult<Vec<O>> {
        Ok(self.0.fetch_all(ex).await?.into_iter().map(|(value,)| value).collect())
    }
}
