//! The webhooks page over plain HTTP: an endpoint made with the form (its secret shown once),
//! its deliveries with each attempt's answer, redelivery, rotation, disabling and deleting
//! (confirmed); a viewer reads without forms; another workspace's endpoint is missing.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::Visitor;
use super::teams::{between, new_team, user_of};
use crate::helpers::{TestApp, TestDb, backend_tests, eventually};
use crate::teams::{in_ws, join};
use crate::webhooks::app_reaching;
use support::webhook_receiver::{WebhookReceiver, verify_all};

backend_tests! { db;
    an_endpoint_made_on_the_page_shows_its_secret_once_and_its_deliveries_answers,
}

backend_tests! { app;
    a_viewer_reads_endpoints_and_triggers_without_forms_and_another_workspace_finds_none,
}

const WAIT: Duration = Duration::from_secs(20);
/// A public address: the policy lets it through without DNS, and no test event is asked of it.
const PUBLIC: &str = "https://93.184.215.14/hooks";

async fn an_endpoint_made_on_the_page_shows_its_secret_once_and_its_deliveries_answers(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    let app = app_reaching(db, &[&receiver]).await;
    let mut ada = Visitor::new(&app);
    ada.register("hooks-page@example.com").await;
    let me = user_of(&app, &ada).await;
    assert!(ada.get("/").await.body.contains("<a href=\"/webhooks\""), "in the navigation");

    // A refused form names every bad field, keeps what was typed and stores nothing.
    let bad = ada.post("/webhooks", &[("url", "ftp://example.com/x"), ("description", "CI")]).await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    for field in ["url", "events"] {
        assert!(bad.body.contains(&format!("data-field=\"{field}\"")), "{field}: {}", bad.body);
    }
    assert!(bad.body.contains("value=\"ftp://example.com/x\""), "{}", bad.body);
    let private = ada
        .post("/webhooks", &[("url", "http://10.1.2.3/hooks"), ("events", "task.completed")])
        .await;
    assert_eq!(private.status, 400, "a private address is refused: {}", private.body);
    assert!(private.body.contains("data-field=\"url\""), "{}", private.body);
    assert!(private.body.contains("value=\"task.completed\" checked"), "{}", private.body);
    let none = app.get("/api/webhooks", &me).await;
    assert_eq!(none.assert_status(200)["webhooks"], serde_json::json!([]));

    // Made: the secret is on the answer, and never again.
    let fields = [
        ("url", receiver.url.as_str()),
        ("events", "task.completed"),
        ("events", "approval.requested"),
        ("description", "Our <CI>"),
    ];
    let made = ada.post("/webhooks", &fields).await;
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(made.headers["hx-push-url"], "/webhooks", "a reload shows the list");
    let secret = between(&made, "<code id=\"webhook-secret\">", "</code>").to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert!(made.body.contains("Our &lt;CI&gt;"), "user text is escaped: {}", made.body);
    let listed = app.get("/api/webhooks", &me).await;
    let webhook = listed.assert_status(200)["webhooks"][0].clone();
    assert_eq!(webhook["events"], serde_json::json!(["task.completed", "approval.requested"]));
    let id = webhook["id"].as_str().unwrap().to_owned();
    let page = ada.get("/webhooks").await;
    assert!(!page.body.contains(&secret), "the secret is shown once");
    assert!(page.body.contains(&format!("data-webhook=\"{id}\" data-enabled=\"true\"")));

    // A test event: the receiver answers 500, then 200; the page shows both answers.
    receiver.answer(&[500]);
    let here = format!("/webhooks/{id}");
    let sent = ada.post(&format!("{here}/test"), &[]).await;
    assert_eq!((sent.status, sent.location.as_deref()), (303, Some(here.as_str())));
    let received = receiver.wait_for(2, WAIT).await;
    verify_all(&secret, &received).await;
    let deliveries = format!("/api/webhooks/{id}/deliveries");
    eventually(WAIT, "the delivery is delivered", || async {
        let page = app.get(&deliveries, &me).await;
        page.assert_status(200)["deliveries"][0]["status"] == "delivered"
    })
    .await;
    let page = ada.get(&here).await;
    assert!(page.body.contains("data-status=\"delivered\""), "{}", page.body);
    for answer in ["HTTP 500", "HTTP 200", "webhook.test", received[0].id()] {
        assert!(page.body.contains(answer), "{answer}: {}", page.body);
    }

    // Redelivered: the same message again.
    let delivery = between(&page, "data-delivery=\"", "\"").to_owned();
    let again = ada.post(&format!("{here}/deliveries/{delivery}/redeliver"), &[]).await;
    assert_eq!((again.status, again.location.as_deref()), (303, Some(here.as_str())));
    let received = receiver.wait_for(3, WAIT).await;
    assert_eq!(received[2].id(), received[0].id(), "the same webhook-id");
    assert_eq!(received[2].body, received[0].body, "the same body");

    // Rotated: the new secret once; both sign for a while.
    let rotated = ada.post(&format!("{here}/rotate"), &[]).await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    assert_eq!(rotated.headers["hx-push-url"], here.as_str());
    let new_secret = between(&rotated, "<code id=\"webhook-secret\">", "</code>").to_owned();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret, "{new_secret}");
    assert!(!ada.get(&here).await.body.contains(&new_secret), "shown once");

    // Disabled and enabled again.
    let off = ada.post(&format!("{here}/disable"), &[]).await;
    assert_eq!((off.status, off.location.as_deref()), (303, Some(here.as_str())));
    assert_eq!(
        app.get(&format!("/api/webhooks/{id}"), &me).await.assert_status(200)["enabled"],
        false
    );
    assert!(ada.get("/webhooks").await.body.contains("data-enabled=\"false\""));
    ada.post(&format!("{here}/enable"), &[]).await;
    assert_eq!(
        app.get(&format!("/api/webhooks/{id}"), &me).await.assert_status(200)["enabled"],
        true
    );

    // Deleting asks first; a GET deletes nothing.
    let ask = ada.get(&format!("{here}/delete")).await;
    assert_eq!(ask.status, 200, "{}", ask.body);
    assert!(ask.body.contains(&format!("action=\"{here}/delete\"")), "{}", ask.body);
    app.get(&format!("/api/webhooks/{id}"), &me).await.assert_status(200);
    let gone = ada.post(&format!("{here}/delete"), &[]).await;
    assert_eq!((gone.status, gone.location.as_deref()), (303, Some("/webhooks")));
    app.get(&format!("/api/webhooks/{id}"), &me).await.assert_error(404, "webhook_not_found");
}

async fn a_viewer_reads_endpoints_and_triggers_without_forms_and_another_workspace_finds_none(
    app: TestApp,
) {
    let mut ada = Visitor::new(&app);
    ada.register("ada-integrations@example.com").await;
    let ops = new_team(&mut ada, "Ops").await;
    let agent =
        [("name", "Shared"), ("id", "shared"), ("channel", "ops"), ("role_prompt", "Helps.")];
    assert_eq!(ada.post("/agents", &agent).await.status, 303);
    let made = ada.post("/webhooks", &[("url", PUBLIC), ("events", "schedule.missed")]).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let made = ada.post("/agents/shared/triggers", &[("title", "Alert")]).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let me = user_of(&app, &ada).await;
    let id = first(&app, &ops, &me, "/api/webhooks", "webhooks").await;
    let trigger = first(&app, &ops, &me, "/api/triggers", "triggers").await;

    let mut bob = Visitor::new(&app);
    bob.register("bob-integrations@example.com").await;
    join(&app, &ops, &me, &user_of(&app, &bob).await, "viewer").await;
    bob.post("/workspace", &[("workspace", ops.as_str()), ("back", "/")]).await;
    let list = bob.get("/webhooks").await;
    assert_eq!(list.status, 200, "{}", list.body);
    // A receiver's URL may carry its token: a viewer reads only its origin.
    let origin = format!("{}/…", PUBLIC.split('/').take(3).collect::<Vec<_>>().join("/"));
    assert!(list.body.contains(&origin), "a viewer reads the endpoints: {}", list.body);
    assert!(!list.body.contains(PUBLIC), "but not their whole URL");
    assert!(!list.body.contains("id=\"webhook-form\""), "no form for a viewer");
    let endpoint = bob.get(&format!("/webhooks/{id}")).await;
    assert_eq!(endpoint.status, 200, "{}", endpoint.body);
    for action in ["/test\"", "/rotate\"", "/disable\"", "/delete\""] {
        assert!(!endpoint.body.contains(action), "no {action} for a viewer");
    }
    let shared = bob.get("/agents/shared").await;
    assert!(shared.body.contains(&format!("data-trigger=\"{trigger}\"")), "{}", shared.body);
    assert!(!shared.body.contains("id=\"trigger-form\""), "no form for a viewer");
    assert!(!shared.body.contains("/rotate\""), "no buttons for a viewer");

    // Changes are refused in the facade's words, and nothing changes.
    for path in
        [format!("/webhooks/{id}/disable"), format!("/agents/shared/triggers/{trigger}/disable")]
    {
        let refused = bob.post(&path, &[]).await;
        assert_eq!(refused.status, 403, "{path}: {}", refused.body);
    }
    let hook = in_ws(&app, &ops, &me, Method::GET, &format!("/api/webhooks/{id}"), None).await;
    assert_eq!(hook.assert_status(200)["enabled"], true);
    let path = format!("/api/triggers/{trigger}");
    assert_eq!(
        in_ws(&app, &ops, &me, Method::GET, &path, None).await.assert_status(200)["enabled"],
        true
    );

    // Another workspace's endpoint and trigger are missing ones.
    let mut eve = Visitor::with_writer(&app, "eve-integrations@example.com").await;
    for path in [format!("/webhooks/{id}"), format!("/webhooks/{id}/delete")] {
        let missing = eve.get(&path).await;
        assert_eq!(missing.status, 404, "{path}: {}", missing.body);
        assert!(missing.body.contains("webhook_not_found"), "{}", missing.body);
    }
    let missing = eve.post(&format!("/webhooks/{id}/delete"), &[]).await;
    assert_eq!(missing.status, 404, "{}", missing.body);
    for command in ["delete", "rotate"] {
        let path = format!("/agents/writer/triggers/{trigger}/{command}");
        let missing = eve.post(&path, &[]).await;
        assert_eq!(missing.status, 404, "{path}: {}", missing.body);
        assert!(missing.body.contains("trigger_not_found"), "{}", missing.body);
    }
    in_ws(&app, &ops, &me, Method::GET, &format!("/api/webhooks/{id}"), None)
        .await
        .assert_status(200);
}

/// The id of the first item of `list` at `path` in workspace `ws`.
async fn first(
    app: &TestApp,
    ws: &str,
    user: &crate::helpers::User,
    path: &str,
    list: &str,
) -> String {
    let listed = in_ws(app, ws, user, Method::GET, path, None).await;
    let body: &Value = listed.assert_status(200);
    body[list][0]["id"].as_str().unwrap().to_owned()
}
