//! Outbound webhooks through the real server on both backends: endpoints and their rules
//! here, deliveries in `delivery.rs`. A receiver on loopback (`support::webhook_receiver`),
//! allowed by the operator's allow-list, records what arrives; every delivery a test receives
//! is checked with the Standard Webhooks reference library.

mod delivery;

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, User, app_with, backend_tests};
use support::webhook_receiver::{WebhookReceiver, verify_all};

const WAIT: Duration = Duration::from_secs(20);

backend_tests! { db;
    a_private_address_is_refused_at_registration_and_nothing_is_stored,
    a_test_event_arrives_signed_and_a_redelivery_repeats_its_id_and_body,
    after_a_rotation_deliveries_verify_with_the_old_and_the_new_secret,
    a_failed_attempt_says_why_without_the_urls_path,
}

backend_tests! { app;
    another_workspaces_endpoint_is_missing_and_a_member_cannot_change_endpoints,
}

/// A server whose allow-list lets it reach `receivers`.
pub(super) async fn app_reaching(db: TestDb, receivers: &[&WebhookReceiver]) -> TestApp {
    let allowed: Vec<_> = receivers.iter().map(|r| r.address).collect();
    app_with(db, |o| o.tools.http.allowed.extend(allowed)).await
}

/// Registers an endpoint for `events` at `url`: its id and secret.
pub(super) async fn endpoint(
    app: &TestApp,
    user: &User,
    url: &str,
    events: &[&str],
) -> (String, String) {
    let created = app.post("/api/webhooks", user, json!({"url": url, "events": events})).await;
    let body = created.assert_status(201);
    (body["id"].as_str().unwrap().to_owned(), body["secret"].as_str().unwrap().to_owned())
}

/// The endpoint's deliveries, newest first.
pub(super) async fn deliveries(app: &TestApp, user: &User, id: &str) -> Vec<Value> {
    let page = app.get(&format!("/api/webhooks/{id}/deliveries"), user).await;
    page.assert_status(200)["deliveries"].as_array().unwrap().clone()
}

async fn a_private_address_is_refused_at_registration_and_nothing_is_stored(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    let app = app_reaching(db, &[&receiver]).await;
    let user = app.register("hooks@example.com").await;
    let elsewhere = format!("http://127.0.0.1:{}/hooks", receiver.address.port() + 1);
    for (url, says) in [
        (elsewhere.as_str(), "loopback"),
        ("http://localhost:9/hooks", "loopback"),
        ("http://10.1.2.3/hooks", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[::1]:9/hooks", "loopback"),
    ] {
        let refused =
            app.post("/api/webhooks", &user, json!({"url": url, "events": ["task.failed"]})).await;
        refused.assert_error(400, "validation_failed");
        let why = refused.body["error"]["details"]["url"].as_str().unwrap_or_default();
        assert!(why.contains(says), "{url}: {why}");
    }
    let long = format!("https://example.com/{}", "a".repeat(2_000));
    for (body, field) in [
        (json!({"url": "ftp://example.com/x", "events": ["task.failed"]}), "url"),
        (json!({"url": "https://u:p@example.com/", "events": ["task.failed"]}), "url"),
        (json!({"url": long, "events": ["task.failed"]}), "url"),
        (json!({"url": "https://93.184.215.14/", "events": ["step.finished"]}), "events"),
        (json!({"url": "https://93.184.215.14/", "events": []}), "events"),
        (json!({"url": "https://93.184.215.14/"}), "events"),
        (
            json!({"url": "https://93.184.215.14/", "events": ["task.failed"],
            "description": "x".repeat(501)}),
            "description",
        ),
    ] {
        let refused = app.post("/api/webhooks", &user, body.clone()).await;
        refused.assert_error(400, "validation_failed");
        assert!(refused.body["error"]["details"][field].is_string(), "{body}: {}", refused.body);
    }
    let listed = app.get("/api/webhooks", &user).await;
    assert_eq!(listed.assert_status(200)["webhooks"], json!([]), "nothing was stored");

    // The operator's allow-list lets exactly the receiver's address through.
    let (id, secret) = endpoint(&app, &user, &receiver.url, &["task.failed"]).await;
    assert!(secret.starts_with("whsec_"), "{secret}");
    let shown = app.get(&format!("/api/webhooks/{id}"), &user).await;
    let shown = shown.assert_status(200);
    assert_eq!(shown["enabled"], true);
    assert_eq!(shown["events"], json!(["task.failed"]));
    assert!(shown.get("secret").is_none() && !shown.to_string().contains(&secret));
    // Changing the URL is checked the same way.
    let moved = json!({"url": "http://169.254.169.254/"});
    let refused = app.patch(&format!("/api/webhooks/{id}"), &user, moved).await;
    refused.assert_error(400, "validation_failed");
}

async fn a_test_event_arrives_signed_and_a_redelivery_repeats_its_id_and_body(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    let app = app_reaching(db, &[&receiver]).await;
    let user = app.register("test-event@example.com").await;
    let (id, secret) = endpoint(&app, &user, &receiver.url, &["task.completed"]).await;

    let queued = app.post_empty(&format!("/api/webhooks/{id}/test"), &user).await;
    let queued = queued.assert_status(202).clone();
    assert_eq!(queued["event_type"], "webhook.test");
    let first = receiver.wait_for(1, WAIT).await;
    let sent = &first[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/hooks");
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert!(sent.header("user-agent").unwrap().starts_with("agentd-webhooks/"));
    assert_eq!(sent.id(), queued["webhook_id"]);
    assert_eq!(sent.json()["type"], "webhook.test");
    assert_eq!(sent.json()["data"]["webhook"], id.as_str());

    let delivery = queued["id"].as_str().unwrap();
    let again =
        app.post_empty(&format!("/api/webhooks/{id}/deliveries/{delivery}/redeliver"), &user).await;
    let again = again.assert_status(202).clone();
    assert_ne!(again["id"], queued["id"], "a new delivery");
    let both = receiver.wait_for(2, WAIT).await;
    assert_eq!(both[1].id(), both[0].id(), "the same webhook-id");
    assert_eq!(both[1].body, both[0].body, "the same body");
    verify_all(&secret, &both).await;

    crate::helpers::eventually(WAIT, "both deliveries recorded as delivered", || async {
        let listed = deliveries(&app, &user, &id).await;
        listed.len() == 2 && listed.iter().all(|d| d["status"] == "delivered")
    })
    .await;
    let listed = deliveries(&app, &user, &id).await;
    assert_eq!(listed[0]["id"], again["id"], "newest first");
    assert_eq!(listed[0]["responses"][0]["status"], 200);
    assert_eq!(listed[0]["responses"][0]["response"], "answered by the test receiver");
    let missing =
        format!("/api/webhooks/{id}/deliveries/0190b6c2-0000-7000-8000-000000000000/redeliver");
    app.post_empty(&missing, &user).await.assert_error(404, "webhook_delivery_not_found");
    let paged = app.get(&format!("/api/webhooks/{id}/deliveries?limit=1"), &user).await;
    assert_eq!(paged.assert_status(200)["next_before"], again["id"]);
    app.get(&format!("/api/webhooks/{id}/deliveries?limit=101"), &user)
        .await
        .assert_error(400, "validation_failed");
}

async fn after_a_rotation_deliveries_verify_with_the_old_and_the_new_secret(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    let app = app_reaching(db, &[&receiver]).await;
    let user = app.register("rotate@example.com").await;
    let (id, old) = endpoint(&app, &user, &receiver.url, &["task.completed"]).await;
    let rotated = app.post_empty(&format!("/api/webhooks/{id}/rotate"), &user).await;
    let new = rotated.assert_status(200)["secret"].as_str().unwrap().to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    let shown = app.get(&format!("/api/webhooks/{id}"), &user).await;
    assert!(shown.assert_status(200)["secret_rotated_at"].is_string());

    app.post_empty(&format!("/api/webhooks/{id}/test"), &user).await.assert_status(202);
    let received = receiver.wait_for(1, WAIT).await;
    let signatures = received[0].header("webhook-signature").unwrap();
    assert_eq!(signatures.split(' ').filter(|s| s.starts_with("v1,")).count(), 2, "{signatures}");
    verify_all(&new, &received).await;
    verify_all(&old, &received).await;
}

async fn another_workspaces_endpoint_is_missing_and_a_member_cannot_change_endpoints(app: TestApp) {
    let ada = app.register("ada-hooks@example.com").await;
    let hook = json!({"url": "https://93.184.215.14/hooks", "events": ["schedule.missed"]});
    let created = app.post("/api/webhooks", &ada, hook.clone()).await;
    let id = created.assert_status(201)["id"].as_str().unwrap().to_owned();

    let bob = app.register("bob-hooks@example.com").await;
    for path in [format!("/api/webhooks/{id}"), format!("/api/webhooks/{id}/deliveries")] {
        app.get(&path, &bob).await.assert_error(404, "webhook_not_found");
    }
    app.delete(&format!("/api/webhooks/{id}"), &bob).await.assert_error(404, "webhook_not_found");
    assert_eq!(app.get("/api/webhooks", &bob).await.assert_status(200)["webhooks"], json!([]));

    // Bob, a member of Ada's team, reads its endpoints and changes none.
    let team = app.post("/api/workspaces", &ada, json!({"name": "Ops"})).await;
    let team = team.assert_status(201)["id"].as_str().unwrap().to_owned();
    let in_team = |user: &User, method: Method, path: &str, body: Option<Value>| {
        let (token, path) = (user.token.clone(), path.to_owned());
        let team = team.clone();
        let app = &app;
        async move { app.request_in(&team, method, &path, &token, body).await }
    };
    let invite =
        in_team(&ada, Method::POST, "/api/workspace/invites", Some(json!({"role": "member"})))
            .await;
    let token = invite.assert_status(201)["token"].as_str().unwrap().to_owned();
    app.post_empty(&format!("/api/invites/{token}/accept"), &bob).await.assert_status(200);
    let team_hook = in_team(&ada, Method::POST, "/api/webhooks", Some(hook.clone())).await;
    let team_hook = team_hook.assert_status(201)["id"].as_str().unwrap().to_owned();
    // The URL may carry the receiver's token: a member reads its origin, an admin all of it.
    let listed = in_team(&bob, Method::GET, "/api/webhooks", None).await;
    assert_eq!(listed.assert_status(200)["webhooks"][0]["url"], "https://93.184.215.14/…");
    let one = in_team(&bob, Method::GET, &format!("/api/webhooks/{team_hook}"), None).await;
    assert_eq!(one.assert_status(200)["url"], "https://93.184.215.14/…");
    let whole = in_team(&ada, Method::GET, &format!("/api/webhooks/{team_hook}"), None).await;
    assert_eq!(whole.assert_status(200)["url"], "https://93.184.215.14/hooks");
    in_team(&bob, Method::POST, "/api/webhooks", Some(hook.clone()))
        .await
        .assert_error(403, "forbidden");
    let path = format!("/api/webhooks/{team_hook}");
    in_team(&bob, Method::PATCH, &path, Some(json!({"enabled": false})))
        .await
        .assert_error(403, "forbidden");
    in_team(&bob, Method::POST, &format!("{path}/rotate"), None)
        .await
        .assert_error(403, "forbidden");

    // At most 20 endpoints a workspace.
    for _ in 1..20 {
        app.post("/api/webhooks", &ada, hook.clone()).await.assert_status(201);
    }
    app.post("/api/webhooks", &ada, hook).await.assert_error(429, "quota_exceeded");
}

async fn a_failed_attempt_says_why_without_the_urls_path(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    let app = app_reaching(db, &[&receiver]).await;
    let user = app.register("refused-hooks@example.com").await;
    // A receiver's URL often holds its token; members below admin read the attempts' errors.
    let url = format!("{}/T0-secret-token", receiver.url);
    let (id, _) = endpoint(&app, &user, &url, &["task.added"]).await;
    drop(receiver);
    app.post_empty(&format!("/api/webhooks/{id}/test"), &user).await.assert_status(202);
    crate::helpers::eventually(WAIT, "the refused attempt recorded", || async {
        deliveries(&app, &user, &id).await.first().is_some_and(|d| d["attempts"] == 1)
    })
    .await;
    let listed = deliveries(&app, &user, &id).await;
    let error = listed[0]["responses"][0]["error"].as_str().unwrap().to_owned();
    assert!(!error.is_empty() && listed[0]["responses"][0]["status"].is_null(), "{listed:?}");
    assert!(!error.contains("secret-token"), "the URL's path is in the error: {error}");
}
