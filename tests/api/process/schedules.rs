//! Schedules across real processes: three nodes killed and started again while a schedule
//! fires every second queue exactly one task per fire time; fire times that passed while every
//! node was down queue nothing (`skip`, with one `schedule_missed`) or one task (`run_once`).

use chrono::{DateTime, Timelike, Utc};

use super::*;

backend_tests! { db;
    three_processes_killed_and_restarted_queue_exactly_one_task_per_fire_time,
    fire_times_missed_while_every_process_was_down_queue_none_or_one_task,
}

/// Every-second schedules (enqueue ones too: no minimum period), looked at every 100 ms.
const FAST: [(&str, &str); 3] = [
    ("AGENTD_SCHEDULES__SECONDS_FIELD", "true"),
    ("AGENTD_SCHEDULES__POLL_SECONDS", "0.1"),
    ("AGENTD_QUOTAS__MIN_ENQUEUE_PERIOD_SECONDS", "0"),
];

async fn fires(db: &TestDb) -> i64 {
    db.count("SELECT COUNT(*) FROM schedule_fires", &[]).await
}

async fn three_processes_killed_and_restarted_queue_exactly_one_task_per_fire_time(db: TestDb) {
    let mut cluster =
        Cluster::start_with(&db, Duration::from_millis(5), ("777", "ticks@example.com"), &FAST)
            .await;
    let token = cluster.token.clone();
    let agent = json!({"id": "ticker", "name": "Ticker", "role_prompt": "Tick.", "channel": "c"});
    cluster.nodes[0].post("/api/agents", &token, agent, 201).await;
    cluster.nodes[1].post("/api/agents/ticker/start", &token, Value::Null, 200).await;
    let body = json!({"cron": "* * * * * *", "title": "Tick", "overlap": "enqueue"});
    let schedule = cluster.nodes[2].post("/api/agents/ticker/schedules", &token, body, 201).await;

    // Kill a node, start another, three times over, while the schedule fires every second.
    for round in 0..3 {
        let seen = fires(&db).await;
        eventually(Duration::from_secs(20), "two more fire times queue their tasks", || async {
            fires(&db).await >= seen + 2
        })
        .await;
        let killed = cluster.nodes.remove(round % cluster.nodes.len());
        killed.signal("-KILL").await;
        let seen = fires(&db).await;
        eventually(Duration::from_secs(20), "the others go on firing", || async {
            fires(&db).await >= seen + 2
        })
        .await;
        cluster.nodes.push(Server::start(&cluster.env).await);
    }
    let path = format!("/api/agents/ticker/schedules/{}", schedule["id"].as_str().unwrap());
    cluster.nodes[0].patch(&path, &token, json!({"enabled": false}), 200).await;
    let tasks = db.count("SELECT COUNT(*) FROM tasks", &[]).await;
    eventually(Duration::from_secs(60), "every scheduled task completes", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await >= tasks
    })
    .await;

    let tasks = db.count("SELECT COUNT(*) FROM tasks", &[]).await;
    let distinct = db.count("SELECT COUNT(DISTINCT fire_at) FROM schedule_fires", &[]).await;
    let span = db.count("SELECT MAX(fire_at) - MIN(fire_at) + 1 FROM schedule_fires", &[]).await;
    let linked = db
        .count("SELECT COUNT(*) FROM schedule_fires f JOIN tasks t ON t.id = f.task_id", &[])
        .await;
    assert!(tasks >= 12, "{tasks} tasks");
    assert_eq!(
        (fires(&db).await, distinct, linked),
        (tasks, tasks, tasks),
        "one task per fire time"
    );
    assert_eq!(span, tasks, "no fire time between the first and the last went without its task");
    let fired =
        db.count("SELECT COUNT(*) FROM activity WHERE action = 'schedule_fired'", &[]).await;
    assert_eq!(fired, tasks);
    let complete = db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await;
    assert_eq!(complete, tasks);
}

/// `s1,s2,s3 m h d M *`: the three seconds from `first` on, once (they must share a minute).
fn three_instants(first: DateTime<Utc>) -> String {
    use chrono::Datelike;
    let seconds: Vec<String> = (0..3).map(|n| (first.second() + n).to_string()).collect();
    format!(
        "{} {} {} {} {} *",
        seconds.join(","),
        first.minute(),
        first.hour(),
        first.day(),
        first.month()
    )
}

async fn fire_times_missed_while_every_process_was_down_queue_none_or_one_task(db: TestDb) {
    let data_dir = tempfile::tempdir().unwrap();
    let models = FakeModels::start().await;
    let mut env = runtime_env(&db, &data_dir, &models);
    env.extend(FAST.iter().map(|(name, value)| (*name, (*value).to_owned())));
    env.push(("AGENTD_SCHEDULES__MISSED_AFTER_SECONDS", "1".into()));
    let server = Server::start(&env).await;
    let token = server.register("down@example.com").await;
    for id in ["skipper", "catcher"] {
        let agent = json!({"id": id, "name": id, "role_prompt": "Work.", "channel": "c"});
        server.post("/api/agents", &token, agent, 201).await;
        server.post(&format!("/api/agents/{id}/start"), &token, Value::Null, 200).await;
    }
    // Three fire times a few seconds ahead, within one minute.
    eventually(Duration::from_secs(20), "a minute with room for three fire times", || async {
        Utc::now().second() <= 45
    })
    .await;
    let first = Utc::now().with_nanosecond(0).unwrap() + chrono::Duration::seconds(3);
    let cron = three_instants(first);
    for (id, catch_up) in [("skipper", "skip"), ("catcher", "run_once")] {
        let body = json!({"cron": cron, "title": format!("{id}'s run"), "catch_up": catch_up});
        let schedule = server.post(&format!("/api/agents/{id}/schedules"), &token, body, 201).await;
        assert_eq!(schedule["next_runs"][0]["at"], json!(first), "{schedule}");
    }
    server.signal("-KILL").await;

    // Down over all three, and past `missed_after` (1 s) of the last.
    let late = first + chrono::Duration::seconds(4);
    eventually(Duration::from_secs(20), "the three fire times pass with no node", || async {
        Utc::now() >= late
    })
    .await;
    assert_eq!(fires(&db).await, 0, "nothing fired while every node was down");
    let server = Server::start(&env).await;
    let activity = |id: &'static str, action: &'static str| {
        let server = &server;
        let token = token.clone();
        async move {
            let path = format!("/api/agents/{id}/activity?limit=1000");
            let (_, reply) =
                server.send(reqwest::Method::GET, &path, Some(&token), Value::Null).await;
            reply["entries"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["action"] == action)
                .cloned()
                .collect::<Vec<Value>>()
        }
    };
    eventually(Duration::from_secs(20), "the restarted node looks at both schedules", || async {
        !activity("skipper", "schedule_missed").await.is_empty()
            && !activity("catcher", "schedule_fired").await.is_empty()
    })
    .await;

    let missed = activity("skipper", "schedule_missed").await;
    assert_eq!(missed.len(), 1, "{missed:?}");
    assert!(missed[0]["details"].as_str().unwrap().contains("missed 3 runs"), "{missed:?}");
    let count = "SELECT COUNT(*) FROM tasks WHERE agent_id = $1";
    assert_eq!(db.count(count, &["skipper"]).await, 0, "skip queues nothing for missed times");
    assert_eq!(db.count(count, &["catcher"]).await, 1, "run_once queues one, however many missed");
    let fired = activity("catcher", "schedule_fired").await;
    assert_eq!(fired.len(), 1);
    assert!(fired[0]["details"].as_str().unwrap().contains("catch up on 3 runs"), "{fired:?}");
    assert!(activity("catcher", "schedule_missed").await.is_empty());
    assert!(server.signal("-TERM").await.success());
}
