//! Outbound webhooks across a `kill -9` of the real process: a delivery is a row made when
//! its event is fanned out, with its `webhook-id` and body, so the process started after the
//! crash sends the next attempt of the same message.
//!
//! The process is killed between attempts, when none is in flight. An attempt in flight at a
//! kill is not recorded: its lease (`webhooks.attempt_timeout_seconds` + 30 s) runs out and it
//! is sent again with the same `webhook-id` (at least once; the receiver deduplicates by it).

use super::*;
use support::webhook_receiver::{WebhookReceiver, verify_all};

backend_tests! { db;
    a_process_killed_between_attempts_loses_nothing,
}

const WAIT: Duration = Duration::from_secs(30);

/// The endpoint's deliveries, newest first, as `server` lists them.
async fn deliveries(server: &Server, token: &str, id: &str) -> Vec<Value> {
    let path = format!("/api/webhooks/{id}/deliveries");
    let (status, page) = server.send(reqwest::Method::GET, &path, Some(token), Value::Null).await;
    assert_eq!(status, 200, "{page}");
    page["deliveries"].as_array().unwrap().clone()
}

async fn a_process_killed_between_attempts_loses_nothing(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    receiver.answer(&[500]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = [
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", db.url_for_process()),
        // The operator's address policy lets exactly the loopback receiver through.
        ("AGENTD_TOOLS__HTTP__ALLOW_ADDRESSES", receiver.address.to_string()),
        // Long enough between attempts to kill the process in between.
        ("AGENTD_WEBHOOKS__RETRY_SCHEDULE_SECONDS", "5,5,5".into()),
    ];
    let first = Server::start(&env).await;
    let token = first.register("crash-hooks@example.com").await;
    let hook = json!({"url": receiver.url, "events": ["task.added"]});
    let created = first.post("/api/webhooks", &token, hook, 201).await;
    let (id, secret) = (created["id"].as_str().unwrap(), created["secret"].as_str().unwrap());
    let agent = json!({"id": "writer", "name": "Writer", "role_prompt": "Write.", "channel": "c"});
    first.post("/api/agents", &token, agent, 201).await;
    first
        .post("/api/agents/writer/backlog", &token, json!({"title": "Write the notes"}), 201)
        .await;

    receiver.wait_for(1, WAIT).await;
    eventually(WAIT, "the failed first attempt recorded", || async {
        deliveries(&first, &token, id).await.first().is_some_and(|d| d["attempts"] == 1)
    })
    .await;
    let exit = first.signal("-KILL").await;
    assert!(!exit.success(), "killed: {exit:?}");
    assert_eq!(receiver.received().len(), 1, "killed before the second attempt was due");
    // The delivery outlives the process: pending after one attempt, held by no one.
    let pending = "SELECT COUNT(*) FROM webhook_deliveries \
                   WHERE status = 'pending' AND attempts = 1 AND lease_owner IS NULL";
    assert_eq!(db.count(pending, &[]).await, 1);

    let second = Server::start(&env).await;
    let received = receiver.wait_for(2, WAIT).await;
    assert_eq!(received[1].id(), received[0].id(), "the same webhook-id after the kill");
    assert_eq!(received[1].body, received[0].body, "the same body after the kill");
    assert_eq!(received[0].json()["type"], "task.added");
    verify_all(secret, &received).await;
    eventually(WAIT, "the delivery recorded as delivered", || async {
        deliveries(&second, &token, id).await.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await;
    let listed = deliveries(&second, &token, id).await;
    assert_eq!(listed.len(), 1, "one delivery: {listed:?}");
    assert_eq!(listed[0]["attempts"], 2);
    assert_eq!(listed[0]["webhook_id"], received[0].id());
    let statuses: Vec<_> =
        listed[0]["responses"].as_array().unwrap().iter().map(|a| a["status"].clone()).collect();
    assert_eq!(statuses, [json!(200), json!(500)], "latest first");
    assert_eq!(receiver.received().len(), 2, "nothing else was sent");
}
