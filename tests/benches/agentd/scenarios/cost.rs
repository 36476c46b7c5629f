//! Section 2c: what a task costs the machine in the runtime runs. agentd's CPU
//! (`/proc/<pid>/stat`) and, on PostgreSQL, the server's (every `postgres` process on this
//! machine, background workers included), the statements the run's database ran
//! (`pg_stat_statements`, `BEGIN` and `COMMIT` counted, when the server preloads it) and its
//! transactions (`pg_stat_database`, read after a quiet wait: backends report those counters
//! when idle, within ten seconds).

use super::*;
use crate::server::cpu_seconds;

/// The counters at one moment.
pub(crate) struct Costs {
    agentd: f64,
    postgres: f64,
    statements: Option<i64>,
    transactions: Option<i64>,
}

/// How long an idle PostgreSQL backend may hold its transaction counts before reporting them.
const STATS_SETTLE: Duration = Duration::from_secs(11);

impl Costs {
    pub(crate) async fn read(server: &Agentd, backend: Backend) -> Self {
        if backend == Backend::Sqlite {
            return Self {
                agentd: cpu_seconds(server.pid()),
                postgres: 0.0,
                statements: None,
                transactions: None,
            };
        }
        tokio::time::sleep(STATS_SETTLE).await;
        let (statements, transactions) = database_counts(server).await;
        Self {
            agentd: cpu_seconds(server.pid()),
            postgres: postgres_cpu(),
            statements,
            transactions,
        }
    }
}

/// The run's statements (leaving out the bench's own reads of them) and transactions.
async fn database_counts(server: &Agentd) -> (Option<i64>, Option<i64>) {
    use sqlx::Connection as _;
    let url = server.db.url_for_process();
    let Ok(mut conn) = sqlx::PgConnection::connect(&url).await else { return (None, None) };
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
    conn.close().await.ok();
    (statements, transactions)
}

/// CPU seconds of every `postgres` process now running.
fn postgres_cpu() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0.0 };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "postgres")
        })
        .map(|pid| std::panic::catch_unwind(|| cpu_seconds(pid)).unwrap_or(0.0))
        .sum()
}

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
    let postgres = if label == name(Backend::Sqlite) {
        "—".into()
    } else {
        per_task(before.postgres, after.postgres)
    };
    let together = per_task(before.agentd + before.postgres, after.agentd + after.postgres);
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
