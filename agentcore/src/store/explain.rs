//! The activity and outbox statements at a million rows: each reads through an index (or the
//! table's own id order, bounded by its limit), never the whole table, and sorts nothing. The
//! plans are each backend's after `ANALYZE`, so the planner weighs real table sizes; on
//! PostgreSQL the generic plan (the one a prepared statement settles on), see `postgres`.

use std::str::FromStr;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection as _, SqliteConnection};

use super::{Backend, DatabaseUrl, SqliteStore};

const ROWS: u64 = 1_000_000;

/// The statement, the indexes its plan must name one of, and whether it may walk the table in id
/// order (a bounded `ORDER BY id LIMIT` batch).
struct Expect {
    name: &'static str,
    sql: String,
    indexes: &'static [&'static str],
    id_order_scan: bool,
    /// PostgreSQL: each parameter's type and a value as the service passes it.
    pg_params: &'static [(&'static str, &'static str)],
}

fn expectations(backend: Backend) -> Vec<Expect> {
    let clock = backend.clock();
    let expect = |name, sql: String, indexes, id_order_scan, pg_params| Expect {
        name,
        sql,
        indexes,
        id_order_scan,
        pg_params,
    };
    const BEFORE: (&str, &str) = ("timestamptz", "'2026-01-06 00:00:00+00'");
    vec![
        expect(
            "activity page",
            super::agents::sql::SELECT_ACTIVITY.into(),
            &["activity_by_agent"],
            false,
            &[
                ("text", "'owner-1'"),
                ("text", "'agent-1'"),
                BEFORE,
                ("bigint", "50"),
                ("timestamptz", "NULL"),
            ],
        ),
        expect(
            "activity prune",
            super::retention::sql::PRUNE_ACTIVITY.into(),
            &[],
            true,
            &[BEFORE, ("bigint", "500")],
        ),
        expect(
            "outbox lanes",
            backend.outbox_lanes().into(),
            // Through the undelivered posts' partial index (on PostgreSQL a probe a lane).
            &["outbox_lanes", "outbox_pending"],
            false,
            &[],
        ),
        expect(
            "outbox claim",
            super::outbox::sql::claim_post(clock),
            &["outbox_lanes"],
            false,
            &[("text", "'owner-1'"), ("text", "'channel-1'"), ("text", "'node'"), ("float8", "30")],
        ),
        expect(
            "outbox head",
            super::outbox::sql::select_head_due(clock),
            &["outbox_lanes"],
            false,
            &[("text", "'owner-1'"), ("text", "'channel-1'")],
        ),
        expect(
            "outbox prune",
            super::retention::sql::PRUNE_DELIVERED.into(),
            &["outbox_delivered"],
            false,
            &[BEFORE, ("bigint", "500")],
        ),
    ]
}

/// A million activity entries over 100 agents, and a million posts of which a thousand wait,
/// spread over fifty lanes.
async fn fill(conn: &mut SqliteConnection) {
    let fill = [
        format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS}) \
             INSERT INTO activity (owner_id, agent_id, action, details, task_id, created_at) \
             SELECT 'owner-' || (i % 10), 'agent-' || (i % 100), 'task_finished', 'done', NULL, \
             strftime('%Y-%m-%dT%H:%M:%f+00:00', '2026-01-01', printf('+%d seconds', i)) FROM n"
        ),
        format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS}) \
             INSERT INTO outbox (owner_id, agent_id, guild_id, channel_id, nonce, payload, \
             next_attempt_at, created_at, delivered_at, message_id) \
             SELECT 'owner-' || (i % 10), 'agent-' || (i % 100), 'guild', 'channel-' || (i % 50), \
             'nonce-' || i, '{{}}', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', \
             CASE WHEN i % 997 = 0 THEN NULL ELSE \
             strftime('%Y-%m-%dT%H:%M:%f+00:00', '2026-01-01', printf('+%d seconds', i)) END, \
             CASE WHEN i % 997 = 0 THEN NULL ELSE 'message-' || i END FROM n"
        ),
        "ANALYZE".to_owned(),
    ];
    for statement in fill {
        sqlx::query(&statement).execute(&mut *conn).await.unwrap();
    }
}

#[tokio::test]
async fn activity_and_outbox_statements_use_their_indexes_at_a_million_rows() {
    let dir = tempfile::tempdir().unwrap();
    let url = DatabaseUrl::sqlite_file(&dir.path().join("explain.db"));
    // Opening the store applies the migrations.
    drop(SqliteStore::connect(&url).await.unwrap());
    let options = SqliteConnectOptions::from_str(url.expose()).unwrap().foreign_keys(false);
    let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
    fill(&mut conn).await;

    let mut wrong = Vec::new();
    for expect in expectations(Backend::Sqlite) {
        let steps: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(&format!("EXPLAIN QUERY PLAN {}", expect.sql))
                .fetch_all(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", expect.name));
        let plan: Vec<String> = steps.into_iter().map(|(_, _, _, detail)| detail).collect();
        let text = plan.join(" / ");
        let reads_table_whole = plan.iter().any(|step| {
            let scan = step.starts_with("SCAN activity") || step.starts_with("SCAN outbox");
            // `SCAN t` alone walks the table in id order; with an index it names it.
            let id_order = step.ends_with("activity") || step.ends_with("outbox");
            let allowed = step.contains("INDEX") || (id_order && expect.id_order_scan);
            scan && !allowed
        });
        let sorts = text.contains("TEMP B-TREE");
        let named = expect.indexes.is_empty() || expect.indexes.iter().any(|i| text.contains(*i));
        if reads_table_whole || sorts || !named {
            wrong.push(format!("{}: {text}", expect.name));
        }
    }
    assert!(wrong.is_empty(), "plans that do not use their indexes:\n{}", wrong.join("\n"));
}

/// The same statements on PostgreSQL, in a database of their own on the server the API tests
/// use (`AGENTD_TEST_POSTGRES_URL`, an admin URL); skipped with a notice without one, unless
/// `AGENTD_TEST_REQUIRE_POSTGRES=1`.
mod postgres {
    use sqlx::{Connection as _, PgConnection};

    use super::{Expect, ROWS, expectations};
    use crate::store::{Backend, DatabaseUrl};

    /// The same rows as on SQLite. Foreign keys are not checked while filling (replica mode).
    async fn fill(conn: &mut PgConnection) {
        let fill = [
            "SET session_replication_role = replica".to_owned(),
            format!(
                "INSERT INTO activity (owner_id, agent_id, action, details, task_id, created_at) \
                 SELECT 'owner-' || (i % 10), 'agent-' || (i % 100), 'task_finished', 'done', \
                 NULL, timestamptz '2026-01-01 00:00:00+00' + i * interval '1 second' \
                 FROM generate_series(1, {ROWS}) i"
            ),
            format!(
                "INSERT INTO outbox (owner_id, agent_id, guild_id, channel_id, nonce, payload, \
                 next_attempt_at, created_at, delivered_at, message_id) \
                 SELECT 'owner-' || (i % 10), 'agent-' || (i % 100), 'guild', \
                 'channel-' || (i % 50), 'nonce-' || i, '{{}}', timestamptz '2026-01-01 00:00:00+00', \
                 timestamptz '2026-01-01 00:00:00+00', \
                 CASE WHEN i % 997 = 0 THEN NULL \
                 ELSE timestamptz '2026-01-01 00:00:00+00' + i * interval '1 second' END, \
                 CASE WHEN i % 997 = 0 THEN NULL ELSE 'message-' || i END \
                 FROM generate_series(1, {ROWS}) i"
            ),
            "SET session_replication_role = DEFAULT".to_owned(),
            "ANALYZE activity".to_owned(),
            "ANALYZE outbox".to_owned(),
            "SET plan_cache_mode = force_custom_plan".to_owned(),
        ];
        for statement in fill {
            sqlx::query(&statement).execute(&mut *conn).await.unwrap();
        }
    }

    /// The plan of `expect`'s statement, one line a node, or why it is wrong.
    async fn check(conn: &mut PgConnection, n: usize, expect: &Expect) -> Result<(), String> {
        let name = format!("explained_{n}");
        let (types, values): (Vec<&str>, Vec<&str>) = expect.pg_params.iter().copied().unzip();
        let (types, values) = match types.is_empty() {
            true => (String::new(), String::new()),
            false => (format!("({})", types.join(", ")), format!("({})", values.join(", "))),
        };
        sqlx::raw_sql(&format!("PREPARE {name}{types} AS {}", expect.sql))
            .execute(&mut *conn)
            .await
            .map_err(|e| format!("{}: {e}", expect.name))?;
        let lines: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN EXECUTE {name}{values}"))
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| format!("{}: {e}", expect.name))?;
        let text = lines.join(" / ");
        // Its primary key is looked up by id (the claim's `id = $0`) or walked in id order
        // under a limit (the activity prune): neither reads the table whole.
        let reads_table_whole = ["activity", "outbox"]
            .iter()
            .any(|table| text.contains(&format!("Seq Scan on {table}")));
        let sorts = lines
            .iter()
            .any(|line| line.trim_start().trim_start_matches("->  ").starts_with("Sort"));
        let named = expect.indexes.is_empty() || expect.indexes.iter().any(|i| text.contains(*i));
        if reads_table_whole || sorts || !named {
            return Err(format!("{}: {text}", expect.name));
        }
        Ok(())
    }

    #[tokio::test]
    async fn activity_and_outbox_statements_use_their_indexes_at_a_million_rows_on_postgres() {
        let Some(admin) = std::env::var("AGENTD_TEST_POSTGRES_URL").ok().filter(|u| !u.is_empty())
        else {
            assert!(
                std::env::var("AGENTD_TEST_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "AGENTD_TEST_REQUIRE_POSTGRES=1 but AGENTD_TEST_POSTGRES_URL is not set"
            );
            eprintln!("note: PostgreSQL test skipped: AGENTD_TEST_POSTGRES_URL is not set");
            return;
        };
        let database = format!("agentd_explain_{}", uuid::Uuid::now_v7().simple());
        let mut server = PgConnection::connect(&admin).await.unwrap();
        sqlx::raw_sql(&format!("CREATE DATABASE {database}")).execute(&mut server).await.unwrap();
        let (base, query) = admin.split_once('?').map_or((admin.as_str(), ""), |(b, q)| (b, q));
        let base = base.rsplit_once('/').map_or(base, |(server, _)| server);
        let url = match query {
            "" => format!("{base}/{database}"),
            query => format!("{base}/{database}?{query}"),
        };
        // Opening the store applies the migrations.
        crate::store::connect(&DatabaseUrl::new(&url)).await.unwrap().close().await;
        let mut conn = PgConnection::connect(&url).await.unwrap();
        fill(&mut conn).await;
        let mut wrong = Vec::new();
        for (n, expect) in expectations(Backend::Postgres).iter().enumerate() {
            if let Err(plan) = check(&mut conn, n, expect).await {
                wrong.push(plan);
            }
        }
        conn.close().await.ok();
        sqlx::raw_sql(&format!("DROP DATABASE {database}")).execute(&mut server).await.unwrap();
        assert!(wrong.is_empty(), "plans that do not use their indexes:\n{}", wrong.join("\n"));
    }
}
