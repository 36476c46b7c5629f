//! PostgreSQL's audit entries of one workspace, committed together (`store/audit_lanes.rs`):
//! the entries that arrive on a node while a transaction of the workspace's entries is in
//! flight wait there and go as the next transaction, chained in the order they came, written
//! even when their callers stopped waiting. SQLite's one writer takes them in turn; its tests
//! are the audit log's.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::backlog_adds::one_waits_for_the_lock;
use crate::helpers::{Backend, TestDb, app_with, eventually, quiet_app};
use crate::metrics::scrape;

const WAITING: &str = "agentd_audit_entries_waiting";

/// The workspace's entries after `after`, oldest first: each with the transaction that wrote
/// it (PostgreSQL's `xmin`).
async fn written(db: &sqlx::PgPool, workspace: &str, after: i64) -> Vec<(i64, String, String)> {
    sqlx::query_as(
        "SELECT seq, xmin::text, after FROM audit_log WHERE workspace_id = $1 AND seq > $2 \
         ORDER BY seq",
    )
    .bind(workspace)
    .bind(after)
    .fetch_all(db)
    .await
    .unwrap()
}

/// The one workspace's id (the user's own) and the number of its last entry.
async fn the_workspace_and_its_last_entry(db: &sqlx::PgPool) -> (String, i64) {
    sqlx::query_as("SELECT workspace_id, max(seq) FROM audit_log GROUP BY workspace_id")
        .fetch_one(db)
        .await
        .unwrap()
}

/// Takes the workspace's row lock in a transaction of the test's, as an entry in flight does.
async fn lock_the_workspace(
    db: &sqlx::PgPool,
    workspace: &str,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut lock = db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE")
        .bind(workspace)
        .execute(&mut *lock)
        .await
        .unwrap();
    lock
}

/// The test holds the workspace's row lock, as an entry in flight does, while one change and
/// then nine more are made: the nine entries wait on the node and are written by one
/// transaction, chained after the first, and the whole chain verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_waiting_for_their_workspace_commit_together_and_chain_in_order() {
    let Some(app) = quiet_app(Backend::Postgres).await else { return };
    let ada = app.register("ada@example.com").await;
    for n in 0..3 {
        app.create_agent(&ada, &format!("a{n}")).await;
    }
    let db = sqlx::PgPool::connect(&app.db.url_for_process()).await.unwrap();
    let (workspace, before) = the_workspace_and_its_last_entry(&db).await;
    let rename = |n: usize| {
        let (app, ada) = (&app, &ada);
        async move {
            let path = format!("/api/agents/a{}", n % 3);
            let reply = app.patch(&path, ada, json!({"name": format!("Name {n}")})).await;
            reply.status.as_u16()
        }
    };

    let lock = lock_the_workspace(&db, &workspace).await;
    let (statuses, ()) = tokio::join!(
        async {
            let (first, rest) = tokio::join!(rename(0), async {
                eventually(Duration::from_secs(10), "the first entry waits for the lock", || {
                    one_waits_for_the_lock(&db)
                })
                .await;
                futures::future::join_all((1..10).map(rename)).await
            });
            std::iter::once(first).chain(rest).collect::<Vec<_>>()
        },
        async {
            eventually(Duration::from_secs(10), "nine entries wait on the node", || async {
                scrape(&app, None).await.get(WAITING).copied() == Some(9.0)
            })
            .await;
            lock.commit().await.unwrap();
        }
    );
    assert!(statuses.iter().all(|status| *status == 200), "{statuses:?}");

    let entries = written(&db, &workspace, before).await;
    let seqs: Vec<i64> = entries.iter().map(|(seq, _, _)| *seq).collect();
    assert_eq!(seqs, (before + 1..=before + 10).collect::<Vec<_>>(), "numbered with no gap");
    let mut sizes: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, xmin, _) in &entries {
        *sizes.entry(xmin.as_str()).or_default() += 1;
    }
    let mut sizes: Vec<usize> = sizes.into_values().collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1, 9], "the first alone, the nine waiting together");
    let first: Value = serde_json::from_str(&entries[0].2).unwrap();
    assert_eq!(first["name"], "Name 0", "the entry that waited for the lock comes first");
    let verified = app.get("/api/audit/verify", &ada).await;
    assert_eq!(verified.assert_status(200)["intact"], true, "{}", verified.body);
    assert_eq!(verified.body["last_seq"], before + 10);
    assert_eq!(scrape(&app, None).await.get(WAITING).copied(), Some(0.0));
}

/// A change whose request outlived the server's deadline while its entry waited for the
/// workspace's lock is made, and so is its entry, once the lock is free: an entry is never
/// dropped for its caller having stopped waiting (as an add to a backlog is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_whose_caller_stopped_waiting_is_written_all_the_same() {
    let Some(db) = TestDb::create(Backend::Postgres).await else { return };
    let app = app_with(db, |o| {
        o.http.request_timeout = Duration::from_secs(1);
        o.runtime.poll = Duration::from_secs(60);
    })
    .await;
    let ada = app.register("ada@example.com").await;
    app.create_agent(&ada, "a0").await;
    let db = sqlx::PgPool::connect(&app.db.url_for_process()).await.unwrap();
    let (workspace, before) = the_workspace_and_its_last_entry(&db).await;
    let rename = |name: &'static str| {
        let (app, ada) = (&app, &ada);
        async move { app.patch("/api/agents/a0", ada, json!({"name": name})).await.status.as_u16() }
    };

    let lock = lock_the_workspace(&db, &workspace).await;
    let (begun, abandoned) = tokio::join!(rename("Begun"), async {
        eventually(Duration::from_secs(10), "the first entry waits for the lock", || {
            one_waits_for_the_lock(&db)
        })
        .await;
        rename("Abandoned").await
    });
    // Both requests outlived the deadline, the second while its entry waited on the node.
    assert_eq!((begun, abandoned), (408, 408));
    assert_eq!(scrape(&app, None).await.get(WAITING).copied(), Some(1.0));
    lock.commit().await.unwrap();

    eventually(Duration::from_secs(10), "both entries written", || async {
        written(&db, &workspace, before).await.len() == 2
    })
    .await;
    let names: Vec<String> = written(&db, &workspace, before)
        .await
        .iter()
        .map(|(_, _, after)| serde_json::from_str::<Value>(after).unwrap()["name"].to_string())
        .collect();
    assert_eq!(names, [r#""Begun""#, r#""Abandoned""#]);
    let verified = app.get("/api/audit/verify", &ada).await;
    assert_eq!(verified.assert_status(200)["intact"], true, "{}", verified.body);
}
