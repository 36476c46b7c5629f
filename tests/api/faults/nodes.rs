//! Three nodes share the work while one of them is killed and restarted again and again:
//! every task is completed and posted exactly once, and no agent ever runs two tasks at once.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{TestDb, backend_tests, eventually};
use crate::process::{Cluster, Server, assert_one_call_at_a_time, completions, posted_titles};

const AGENTS: usize = 12;
const TASKS: usize = 15;
const KILLS: usize = 3;

backend_tests! { db;
    three_nodes_with_one_killed_and_restarted_repeatedly_complete_every_task_exactly_once,
}

async fn three_nodes_with_one_killed_and_restarted_repeatedly_complete_every_task_exactly_once(
    db: TestDb,
) {
    let mut cluster =
        Cluster::start(&db, Duration::from_millis(40), "444", "churn@example.com").await;
    for a in 0..AGENTS {
        let id = cluster.add_mapped_agent(a, "4441").await;
        for t in 0..TASKS {
            let body = json!({"title": format!("{id} task {t:02}")});
            let path = format!("/api/agents/{id}/backlog");
            cluster.nodes[a % 3].post(&path, &cluster.token, body, 201).await;
        }
    }
    cluster.start_agents(AGENTS).await;
    let total = (AGENTS * TASKS) as i64;
    let complete = || db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]);
    for kill in 1..=KILLS {
        // Kill the middle node while it holds work, then bring a new process back.
        let goal = total * kill as i64 / (KILLS as i64 + 1);
        eventually(Duration::from_secs(120), "more tasks complete", || async {
            complete().await >= goal
        })
        .await;
        let killed = cluster.nodes.remove(1);
        killed.signal("-KILL").await;
        cluster.nodes.insert(1, Server::start(&cluster.env).await);
    }
    eventually(Duration::from_secs(180), "every task completes", || async {
        complete().await == total
    })
    .await;
    assert_eq!(completions(&db).await, (0, total), "a result was written twice");

    assert_one_call_at_a_time(&cluster.models, AGENTS);
    let results = || posted_titles(&cluster.discord, "4441", " task ");
    eventually(Duration::from_secs(120), "every result is posted", || async {
        results().len() == AGENTS * TASKS
    })
    .await;
    assert!(results().values().all(|n| *n == 1), "a result was posted twice");
    drop(cluster);
}
