//! The activity and outbox statements at a million rows: each reads through an index (or the
//! table's own id order, bounded by its limit), never the whole table, and sorts nothing. The
//! plans are SQLite's after `ANALYZE`, so the planner weighs real table sizes. PostgreSQL has
//! the same indexes (its migrations); its plans at this size are not checked here.

use std::str::FromStr;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection as _, SqliteConnection};

use super::sql::Clock;
use super::{DatabaseUrl, SqliteStore};

const ROWS: u64 = 1_000_000;

/// The statement, the indexes its plan must name, and whether it may walk the table in id
/// order (a bounded `ORDER BY id LIMIT` batch).
struct Expect {
    name: &'static str,
    sql: String,
    indexes: &'static [&'static str],
    id_order_scan: bool,
}

fn expectations() -> Vec<Expect> {
    let clock: Clock = SqliteStore::CLOCK;
    let expect =
        |name, sql: String, indexes, id_order_scan| Expect { name, sql, indexes, id_order_scan };
    vec![
        expect(
            "activity page",
            super::agents::sql::SELECT_ACTIVITY.into(),
            &["activity_by_agent"],
            false,
        ),
        expect("activity prune", super::retention::sql::PRUNE_ACTIVITY.into(), &[], true),
        expect(
            "outbox lanes",
            super::outbox::sql::SELECT_OUTBOX_LANES.into(),
            &["outbox_lanes"],
            false,
        ),
        expect("outbox claim", super::outbox::sql::claim_post(clock), &["outbox_lanes"], false),
        expect("outbox head", super::outbox::sql::select_head_due(clock), &["outbox_lanes"], false),
        expect(
            "outbox prune",
            super::retention::sql::PRUNE_DELIVERED.into(),
            &["outbox_delivered"],
            false,
        ),
    ]
}

/// A million activity entries over 100 agents, and a million posts of which a thousand wait.
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
             CASE WHEN i % 1000 = 0 THEN NULL ELSE \
             strftime('%Y-%m-%dT%H:%M:%f+00:00', '2026-01-01', printf('+%d seconds', i)) END, \
             CASE WHEN i % 1000 = 0 THEN NULL ELSE 'message-' || i END FROM n"
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
    for expect in expectations() {
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
        let missing: Vec<_> =
            expect.indexes.iter().filter(|index| !text.contains(*index)).collect();
        if reads_table_whole || sorts || !missing.is_empty() {
            wrong.push(format!("{}: {text}", expect.name));
        }
    }
    assert!(wrong.is_empty(), "plans that do not use their indexes:\n{}", wrong.join("\n"));
}
