//! Adds to one agent on PostgreSQL, committed together (`store/add_lanes.rs`): the adds that
//! arrive while a transaction of adds to the agent is in flight wait on the node and go as the
//! next transaction, one for all of them; a transaction that fails leaves each add to run
//! alone. SQLite's adds are grouped by its script batcher (`store/script.rs`), whatever the
//! agent, and its tests are the backlog's.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, User, app_with, eventually, quiet_app};
use crate::metrics::scrape;

const WAITING: &str = "agentd_task_adds_waiting";

/// How many adds the node holds in its lanes now (`/metrics`).
async fn waiting(app: &TestApp) -> f64 {
    scrape(app, None).await.get(WAITING).copied().unwrap_or(f64::NAN)
}

/// Adds `titles` side by side, each a request of its own; their answers, in order.
async fn add_all(app: &TestApp, user: &User, titles: &[String]) -> Vec<(u16, Value)> {
    futures::future::join_all(titles.iter().map(|title| async move {
        let body = json!({"title": title, "priority": 0});
        let reply = app.post("/api/agents/lane/backlog", user, body).await;
        (reply.status.as_u16(), reply.body.clone())
    }))
    .await
}

/// The transactions that wrote the agent's tasks (PostgreSQL's `xmin`), each with the titles
/// it wrote, in creation order.
async fn transactions(db: &sqlx::PgPool) -> BTreeMap<String, Vec<String>> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT xmin::text, title FROM tasks WHERE agent_id = 'lane' ORDER BY created_at, id",
    )
    .fetch_all(db)
    .await
    .unwrap();
    let mut by_transaction: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (xmin, title) in rows {
        by_transaction.entry(xmin).or_default().push(title);
    }
    by_transaction
}

/// Whether one of the node's connections waits for a lock (the agent's, held by the test).
pub(crate) async fn one_waits_for_the_lock(db: &sqlx::PgPool) -> bool {
    let waiting: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
         AND application_name = 'agentd' AND datname = current_database()",
    )
    .fetch_one(db)
    .await
    .unwrap();
    waiting == 1
}

/// Takes the agent's row lock in a transaction of the test's, as an add in flight does.
async fn lock_the_agent(db: &sqlx::PgPool) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut lock = db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM agents WHERE id = 'lane' FOR UPDATE")
        .execute(&mut *lock)
        .await
        .unwrap();
    lock
}

/// Holds the agent's row lock in a transaction of the test's, as an add in flight does, while
/// one add and then `titles` arrive; releases it once they all wait; their answers.
async fn adds_behind_the_lock(
    app: &TestApp,
    user: &User,
    db: &sqlx::PgPool,
    first: &str,
    titles: &[String],
) -> Vec<(u16, Value)> {
    let lock = lock_the_agent(db).await;
    let (answers, ()) = tokio::join!(
        async {
            let first = [first.to_owned()];
            let (mut first, rest) = tokio::join!(add_all(app, user, &first), async {
                eventually(Duration::from_secs(10), "the first add waits for the lock", || {
                    one_waits_for_the_lock(db)
                })
                .await;
                add_all(app, user, titles).await
            });
            first.extend(rest);
            first
        },
        async {
            eventually(Duration::from_secs(10), "the other adds wait in the lane", || async {
                waiting(app).await == titles.len() as f64
            })
            .await;
            lock.commit().await.unwrap();
        }
    );
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adds_to_one_agent_that_wait_meanwhile_commit_together_and_one_failing_fails_alone() {
    let Some(app) = quiet_app(Backend::Postgres).await else { return };
    let user = app.register("lane@example.com").await;
    app.create_agent(&user, "lane").await;
    let url = app.db.url_for_process();
    let db = sqlx::PgPool::connect(&url).await.unwrap();
    assert_eq!(waiting(&app).await, 0.0);

    // Nineteen adds arrive while the first waits for the agent's lock: one transaction.
    let titles: Vec<String> = (0..19).map(|n| format!("together {n}")).collect();
    let answers = adds_behind_the_lock(&app, &user, &db, "first", &titles).await;
    assert!(answers.iter().all(|(status, _)| *status == 201), "{answers:?}");
    let written = transactions(&db).await;
    let mut sizes: Vec<usize> = written.values().map(Vec::len).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1, 19], "the first alone, the rest together: {written:?}");
    assert_eq!(waiting(&app).await, 0.0);

    // Creation order is the order the adds were written in, and each answer says its time.
    let listed = app.get("/api/agents/lane/backlog", &user).await.assert_status(200).clone();
    let listed = listed["tasks"].as_array().unwrap();
    assert_eq!(listed.len(), 20);
    let time = |task: &Value| {
        chrono::DateTime::parse_from_rfc3339(task["created_at"].as_str().unwrap()).unwrap()
    };
    assert!(listed.windows(2).all(|w| time(&w[0]) < time(&w[1])), "{listed:?}");
    for (_, added) in &answers {
        let stored = listed.iter().find(|t| t["id"] == added["id"]).unwrap();
        assert_eq!(stored["created_at"], added["created_at"], "{added}");
    }

    // One add that the database refuses in a transaction of many: the others are written,
    // each alone, and only that one fails.
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
            IF NEW.title = 'poison' THEN RAISE EXCEPTION 'refused by the test'; END IF; \
            RETURN NEW; END $$; \
         CREATE TRIGGER refuse_poison BEFORE INSERT ON tasks \
            FOR EACH ROW EXECUTE FUNCTION refuse_poison();",
    )
    .execute(&db)
    .await
    .unwrap();
    let mut titles: Vec<String> = (0..9).map(|n| format!("beside {n}")).collect();
    titles.insert(4, "poison".to_owned());
    let answers = adds_behind_the_lock(&app, &user, &db, "second", &titles).await;
    assert_eq!(answers[0].0, 201, "{:?}", answers[0]);
    for ((status, body), title) in answers[1..].iter().zip(&titles) {
        if title == "poison" {
            assert_eq!(*status, 500, "{body}");
        } else {
            assert_eq!(*status, 201, "{title}: {body}");
        }
    }
    let written = transactions(&db).await;
    let tasks: usize = written.values().map(Vec::len).sum();
    assert_eq!(tasks, 20 + 10, "every add but the refused one: {written:?}");
    assert_eq!(written.len(), 2 + 10, "the new ones each alone: {written:?}");
    assert!(written.values().flatten().all(|title| title != "poison"));
    assert_eq!(waiting(&app).await, 0.0);
}

/// An add whose caller stopped waiting while it waited in the lane is not written: the client
/// that tries again gets one task. An add whose transaction had begun is written all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_add_whose_caller_stopped_waiting_in_the_lane_is_not_written() {
    let Some(db) = TestDb::create(Backend::Postgres).await else { return };
    let app = app_with(db, |o| {
        o.http.request_timeout = Duration::from_secs(1);
        o.runtime.poll = Duration::from_secs(60);
    })
    .await;
    let user = app.register("gave-up@example.com").await;
    app.create_agent(&user, "lane").await;
    let db = sqlx::PgPool::connect(&app.db.url_for_process()).await.unwrap();

    let lock = lock_the_agent(&db).await;
    let first = ["begun".to_owned()];
    let (begun, abandoned) = tokio::join!(add_all(&app, &user, &first), async {
        eventually(Duration::from_secs(10), "the first add waits for the lock", || {
            one_waits_for_the_lock(&db)
        })
        .await;
        add_all(&app, &user, &["abandoned".to_owned()]).await
    });
    // Both requests outlived the server's deadline, the second while it waited in the lane.
    assert_eq!(begun[0].0, 408, "{begun:?}");
    assert_eq!(abandoned[0].0, 408, "{abandoned:?}");
    assert_eq!(waiting(&app).await, 1.0);
    lock.commit().await.unwrap();

    eventually(Duration::from_secs(10), "the lane is empty again", || async {
        waiting(&app).await == 0.0 && !transactions(&db).await.is_empty()
    })
    .await;
    // A later add goes through the lane after the dropped one.
    app.add_task(&user, "lane", "later", 0).await;
    let titles: Vec<String> =
        sqlx::query_scalar("SELECT title FROM tasks WHERE agent_id = 'lane' ORDER BY created_at")
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(titles, ["begun", "later"]);
}
