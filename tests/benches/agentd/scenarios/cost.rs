//! Section 2c: what a task costs the machine in the runtime runs. agentd's CPU
//! (`/proc/<pid>/stat`) and, on PostgreSQL, the server's when it runs on this machine (its
//! postmaster with every child, background workers included, the ended ones too), the
//! statements the run's database ran (`pg_stat_statements`, `BEGIN` and `COMMIT` counted, when
//! the server preloads it) and its transactions (`pg_stat_database`, read after a quiet wait:
//! backends report those counters when idle, within ten seconds).

use super::*;
use crate::server::cpu_seconds;

/// The counters at one moment.
pub(crate) struct Costs {
    agentd: f64,
    postgres: Option<f64>,
    statements: Option<i64>,
    transactions: Option<i64>,
}

/// How long an idle PostgreSQL backend may hold its transaction counts before reporting them.
const STATS_SETTLE: Duration = Duration::from_secs(11);

impl Costs {
    /// Before a run: once the setup's transaction counts are reported.
    pub(crate) async fn before(server: &Agentd, backend: Backend) -> Self {
        if backend == Backend::Postgres {
            tokio::time::sleep(STATS_SETTLE).await;
        }
        Self::now(server, backend).await
    }

    /// After a run: the CPU and the statements at once, the transactions once reported (the
    /// wait's few background transactions count against the run).
    pub(crate) async fn after(server: &Agentd, backend: Backend) -> Self {
        let mut costs = Self::now(server, backend).await;
        if backend == Backend::Postgres {
            tokio::time::sleep(STATS_SETTLE).await;
            costs.transactions = Self::now(server, backend).await.transactions;
        }
        costs
    }

    async fn now(server: &Agentd, backend: Backend) -> Self {
        let agentd = cpu_seconds(server.pid());
        if backend == Backend::Sqlite {
            return Self { agentd, postgres: None, statements: None, transactions: None };
        }
        let database = database_counts(server).await;
        Self {
            agentd,
            postgres: database.postmaster.and_then(postgres_cpu),
            statements: database.statements,
            transactions: database.transactions,
        }
    }
}

/// What the run's database reports.
struct DatabaseCounts {
    /// The server's main process, when it runs on this machine.
    postmaster: Option<u32>,
    /// The run's statements, leaving out the bench's own reads of them.
    statements: Option<i64>,
    transactions: Option<i64>,
}

async fn database_counts(server: &Agentd) -> DatabaseCounts {
    use sqlx::Connection as _;
    let none = DatabaseCounts { postmaster: None, statements: None, transactions: None };
    let url = server.db.url_for_process();
    let Ok(mut conn) = sqlx::PgConnection::connect(&url).await else { return none };
    let _ =
        sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").execute(&mut conn).await;
    let statements = sqlx::query_scalar::<_, i64>(
        "SELECT CAST(COALESCE(SUM(calls), 0) AS BIGINT) FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         AND query NOT LIKE '%pg_stat%' AND query NOT LIKE 'CREATE EXTENSION%'",
    )
    .fetch_one(&mut conn)
    .await
    .ok();
    let transactions = sqlx::query_scalar::<_, i64>(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database \
         WHERE datname = current_database()",
    )
    .fetch_one(&mut conn)
    .await
    .ok();
    let backend = sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .ok()
        .and_then(|pid| u32::try_from(pid).ok());
    conn.close().await.ok();
    DatabaseCounts { postmaster: backend.and_then(parent_postgres), statements, transactions }
}

/// The parent of `pid` when both are `postgres` processes of this machine: a backend's
/// postmaster.
fn parent_postgres(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let parent: u32 = status.lines().find_map(|l| l.strip_prefix("PPid:"))?.trim().parse().ok()?;
    let named = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres")
    };
    (named(pid) && named(parent)).then_some(parent)
}

/// CPU seconds of the server: its postmaster, the children it has reaped (backends that
/// ended) and those alive now.
fn postgres_cpu(postmaster: u32) -> Option<f64> {
    let own = ticks(postmaster)?;
    let children: f64 = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent(*pid) == Some(postmaster))
        .filter_map(|pid| ticks(pid).map(|(used, _)| used))
        .sum();
    Some((own.0 + own.1 + children) / TICKS_PER_SECOND)
}

/// `(utime + stime, cutime + cstime)` of `pid`, in clock ticks.
fn ticks(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<f64> = after.split_whitespace().map(|f| f.parse().unwrap_or(0.0)).collect();
    // Fields 14 to 17 of the line (utime, stime, cutime, cstime): 12 to 15 after the name.
    Some((fields.get(11)? + fields.get(12)?, fields.get(13)? + fields.get(14)?))
}

/// The parent process of `pid`, from its `stat` line.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].split_whitespace().nth(1)?.parse().ok()
}

/// `sysconf(_SC_CLK_TCK)`, as `server::cpu_seconds` takes it.
const TICKS_PER_SECOND: f64 = 100.0;

/// One row of section 2c: the costs between `before` and `after`, per task.
pub(crate) fn cost_row(
    report: &mut Report,
    scenario: &str,
    label: &str,
    tasks: usize,
    before: &Costs,
    after: &Costs,
) {
    let per_task = |a: f64, b: f64| format!("{:.3}", 1000.0 * (b - a) / tasks as f64);
    let count = |a: Option<i64>, b: Option<i64>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.1}", (b - a) as f64 / tasks as f64),
        _ => "—".into(),
    };
    let agentd = per_task(before.agentd, after.agentd);
    let (postgres, together) = match (before.postgres, after.postgres) {
        (Some(a), Some(b)) => (per_task(a, b), per_task(before.agentd + a, after.agentd + b)),
        _ => ("—".into(), agentd.clone()),
    };
    report.row(
        Section::Cost,
        vec![
            scenario.into(),
            label.into(),
            tasks.to_string(),
            agentd,
            postgres,
            together,
            count(before.statements, after.statements),
            count(before.transactions, after.transactions),
        ],
    );
}
