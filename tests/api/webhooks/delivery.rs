//! Deliveries: what arrives for the events of a run, retries with one `webhook-id`, and
//! endpoints that receive nothing once disabled. A process killed between attempts is in
//! `process/webhooks.rs` (the real binary, `kill -9`).

use serde_json::json;

use super::{WAIT, app_reaching, deliveries, endpoint};
use crate::helpers::{TestApp, TestDb, backend_tests, eventually};
use support::webhook_receiver::{WebhookReceiver, verify_all};

backend_tests! { db;
    a_runs_events_arrive_as_the_stream_tells_them_and_every_delivery_verifies,
    a_receiver_that_fails_three_times_gets_the_event_four_times_with_one_id,
    a_disabled_endpoint_receives_nothing,
}

async fn a_runs_events_arrive_as_the_stream_tells_them_and_every_delivery_verifies(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    let app = app_reaching(db, &[&receiver]).await;
    let user = app.register("run-hooks@example.com").await;
    let (_, secret) =
        endpoint(&app, &user, &receiver.url, &["task.added", "task.started", "task.completed"])
            .await;
    app.create_agent(&user, "writer").await;
    let task = app.add_task(&user, "writer", "Write the notes", 0).await;
    let task = task["id"].as_str().unwrap().to_owned();
    app.post_empty("/api/agents/writer/start", &user).await.assert_status(200);

    let received = receiver.wait_for(3, WAIT).await;
    verify_all(&secret, &received).await;
    // Deliveries go out side by side: no order among them is promised.
    let mut types: Vec<String> =
        received.iter().map(|r| r.json()["type"].as_str().unwrap().to_owned()).collect();
    types.sort();
    assert_eq!(types, ["task.added", "task.completed", "task.started"]);
    for webhook in &received {
        let body = webhook.json();
        assert_eq!(body["data"]["type"], body["type"], "data is the stream's event");
        assert_eq!(body["data"]["task_id"], task.as_str());
        assert_eq!(body["data"]["agent_id"], "writer");
        assert!(body["data"]["id"].is_i64() && body["timestamp"].is_string());
    }
    let ids: std::collections::BTreeSet<&str> = received.iter().map(|r| r.id()).collect();
    assert_eq!(ids.len(), 3, "one message id per event");
    // A delivery is counted once its answer is recorded, after the receiver has it.
    let delivered = r#"agentd_webhook_attempts_total{outcome="delivered"}"#;
    eventually(WAIT, "three deliveries counted", || async {
        crate::helpers::sample(&crate::metrics::scrape(&app, None).await, delivered) >= 3.0
    })
    .await;
    assert_eq!(receiver.received().len(), 3, "nothing else was sent");
}

async fn a_receiver_that_fails_three_times_gets_the_event_four_times_with_one_id(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    let app = app_reaching(db, &[&receiver]).await;
    let user = app.register("retries@example.com").await;
    let (id, secret) = endpoint(&app, &user, &receiver.url, &["task.added"]).await;
    receiver.answer(&[500, 500, 500]);
    app.create_agent(&user, "writer").await;
    app.add_task(&user, "writer", "Write the notes", 0).await;

    let received = receiver.wait_for(4, WAIT).await;
    verify_all(&secret, &received).await;
    assert!(received.iter().all(|r| r.id() == received[0].id()), "one webhook-id");
    assert!(received.iter().all(|r| r.body == received[0].body), "the same body");
    eventually(WAIT, "the delivery recorded as delivered", || async {
        deliveries(&app, &user, &id).await.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await;
    let listed = deliveries(&app, &user, &id).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["attempts"], 4);
    assert_eq!(listed[0]["webhook_id"], received[0].id());
    let statuses: Vec<_> =
        listed[0]["responses"].as_array().unwrap().iter().map(|a| a["status"].clone()).collect();
    assert_eq!(statuses, [json!(200), json!(500), json!(500), json!(500)], "latest first");
    let shown = app.get(&format!("/api/webhooks/{id}"), &user).await;
    assert_eq!(shown.assert_status(200)["failure_run"], 0, "a success ends the run");
    assert_eq!(receiver.received().len(), 4);
}

async fn a_disabled_endpoint_receives_nothing(db: TestDb) {
    let (paused, failing, control) = (
        WebhookReceiver::start().await,
        WebhookReceiver::start().await,
        WebhookReceiver::start().await,
    );
    let mut app = app_reaching(db, &[&paused, &failing, &control]).await;
    let (db, mut options) = app.stop().await;
    options.webhooks.disable_after = 3;
    app = TestApp::start(db, options).await;
    let user = app.register("disabled@example.com").await;
    let (paused_id, _) = endpoint(&app, &user, &paused.url, &["task.added"]).await;
    let (failing_id, failing_secret) = endpoint(&app, &user, &failing.url, &["task.added"]).await;
    let (_, control_secret) = endpoint(&app, &user, &control.url, &["task.added"]).await;
    let paused_path = format!("/api/webhooks/{paused_id}");
    let off = app.patch(&paused_path, &user, json!({"enabled": false})).await;
    assert_eq!(off.assert_status(200)["enabled"], false);
    failing.answer(&[500, 500, 500]);
    app.create_agent(&user, "writer").await;

    // The failing endpoint is disabled after three failures in a row.
    app.add_task(&user, "writer", "First", 0).await;
    failing.wait_for(3, WAIT).await;
    eventually(WAIT, "the failing endpoint disabled", || async {
        let shown = app.get(&format!("/api/webhooks/{failing_id}"), &user).await;
        shown.body["enabled"] == false
    })
    .await;
    let shown = app.get(&format!("/api/webhooks/{failing_id}"), &user).await;
    let shown = shown.assert_status(200);
    assert_eq!(shown["failure_run"], 3);
    assert!(shown["disabled_reason"].as_str().unwrap().contains("3 failed attempts"));
    // The audit log is written after the change it records (docs/api.md, Audit log).
    eventually(WAIT, "the service's webhook.disabled entry", || async {
        let audit = app.get("/api/audit?action=webhook.disabled", &user).await;
        let audit = audit.assert_status(200).to_string();
        audit.contains(&failing_id) && audit.contains("service")
    })
    .await;

    // A second event reaches only the enabled endpoint.
    app.add_task(&user, "writer", "Second", 0).await;
    let seen = control.wait_for(2, WAIT).await;
    verify_all(&control_secret, &seen).await;
    assert!(paused.received().is_empty(), "disabled by PATCH: nothing arrived");
    assert_eq!(failing.received().len(), 3, "disabled by its failures: nothing more arrived");

    // Enabled again: the run is cleared and what waited is sent (not the second event, made
    // while it was off).
    let failing_path = format!("/api/webhooks/{failing_id}");
    let on = app.patch(&failing_path, &user, json!({"enabled": true})).await;
    let on = on.assert_status(200).clone();
    assert_eq!((on["failure_run"].clone(), on["disabled_reason"].clone()), (json!(0), json!(null)));
    let received = failing.wait_for(4, WAIT).await;
    assert_eq!(received[3].id(), received[0].id());
    verify_all(&failing_secret, &received).await;
    assert!(paused.received().is_empty());
}
