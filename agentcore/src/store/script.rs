//! SQLite's busiest writes as scripts: whole transactions in one round trip to the database's
//! own thread, and concurrent ones committed together.
//!
//! sqlx runs each statement on the connection's thread and hands the result back to the async
//! caller, which then sends the next statement. A transaction of six statements therefore holds
//! SQLite's single write lock across six hand-offs, each of which waits its turn on tokio's
//! queue behind every other request: under load the lock is held mostly by nobody working.
//! A [`Script`] is a transaction's statements as one multi-statement body that decides in SQL
//! what a transaction in steps decides in Rust between statements; its last statement returns
//! exactly one row, the caller's answer.
//!
//! Scripts go to one batcher task per store ([`Scripts`]), which sends whatever scripts are
//! waiting as one query, `BEGIN IMMEDIATE`, each body (its `$n` renumbered into one argument
//! list), `COMMIT`: one transaction, one WAL commit and one hand-off for the whole group (group
//! commit). Each caller still gets its own row. When a group fails, each of its scripts runs
//! again alone, so one caller's error (a constraint, a fault) is its own. A script runs to its
//! end even when its caller stops waiting (a client that hangs up), so it is never cut between
//! its statements; a connection whose rollback fails after an error is closed.

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Arguments as _, Executor as _, Pool, Sqlite};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};

/// The most scripts committed together: a group's SQL is one prepared statement per size.
const MOST_IN_A_GROUP: usize = 32;

/// One value bound to a script's `$n`, owned so the script can wait for its group.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Text(String),
    MaybeText(Option<String>),
    Int(i64),
    Time(DateTime<Utc>),
}

/// A write transaction's statements; `$n` is `values[n - 1]` in every statement, and the last
/// statement returns exactly one row.
#[derive(Debug)]
pub(crate) struct Script {
    pub body: &'static str,
    pub values: Vec<Value>,
}

struct Job {
    script: Script,
    answer: oneshot::Sender<Result<SqliteRow>>,
}

/// The store's batcher of scripts.
#[derive(Debug, Clone)]
pub(crate) struct Scripts {
    writer: Pool<Sqlite>,
    jobs: mpsc::UnboundedSender<Job>,
}

impl Scripts {
    /// Starts the batcher on the current runtime.
    pub(crate) fn start(writer: Pool<Sqlite>) -> Self {
        let (jobs, waiting) = mpsc::unbounded_channel();
        tokio::spawn(batcher(writer.clone(), waiting));
        Self { writer, jobs }
    }

    /// Runs `script` in the next group; returns its last statement's row.
    pub(crate) async fn run(&self, script: Script) -> Result<SqliteRow> {
        let (answer, row) = oneshot::channel();
        match self.jobs.send(Job { script, answer }) {
            Ok(()) => row.await.map_err(|_| Error::internal("the script batcher stopped"))?,
            // The runtime that started the batcher is gone (a store kept past its runtime):
            // the script runs alone, spawned here.
            Err(mpsc::error::SendError(job)) => {
                let alone = run_alone(self.writer.clone(), job.script);
                tokio::spawn(alone).await.map_err(Error::internal)?
            }
        }
    }
}

async fn batcher(writer: Pool<Sqlite>, mut waiting: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = waiting.recv().await {
        let mut group = vec![first];
        while group.len() < MOST_IN_A_GROUP {
            match waiting.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        if group.len() == 1 {
            let job = group.remove(0);
            job.answer.send(run_alone(writer.clone(), job.script).await).ok();
            continue;
        }
        let scripts: Vec<&Script> = group.iter().map(|job| &job.script).collect();
        let (sql, args) = combined(&scripts);
        match execute(writer.clone(), sql, args).await {
            Ok(rows) if rows.len() == group.len() => {
                for (job, row) in group.into_iter().zip(rows) {
                    job.answer.send(Ok(row)).ok();
                }
            }
            outcome => {
                if let Err(error) = outcome {
                    tracing::debug!(%error, size = group.len(), "a group of scripts failed; each runs alone");
                }
                for job in group {
                    job.answer.send(run_alone(writer.clone(), job.script).await).ok();
                }
            }
        }
    }
}

/// Runs one script in its own transaction.
fn run_alone(writer: Pool<Sqlite>, script: Script) -> BoxFuture<'static, Result<SqliteRow>> {
    Box::pin(async move {
        let (sql, args) = combined(&[&script]);
        let mut rows = execute(writer, sql, args).await?;
        match rows.len() {
            1 => Ok(rows.remove(0)),
            n => Err(Error::internal(format!("a script returned {n} rows, not one"))),
        }
    })
}

/// The scripts' bodies in one transaction, each one's `$n` moved past the values before it.
fn combined(scripts: &[&Script]) -> (String, SqliteArguments<'static>) {
    let mut sql = String::from("BEGIN IMMEDIATE; ");
    let mut args = SqliteArguments::default();
    let mut offset = 0;
    for script in scripts {
        renumber(script.body, offset, &mut sql);
        sql.push_str("; ");
        offset += script.values.len();
        for value in &script.values {
            let added = match value.clone() {
                Value::Text(text) => args.add(text),
                Value::MaybeText(text) => args.add(text),
                Value::Int(int) => args.add(int),
                Value::Time(time) => args.add(time),
            };
            // Adding an owned text, integer or time to SQLite's arguments cannot fail.
            debug_assert!(added.is_ok());
        }
    }
    sql.push_str("COMMIT");
    (sql, args)
}

/// Appends `body` with each `$n` written as `$(n + offset)`. Bodies hold no `$` in literals.
pub(crate) fn renumber(body: &str, offset: usize, out: &mut String) {
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        match rest[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
}

/// Boxed as `Send` where it is made, as `async_trait` does: an `async fn`'s future is not
/// proven `Send` through sqlx's executor lifetimes.
fn execute(
    writer: Pool<Sqlite>,
    sql: String,
    args: SqliteArguments<'static>,
) -> BoxFuture<'static, Result<Vec<SqliteRow>>> {
    Box::pin(async move {
        let mut conn = writer.acquire().await?;
        let result =
            conn.fetch_all(sqlx::query_with::<Sqlite, SqliteArguments<'_>>(&sql, args)).await;
        if result.is_err() {
            // The failed statement is undone by SQLite, the ones before it are not; a failed
            // `BEGIN` left nothing to roll back, which is not a problem.
            if let Err(error) = conn.execute("ROLLBACK").await
                && !error.to_string().contains("no transaction is active")
            {
                tracing::warn!(%error, "cannot roll a failed script back; closing its connection");
                conn.close_on_drop();
            }
        }
        Ok(result?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renumbering_moves_every_parameter_past_the_offset() {
        let mut out = String::new();
        renumber("SELECT $1, $12 FROM t WHERE a = $2 AND b = '%f'", 13, &mut out);
        assert_eq!(out, "SELECT $14, $25 FROM t WHERE a = $15 AND b = '%f'");
    }

    #[test]
    fn scripts_combine_into_one_transaction_with_one_argument_list() {
        let one = Script { body: "SELECT $1", values: vec![Value::Int(1)] };
        let two = Script { body: "SELECT $1, $2", values: vec![Value::Int(2), Value::Int(3)] };
        let (sql, _) = combined(&[&one, &two]);
        assert_eq!(sql, "BEGIN IMMEDIATE; SELECT $1; SELECT $2, $3; COMMIT");
    }
}
