//! Wake-ups between nodes, on PostgreSQL: a change made through a node that runs no agents
//! reaches the node that runs the agent at once, not at its next poll. The wake-ups leave after
//! their changes commit (`store/wake_after_commit.rs`): an add's after its lane's `add_tasks`
//! returns (`store/add_lanes.rs`), a transaction's after its commit. SQLite keeps one process per file and its wake-ups in that
//! process: `a_task_added_to_an_idle_active_agent_starts_without_polling` is its case.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{mapped_agent, models, task};
use crate::helpers::{Backend, eventually, quiet_app};

/// Well inside the quiet server's minute between polls.
const AT_ONCE: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_an_add_and_a_stop_through_another_node_reach_the_agents_node_without_polling() {
    let Some(app) = quiet_app(Backend::Postgres).await else { return };
    let user = mapped_agent(&app, "far@example.com", "far", Some("openai:gpt-test")).await;
    let other = app.another_node().await;
    let client = reqwest::Client::new();
    let through_other = |method: Method, path: &str, body: Option<Value>| {
        let mut request =
            client.request(method, format!("{}{path}", other.address)).bearer_auth(&user.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let reply = request.send().await.unwrap();
            let status = reply.status().as_u16();
            (status, reply.json::<Value>().await.unwrap_or(Value::Null))
        }
    };

    // A start there: the agent's update commits, then its wake-up is sent.
    let queued = app.add_task(&user, "far", "Queued before the start", 0).await;
    let (status, _) = through_other(Method::POST, "/api/agents/far/start", None).await;
    assert_eq!(status, 200);
    eventually(AT_ONCE, "the task queued before the start completes", || async {
        task(&app, &user, "far", &queued["id"]).await["status"] == "complete"
    })
    .await;

    // Adds there: the lane's `add_tasks` has committed when its wake-up is sent.
    for n in 0..3 {
        let body = json!({"title": format!("Added elsewhere {n}")});
        let (status, added) =
            through_other(Method::POST, "/api/agents/far/backlog", Some(body)).await;
        assert_eq!(status, 201, "{added}");
        eventually(AT_ONCE, "the task added on the other node completes", || async {
            task(&app, &user, "far", &added["id"]).await["status"] == "complete"
        })
        .await;
    }
    assert_eq!(models(&app).calls().len(), 4);

    // A stop there: the node running the agent lets go of it.
    let (status, _) = through_other(Method::POST, "/api/agents/far/stop", None).await;
    assert_eq!(status, 200);
    eventually(AT_ONCE, "the agent's node lets go of the stopped agent", || async {
        app.core.runtime_stats().agents_running == 0
    })
    .await;
    other.close().await;
}
