//! Outbound webhooks across a `kill -9` of the real process: a delivery is a row made when
//! its event is fanned out, with its `webhook-id` and body, so the process started after the
//! crash sends the next attempt of the same message.
//!
//! Killed between attempts, nothing is lost and nothing sent twice. An attempt in flight at a
//! kill is not recorded: its lease (`webhooks.attempt_timeout_seconds` + 30 s) runs out and it
//! is sent again with the same `webhook-id` (at least once; receivers deduplicate by it).

use super::*;
use support::webhook_receiver::{HOLD, WebhookReceiver, verify_all};

backend_tests! { db;
    a_process_killed_between_attempts_loses_nothing,
    an_attempt_cut_off_by_a_kill_is_sent_again_with_the_same_id,
}

const WAIT: Duration = Duration::from_secs(30);

/// The endpoint's deliveries, newest first, as `server` lists them.
async fn deliveries(server: &Server, token: &str, id: &str) -> Vec<Value> {
    let path = format!("/api/webhooks/{id}/deliveries");
    let (status, page) = server.send(reqwest::Method::GET, &path, Some(token), Value::Null).await;
    assert_eq!(status, 200, "{page}");
    page["deliveries"].as_array().unwrap().clone()
}

/// The settings of a process on `db` that may reach `receiver`, with `more`.
fn hooks_env(
    db: &TestDb,
    data_dir: &tempfile::TempDir,
    receiver: &WebhookReceiver,
    more: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", db.url_for_process()),
        // The operator's address policy lets exactly the loopback receiver through.
        ("AGENTD_TOOLS__HTTP__ALLOW_ADDRESSES", receiver.address.to_string()),
    ];
    env.extend(more.iter().map(|(name, value)| (*name, (*value).to_owned())));
    env
}

/// Registers a user with an endpoint at `receiver` for `task.added`, and adds a task: the
/// user's token, the endpoint's id and its secret.
async fn one_event_for(server: &Server, receiver: &WebhookReceiver) -> (String, String, String) {
    let token = server.register("crash-hooks@example.com").await;
    let hook = json!({"url": receiver.url, "events": ["task.added"]});
    let created = server.post("/api/webhooks", &token, hook, 201).await;
    let (id, secret) = (created["id"].as_str().unwrap(), created["secret"].as_str().unwrap());
    let agent = json!({"id": "writer", "name": "Writer", "role_prompt": "Write.", "channel": "c"});
    server.post("/api/agents", &token, agent, 201).await;
    server
        .post("/api/agents/writer/backlog", &token, json!({"title": "Write the notes"}), 201)
        .await;
    (token, id.to_owned(), secret.to_owned())
}

async fn a_process_killed_between_attempts_loses_nothing(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    receiver.answer(&[500]);
    let data_dir = tempfile::tempdir().unwrap();
    // Long enough between attempts to kill the process in between.
    let retries = [("AGENTD_WEBHOOKS__RETRY_SCHEDULE_SECONDS", "5,5,5")];
    let env = hooks_env(&db, &data_dir, &receiver, &retries);
    let first = Server::start(&env).await;
    let (token, id, secret) = one_event_for(&first, &receiver).await;
    let (token, id, secret) = (token.as_str(), id.as_str(), secret.as_str());

    receiver.wait_for(1, WAIT).await;
    eventually(WAIT, "the failed first attempt recorded", || async {
        deliveries(&first, token, id).await.first().is_some_and(|d| d["attempts"] == 1)
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
        deliveries(&second, token, id).await.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await;
    let listed = deliveries(&second, token, id).await;
    assert_eq!(listed.len(), 1, "one delivery: {listed:?}");
    assert_eq!(listed[0]["attempts"], 2);
    assert_eq!(listed[0]["webhook_id"], received[0].id());
    let statuses: Vec<_> =
        listed[0]["responses"].as_array().unwrap().iter().map(|a| a["status"].clone()).collect();
    assert_eq!(statuses, [json!(200), json!(500)], "latest first");
    assert_eq!(receiver.received().len(), 2, "nothing else was sent");
}

async fn an_attempt_cut_off_by_a_kill_is_sent_again_with_the_same_id(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    receiver.answer(&[HOLD]);
    let data_dir = tempfile::tempdir().unwrap();
    // The attempt is held for its 5 s at most; its lease, 35 s, outlives the process.
    let timeout = [("AGENTD_WEBHOOKS__ATTEMPT_TIMEOUT_SECONDS", "5")];
    let env = hooks_env(&db, &data_dir, &receiver, &timeout);
    let first = Server::start(&env).await;
    let (token, id, secret) = one_event_for(&first, &receiver).await;
    let (token, id, secret) = (token.as_str(), id.as_str(), secret.as_str());

    receiver.wait_for(1, WAIT).await;
    // In flight: leased to the process, no attempt recorded yet.
    let in_flight = "SELECT COUNT(*) FROM webhook_deliveries \
                     WHERE status = 'pending' AND attempts = 0 AND lease_owner IS NOT NULL";
    assert_eq!(db.count(in_flight, &[]).await, 1);
    first.signal("-KILL").await;

    let second = Server::start(&env).await;
    // Sent again once the lease has run out.
    let received = receiver.wait_for(2, Duration::from_secs(60)).await;
    assert_eq!(received[1].id(), received[0].id(), "the same webhook-id after the kill");
    assert_eq!(received[1].body, received[0].body, "the same body after the kill");
    verify_all(secret, &received).await;
    eventually(WAIT, "the delivery recorded as delivered", || async {
        deliveries(&second, token, id).await.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await;
    let listed = deliveries(&second, token, id).await;
    assert_eq!(listed.len(), 1, "one delivery: {listed:?}");
    // The attempt cut off left no record: the one that answered is the only one listed.
    assert_eq!(listed[0]["attempts"], 1);
    assert_eq!(listed[0]["responses"][0]["status"], 200);
    assert_eq!(receiver.received().len(), 2, "nothing else was sent");
}
