//! Forgetting what is old: each prune deletes one bounded batch of what is older than its
//! time, and nothing newer; a server prunes at start and hourly, finished tasks and activity
//! only when `retention.finished_days` is set.

use super::*;
use agentcore::store::Prunable;

use crate::helpers::{Backend, TestApp, TestDb, app_with, eventually};

backend_tests! { store;
    each_prune_deletes_a_bounded_batch_of_what_is_older_and_nothing_newer,
}

backend_tests! { db;
    a_server_forgets_old_finished_work_only_when_the_operator_set_a_retention,
}

/// The database's time `days` ago, in the backend's SQL.
fn ago(backend: Backend, days: i64) -> String {
    match backend {
        Backend::Sqlite => format!("strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '-{days} days')"),
        Backend::Postgres => format!("now() - interval '{days} days'"),
    }
}

/// A Stripe event received `days` ago.
async fn old_event(db: &TestDb, id: &str, days: i64) {
    let sql = format!(
        "INSERT INTO billing_events (id, type, created, received_at) \
         VALUES ('{id}', 'customer.subscription.updated', 1, {})",
        ago(db.backend, days)
    );
    db.execute(&sql, &[]).await;
}

async fn each_prune_deletes_a_bounded_batch_of_what_is_older_and_nothing_newer(store: TestStore) {
    let (s, db) = (store.store.as_ref(), &store.db);
    let owner = user("retention@example.com");
    s.insert_user(&owner).await.unwrap();
    s.insert_agent(
        &owner.ws(),
        &new_agent("r", None),
        agentcore::domain::now(),
        &created(),
        unlimited(),
    )
    .await
    .unwrap();
    for title in ["old", "old", "old", "recent", "queued"] {
        let t = task("r", title, 0);
        s.insert_task(
            &owner.ws(),
            &t,
            &NewActivity::for_task(Action::TaskAdded, t.id.as_str(), title),
        )
        .await
        .unwrap();
    }
    for (title, days) in [("old", 40), ("recent", 1)] {
        let sql = format!(
            "UPDATE tasks SET status = 'complete', completed_at = {} WHERE title = '{title}'",
            ago(db.backend, days)
        );
        db.execute(&sql, &[]).await;
    }
    let month_ago = agentcore::domain::now() - Duration::days(30);
    for expected in [2, 1, 0] {
        assert_eq!(s.prune(Prunable::FinishedTasks, month_ago, 2).await.unwrap(), expected);
    }
    let mut left: Vec<String> =
        s.tasks(&owner.ws(), &id("r"), None).await.unwrap().into_iter().map(|t| t.title).collect();
    left.sort();
    assert_eq!(left, ["queued", "recent"]);
    let summary = s.agent(&owner.ws(), &id("r")).await.unwrap().backlog_summary;
    assert_eq!((summary.complete, summary.queued), (1, 1), "the counts follow");

    // Activity: the agent's creation and the first three tasks' entries are old.
    let sql = format!(
        "UPDATE activity SET created_at = {} WHERE details IN ('created', 'old')",
        ago(db.backend, 40)
    );
    db.execute(&sql, &[]).await;
    for expected in [3, 1, 0] {
        assert_eq!(s.prune(Prunable::Activity, month_ago, 3).await.unwrap(), expected);
    }
    let query = agentcore::domain::activity::ActivityQuery::default();
    let details: Vec<String> = s
        .activity(&owner.ws(), &id("r"), &query)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.details)
        .collect();
    assert_eq!(details, ["queued", "recent"]);

    for (n, days) in [(1, 40), (2, 40), (3, 2)] {
        old_event(db, &format!("evt_{n}"), days).await;
    }
    assert_eq!(s.prune(Prunable::BillingEvents, month_ago, 10).await.unwrap(), 2);
    assert_eq!(db.count("SELECT COUNT(*) FROM billing_events", &[]).await, 1);
}

/// How many of the runner's tasks are complete, as the agent view counts them.
async fn complete(app: &TestApp, user: &crate::helpers::User) -> serde_json::Value {
    app.get("/api/agents/runner", user).await.body["backlog_summary"]["complete"].clone()
}

async fn a_server_forgets_old_finished_work_only_when_the_operator_set_a_retention(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let user = app.register("forget@example.com").await;
    let body = serde_json::json!({"id": "runner", "name": "Runner", "role_prompt": "Echo.",
        "channel": "general", "model": "echo", "throttle_seconds": 0});
    app.post("/api/agents", &user, body).await.assert_status(201);
    for n in 0..4 {
        app.add_task(&user, "runner", &format!("done {n}"), 0).await;
    }
    app.post_empty("/api/agents/runner/start", &user).await.assert_status(200);
    eventually(StdDuration::from_secs(20), "four tasks complete", || async {
        complete(&app, &user).await == 4
    })
    .await;
    app.post_empty("/api/agents/runner/stop", &user).await.assert_status(200);
    app.add_task(&user, "runner", "later", 0).await;
    let (db, mut options) = app.stop().await;
    let old = "title IN ('done 0', 'done 1')";
    let sql = format!("UPDATE tasks SET completed_at = {} WHERE {old}", ago(db.backend, 40));
    db.execute(&sql, &[]).await;
    let sql = format!(
        "UPDATE activity SET created_at = {} WHERE task_id IN (SELECT id FROM tasks WHERE {old})",
        ago(db.backend, 40)
    );
    db.execute(&sql, &[]).await;
    let old_entries = format!(
        "SELECT COUNT(*) FROM activity WHERE task_id IN (SELECT id FROM tasks WHERE {old})"
    );
    let before = db.count(&old_entries, &[]).await;
    assert!(before >= 4, "each old task was added, started and completed: {before}");

    // Without a retention the hourly housekeeping runs (the old Stripe event goes) and keeps
    // every task and entry.
    old_event(&db, "evt_old_1", 40).await;
    let app = TestApp::start(db, options.clone()).await;
    eventually(StdDuration::from_secs(10), "the old Stripe event is pruned", || async {
        app.db.count("SELECT COUNT(*) FROM billing_events", &[]).await == 0
    })
    .await;
    assert_eq!(complete(&app, &user).await, 4);
    assert_eq!(app.db.count(&old_entries, &[]).await, before);
    let (db, _) = app.stop().await;

    options.retention = agentcore::RetentionConfig { finished_days: Some(30), audit_days: None };
    let app = TestApp::start(db, options).await;
    eventually(StdDuration::from_secs(10), "the old finished tasks are pruned", || async {
        complete(&app, &user).await == 2
    })
    .await;
    let titles: Vec<String> = app.get("/api/agents/runner/backlog", &user).await.body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(titles, ["done 2", "done 3", "later"]);
    eventually(StdDuration::from_secs(10), "their old activity is pruned", || async {
        app.db.count("SELECT COUNT(*) FROM activity WHERE details LIKE '%done 0%'", &[]).await == 0
    })
    .await;
    let kept =
        app.db.count("SELECT COUNT(*) FROM activity WHERE details LIKE '%done 2%'", &[]).await;
    assert!(kept >= 2, "recent entries stay: {kept}");
}
