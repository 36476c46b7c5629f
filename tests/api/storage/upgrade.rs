//! Upgrading a database that holds work: migration 12 changes the tasks' status constraint,
//! which on SQLite means rebuilding the table; the tasks, their steps and their budget holds
//! must all survive it. Migration 13 counts each agent's existing backlog.

use std::borrow::Cow;

use crate::helpers::{Backend, TestDb};

/// The statements that fill a database at migration 11 (the same on both backends).
const FILL: [&str; 6] = [
    "INSERT INTO users (id, email, email_key, name, password_hash, created_at, updated_at) \
     VALUES ('u1', 'a@example.com', 'a@example.com', 'A', 'x', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00')",
    "INSERT INTO agents (owner_id, id, name, status, channel, role_prompt, created_at, updated_at) \
     VALUES ('u1', 'ops', 'Ops', 'active', 'general', 'Run.', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00')",
    "INSERT INTO tasks (id, owner_id, agent_id, title, status, created_at, updated_at, steps, lease_owner) \
     VALUES ('t1', 'u1', 'ops', 'Half done', 'in_progress', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', 1, 'node-a')",
    "INSERT INTO tasks (id, owner_id, agent_id, title, status, created_at, updated_at) \
     VALUES ('t2', 'u1', 'ops', 'Done', 'complete', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00')",
    "INSERT INTO task_steps (task_id, seq, kind, output, duration_ms, created_at) \
     VALUES ('t1', 1, 'model', 'Thinking.', 12, '2026-01-01T00:00:01+00:00')",
    "INSERT INTO budget_holds (task_id, owner_id, agent_id, micros, created_at) \
     VALUES ('t1', 'u1', 'ops', 4400, '2026-01-01T00:00:01+00:00')",
];

/// Counts of tasks, steps, holds and the agent's backlog counts, then the task's status once
/// set to the new one.
const CHECK: [&str; 4] = [
    "SELECT COUNT(*) FROM tasks WHERE id = 't1' AND title = 'Half done' AND steps = 1 AND lease_owner = 'node-a'",
    "SELECT COUNT(*) FROM task_steps WHERE task_id = 't1' AND output = 'Thinking.'",
    "SELECT COUNT(*) FROM budget_holds WHERE task_id = 't1' AND micros = 4400",
    "SELECT COUNT(*) FROM backlog_counts WHERE owner_id = 'u1' AND agent_id = 'ops' \
     AND queued = 0 AND in_progress = 1 AND awaiting_approval = 0 AND complete = 1 AND failed = 0",
];

macro_rules! upgrade {
    ($pool:ty, $migrator:expr, $url:expr) => {{
        let pool = <$pool>::connect($url).await.unwrap();
        let mut before = $migrator;
        before.migrations = Cow::Owned(before.migrations[..11].to_vec());
        before.run(&pool).await.unwrap();
        for statement in FILL {
            sqlx::query(statement).execute(&pool).await.unwrap();
        }
        $migrator.run(&pool).await.unwrap();
        let mut counts = Vec::new();
        for statement in CHECK {
            counts.push(sqlx::query_scalar::<_, i64>(statement).fetch_one(&pool).await.unwrap());
        }
        sqlx::query("UPDATE tasks SET status = 'awaiting_approval' WHERE id = 't1'")
            .execute(&pool)
            .await
            .unwrap();
        let refused = sqlx::query("UPDATE tasks SET status = 'lost' WHERE id = 't1'")
            .execute(&pool)
            .await
            .is_err();
        sqlx::query("DELETE FROM tasks WHERE id = 't1'").execute(&pool).await.unwrap();
        let cascaded: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM task_steps").fetch_one(&pool).await.unwrap();
        pool.close().await;
        (counts, refused, cascaded)
    }};
}

async fn upgrade_keeps_the_work(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else { return };
    let url = db.url_for_process();
    let url = url.as_str();
    let (counts, refused, cascaded) = match backend {
        Backend::Sqlite => {
            let url = format!("{url}?mode=rwc");
            upgrade!(sqlx::SqlitePool, sqlx::migrate!("../agentcore/migrations/sqlite"), &url)
        }
        Backend::Postgres => {
            upgrade!(sqlx::PgPool, sqlx::migrate!("../agentcore/migrations/postgres"), url)
        }
    };
    assert_eq!(counts, [1, 1, 1, 1], "the task, its step and its hold survive, and are counted");
    assert!(refused, "the status is still checked");
    assert_eq!(cascaded, 0, "steps still go with their task");
}

#[tokio::test]
async fn sqlite_upgrade_to_approvals_keeps_tasks_steps_and_holds() {
    upgrade_keeps_the_work(Backend::Sqlite).await;
}

#[tokio::test]
async fn postgres_upgrade_to_approvals_keeps_tasks_steps_and_holds() {
    upgrade_keeps_the_work(Backend::Postgres).await;
}
