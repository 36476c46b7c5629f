//! Calls to `/hooks/{id}`: a call signed by the reference library queues one task with the
//! templates filled, and a repeat of it queues nothing; every refused call (bad or missing
//! signature, a timestamp outside the window either way, a body over the bound or not an
//! object, a disabled or unknown trigger, too many calls a minute) writes nothing.

use serde_json::json;

use super::{call, counted, create, entries, headers, now, signature, signed, tasks};
use crate::helpers::{TestApp, backend_tests, standard_webhooks};

backend_tests! { app;
    a_call_signed_by_the_reference_library_queues_one_task_and_a_repeat_none,
    refused_calls_write_nothing,
    a_rotated_secret_stays_valid_for_its_overlap_and_one_rotated_twice_does_not,
    a_trigger_accepts_at_most_sixty_calls_a_minute,
    deliveries_of_one_call_at_once_queue_one_task,
}

async fn a_call_signed_by_the_reference_library_queues_one_task_and_a_repeat_none(app: TestApp) {
    let user = app.register("hooks@example.com").await;
    app.create_agent(&user, "oncall").await;
    let trigger = create(
        &app,
        &user,
        "oncall",
        json!({
            "name": "Alerts",
            "title": "Alert: {{alert.name}} on {{ items.0.host }}",
            "description": "Value {{value}}, firing {{firing}}, labels {{labels}}{{missing}}.",
            "priority": 5
        }),
    )
    .await;
    let (id, secret) = (trigger["id"].as_str().unwrap(), trigger["secret"].as_str().unwrap());
    let body = json!({
        "alert": {"name": "Disk full"}, "items": [{"host": "db-1"}],
        "value": 97.5, "firing": true, "labels": {"team": "ops"}
    })
    .to_string();
    let (message, at) = ("msg_2ZC1cqIiTxnM4kD1", now());
    let signature = match standard_webhooks::python() {
        Some(python) => standard_webhooks::sign(&python, secret, message, at, &body).await,
        None => signature(secret, message, at, &body),
    };
    let sent = headers(message, at, &signature);

    let first = call(&app, id, &sent, body.clone()).await;
    let task_id = first.assert_status(202)["task_id"].as_str().unwrap().to_owned();
    assert_eq!(first.body["duplicate"], false);
    let queued = tasks(&app, &user, "oncall").await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["id"], task_id.as_str());
    assert_eq!(queued[0]["title"], "Alert: Disk full on db-1");
    assert_eq!(queued[0]["description"], r#"Value 97.5, firing true, labels {"team":"ops"}."#);
    assert_eq!(queued[0]["priority"], 5);
    let called = entries(&app, &user, "oncall", "trigger_called").await;
    assert_eq!(called.len(), 1, "one trigger_called entry: {called:?}");
    assert_eq!(called[0]["task_id"], task_id.as_str());
    assert!(called[0]["details"].as_str().unwrap().contains(message), "{called:?}");

    // The same delivery again (a sender's retry): the first one's task, nothing written.
    let again = call(&app, id, &sent, body).await;
    assert_eq!(again.assert_status(200)["task_id"], task_id.as_str());
    assert_eq!(again.body["duplicate"], true);
    assert_eq!(tasks(&app, &user, "oncall").await.len(), 1, "still one task");
    assert_eq!(entries(&app, &user, "oncall", "trigger_called").await.len(), 1);
    assert_eq!(entries(&app, &user, "oncall", "task_added").await.len(), 1);

    let shown = app.get(&format!("/api/triggers/{id}"), &user).await;
    assert_eq!(shown.assert_status(200)["calls"], 1, "a repeat is not counted");
    assert!(shown.body["last_called_at"].is_string());
    assert_eq!((counted(&app, "accepted").await, counted(&app, "duplicate").await), (1.0, 1.0));
}

async fn refused_calls_write_nothing(app: TestApp) {
    let user = app.register("refused@example.com").await;
    app.create_agent(&user, "oncall").await;
    let trigger = create(&app, &user, "oncall", json!({"title": "Alert {{name}}"})).await;
    let (id, secret) = (trigger["id"].as_str().unwrap(), trigger["secret"].as_str().unwrap());
    let other =
        create(&app, &user, "oncall", json!({})).await["secret"].as_str().unwrap().to_owned();
    let body = json!({"name": "cpu"}).to_string();
    let t = now();

    let refusals = [
        ("another trigger's secret", signed(&other, "msg_1", t, &body), body.clone(), 401),
        (
            "a signature over another body",
            signed(secret, "msg_2", t, r#"{"name":"mem"}"#),
            body.clone(),
            401,
        ),
        ("no headers", Vec::new(), body.clone(), 401),
        ("no signature", headers("msg_3", t, ""), body.clone(), 401),
        ("a stale timestamp", signed(secret, "msg_4", t - 400, &body), body.clone(), 401),
        ("a timestamp ahead", signed(secret, "msg_5", t + 400, &body), body.clone(), 401),
        ("an array body", signed(secret, "msg_6", t, "[1]"), "[1]".to_owned(), 400),
        ("a body that is not JSON", signed(secret, "msg_7", t, "cpu"), "cpu".to_owned(), 400),
    ];
    for (case, sent, body, status) in refusals {
        let reply = call(&app, id, &sent, body).await;
        let code = if status == 401 { "invalid_signature" } else { "validation_failed" };
        assert_eq!((reply.status.as_u16(), reply.code()), (status, code), "{case}: {}", reply.body);
        // A signature is refused, not a token: no bearer challenge.
        assert!(!reply.headers.contains_key("www-authenticate"), "{case}: {:?}", reply.headers);
    }
    // Over 64 KiB, signed as it should be: refused for its size.
    let big = json!({"name": "x".repeat(70 * 1024)}).to_string();
    let reply = call(&app, id, &signed(secret, "msg_8", t, &big), big).await;
    reply.assert_error(413, "payload_too_large");
    // An unknown trigger, and one that is not an id at all.
    let unknown = "0196a1b2-0000-7000-8000-000000000000";
    call(&app, unknown, &signed(secret, "msg_9", t, &body), body.clone())
        .await
        .assert_error(404, "trigger_not_found");
    call(&app, "nothing%00here", &[], body.clone()).await.assert_error(404, "trigger_not_found");

    // Disabled: refused once the signature checks, and nothing is kept of the call, so the
    // same delivery is accepted once the trigger is enabled again.
    let path = format!("/api/triggers/{id}");
    app.patch(&path, &user, json!({"enabled": false})).await.assert_status(200);
    let sent = signed(secret, "msg_10", t, &body);
    call(&app, id, &sent, body.clone()).await.assert_error(409, "trigger_disabled");
    call(&app, id, &signed(&other, "msg_10", t, &body), body.clone())
        .await
        .assert_error(401, "invalid_signature");

    assert!(tasks(&app, &user, "oncall").await.is_empty(), "no task");
    for action in ["trigger_called", "task_added"] {
        assert!(entries(&app, &user, "oncall", action).await.is_empty(), "no {action} entry");
    }
    assert_eq!(app.get(&path, &user).await.assert_status(200)["calls"], 0);
    for (outcome, count) in [
        ("invalid_signature", 7.0),
        ("bad_body", 2.0),
        ("too_large", 1.0),
        ("not_found", 2.0),
        ("disabled", 1.0),
        ("accepted", 0.0),
    ] {
        assert_eq!(counted(&app, outcome).await, count, "{outcome}");
    }

    app.patch(&path, &user, json!({"enabled": true})).await.assert_status(200);
    call(&app, id, &sent, body).await.assert_status(202);
    assert_eq!(tasks(&app, &user, "oncall").await[0]["title"], "Alert cpu");
}

async fn a_rotated_secret_stays_valid_for_its_overlap_and_one_rotated_twice_does_not(app: TestApp) {
    let user = app.register("rotate@example.com").await;
    app.create_agent(&user, "oncall").await;
    let trigger = create(&app, &user, "oncall", json!({})).await;
    let (id, first) = (trigger["id"].as_str().unwrap(), trigger["secret"].as_str().unwrap());
    let rotate = format!("/api/triggers/{id}/rotate");
    let rotated = app.post_empty(&rotate, &user).await.assert_status(200).clone();
    let second = rotated["secret"].as_str().unwrap().to_owned();
    assert!(second.starts_with("whsec_") && second != first, "{rotated}");
    let until: chrono::DateTime<chrono::Utc> =
        rotated["previous_valid_until"].as_str().unwrap().parse().unwrap();
    let overlap = until - chrono::Utc::now();
    assert!(
        overlap > chrono::Duration::hours(23) && overlap <= chrono::Duration::hours(24),
        "{rotated}"
    );

    let body = "{}";
    for (message, secret) in [("msg_old", first), ("msg_new", second.as_str())] {
        call(&app, id, &signed(secret, message, now(), body), body).await.assert_status(202);
    }
    // Both keys in one header, as a sender moving over may send them.
    let both = format!(
        "{} {}",
        signature(first, "msg_both", now(), body),
        signature(&second, "msg_both", now(), body)
    );
    call(&app, id, &headers("msg_both", now(), &both), body).await.assert_status(202);

    app.post_empty(&rotate, &user).await.assert_status(200);
    call(&app, id, &signed(first, "msg_first", now(), body), body)
        .await
        .assert_error(401, "invalid_signature");
    call(&app, id, &signed(&second, "msg_second", now(), body), body).await.assert_status(202);
    assert_eq!(tasks(&app, &user, "oncall").await.len(), 4);
}

async fn a_trigger_accepts_at_most_sixty_calls_a_minute(app: TestApp) {
    let user = app.register("flood@example.com").await;
    app.create_agent(&user, "oncall").await;
    app.post_empty("/api/agents/oncall/stop", &user).await.assert_status(200);
    let trigger = create(&app, &user, "oncall", json!({})).await;
    let (id, secret) = (trigger["id"].as_str().unwrap(), trigger["secret"].as_str().unwrap());
    for n in 0..60 {
        let message = format!("msg_{n}");
        call(&app, id, &signed(secret, &message, now(), "{}"), "{}").await.assert_status(202);
    }
    let reply = call(&app, id, &signed(secret, "msg_60", now(), "{}"), "{}").await;
    reply.assert_error(429, "quota_exceeded");
    assert_eq!(reply.body["error"]["details"]["quota"], "trigger_calls_per_minute");
    assert_eq!(reply.body["error"]["details"]["limit"], "60");
    // A repeat of an accepted call is still answered.
    let again = call(&app, id, &signed(secret, "msg_0", now(), "{}"), "{}").await;
    assert_eq!(again.assert_status(200)["duplicate"], true);
    assert_eq!(tasks(&app, &user, "oncall").await.len(), 60);
}

/// Senders retry, relays deliver twice: the same call arriving on several connections at once
/// (on PostgreSQL, transactions in parallel, as on several nodes) queues one task.
async fn deliveries_of_one_call_at_once_queue_one_task(app: TestApp) {
    let user = app.register("race@example.com").await;
    app.create_agent(&user, "oncall").await;
    let trigger = create(&app, &user, "oncall", json!({})).await;
    let (id, secret) = (trigger["id"].as_str().unwrap(), trigger["secret"].as_str().unwrap());
    let sent = signed(secret, "msg_race", now(), "{}");
    let replies = futures::future::join_all((0..8).map(|_| call(&app, id, &sent, "{}"))).await;
    let mut statuses: Vec<u16> = replies.iter().map(|r| r.status.as_u16()).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 200, 202], "{replies:?}");
    let task_ids: std::collections::BTreeSet<&str> =
        replies.iter().map(|r| r.body["task_id"].as_str().unwrap()).collect();
    assert_eq!(task_ids.len(), 1, "every answer names the one task");
    assert_eq!(tasks(&app, &user, "oncall").await.len(), 1);
    assert_eq!(entries(&app, &user, "oncall", "trigger_called").await.len(), 1);
}
