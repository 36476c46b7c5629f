//! `agentctl webhooks ...` and `agentctl triggers ...`: tables and `--output json` as the body
//! came, a secret printed once with a line saying so, deliveries with their answers, and
//! triggers managed in local mode too.

use super::*;
use crate::webhooks::app_reaching;
use support::webhook_receiver::{WebhookReceiver, verify_all};

backend_tests! { db;
    webhooks_are_registered_tested_and_redelivered_from_the_terminal,
}

backend_tests! { app;
    triggers_are_added_changed_rotated_and_removed_in_both_modes,
}

async fn webhooks_are_registered_tested_and_redelivered_from_the_terminal(db: TestDb) {
    let receiver = WebhookReceiver::start().await;
    let app = app_reaching(db, &[&receiver]).await;
    let ctl = Ctl::remote(&app);
    ctl.run(&["register", "--email", "hooks@example.com", "--password", PASSWORD, "--name", "H"])
        .await
        .ok();

    let added = ctl
        .run(&["webhooks", "add", &receiver.url, "--events", "task.completed, task.failed"])
        .await
        .ok();
    let secret = added.stdout.lines().find_map(|l| l.strip_prefix("Secret: ")).unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{}", added.stdout);
    assert!(added.stderr.contains("shown only this once"), "{}", added.stderr);
    let listed = ctl.run(&["-o", "json", "webhooks", "list"]).await.ok();
    let webhook = listed.json()["webhooks"][0].clone();
    assert_eq!(webhook["events"], json!(["task.completed", "task.failed"]));
    assert!(!listed.stdout.contains(&secret), "never listed");
    let id = webhook["id"].as_str().unwrap().to_owned();
    let table = ctl.run(&["webhooks", "list"]).await.ok();
    assert!(table.stdout.contains("task.completed, task.failed"), "{}", table.stdout);
    assert!(table.stdout.contains(&receiver.url), "{}", table.stdout);

    // A test event: answered 503, then 200; the deliveries show both attempts.
    receiver.answer(&[503]);
    let queued = ctl.run(&["-o", "json", "webhooks", "test", &id]).await.ok().json();
    assert_eq!(queued["event_type"], "webhook.test");
    let received = receiver.wait_for(2, Duration::from_secs(20)).await;
    verify_all(&secret, &received).await;
    eventually(Duration::from_secs(20), "the test event delivered", || async {
        let page = ctl.run(&["-o", "json", "webhooks", "deliveries", &id]).await.ok().json();
        page["deliveries"][0]["status"] == "delivered"
    })
    .await;
    let table = ctl.run(&["webhooks", "deliveries", &id]).await.ok();
    assert!(table.stdout.contains("HTTP 200"), "the latest answer: {}", table.stdout);
    assert!(table.stdout.contains(received[0].id()), "{}", table.stdout);

    let delivery = queued["id"].as_str().unwrap();
    let again = ctl.run(&["-o", "json", "webhooks", "redeliver", &id, delivery]).await.ok().json();
    assert_eq!(again["webhook_id"], received[0].id(), "the same message");
    assert_eq!(receiver.wait_for(3, Duration::from_secs(20)).await[2].id(), received[0].id());

    let rotated = ctl.run(&["webhooks", "rotate", &id]).await.ok();
    assert!(rotated.stdout.contains("previous_valid_until"), "{}", rotated.stdout);
    assert!(rotated.stderr.contains("shown only this once"), "{}", rotated.stderr);
    let off = ["-o", "json", "webhooks", "update", &id, "--disable", "--description", "CI"];
    let off = ctl.run(&off).await.ok().json();
    assert_eq!((&off["enabled"], &off["description"]), (&json!(false), &json!("CI")));
    let nothing = ctl.run(&["webhooks", "update", &id]).await;
    assert_eq!(nothing.code, 2, "nothing to change: {}", nothing.stderr);
    let bad = ctl.run(&["webhooks", "add", "http://10.0.0.1/x", "--events", "task.failed"]).await;
    assert_eq!(bad.code, 2, "a private address: {}", bad.stderr);
    assert!(bad.stderr.contains("url"), "{}", bad.stderr);

    ctl.run(&["webhooks", "remove", &id, "--yes"]).await.ok();
    let missing = ctl.run(&["webhooks", "show", &id]).await;
    assert_eq!(missing.code, 4, "not found: {}", missing.stderr);
}

async fn triggers_are_added_changed_rotated_and_removed_in_both_modes(app: TestApp) {
    let [remote, local] = both_modes(&app).await;
    let email = "triggers@example.com";
    remote.run(&["register", "--email", email, "--password", PASSWORD, "--name", "T"]).await.ok();
    local.run(&["login", "--email", email, "--password", PASSWORD]).await.ok();
    let agent = ["agents", "create", "--id", "triage", "--name", "T", "--role-prompt", "Sorts."];
    remote.run(&[&agent[..], &["--channel", "c"]].concat()).await.ok();

    // Added in local mode, on the same database.
    let added = local
        .run(&["triggers", "add", "triage", "Alert: {{alert.name}}", "--name", "grafana"])
        .await
        .ok();
    let secret = added.stdout.lines().find_map(|l| l.strip_prefix("Secret: ")).unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{}", added.stdout);
    assert!(added.stderr.contains("shown only this once"), "{}", added.stderr);
    let listed = remote.run(&["-o", "json", "triggers", "list", "--agent", "triage"]).await.ok();
    let trigger = listed.json()["triggers"][0].clone();
    assert_eq!(
        (&trigger["name"], &trigger["title"]),
        (&json!("grafana"), &json!("Alert: {{alert.name}}"))
    );
    assert!(!listed.stdout.contains(&secret), "never listed");
    let id = trigger["id"].as_str().unwrap().to_owned();
    let from_local = local.run(&["-o", "json", "triggers", "show", &id]).await.ok().json();
    assert_eq!(from_local["id"], trigger["id"]);
    let table = remote.run(&["triggers", "list"]).await.ok();
    assert!(table.stdout.contains("grafana") && table.stdout.contains(&id), "{}", table.stdout);

    let changed = ["-o", "json", "triggers", "update", &id, "--disable", "--priority", "-3"];
    let changed = remote.run(&changed).await.ok().json();
    assert_eq!((&changed["enabled"], &changed["priority"]), (&json!(false), &json!(-3)));
    let rotated = local.run(&["-o", "json", "triggers", "rotate", &id]).await.ok();
    let new_secret = rotated.json()["secret"].as_str().unwrap().to_owned();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret, "{}", rotated.stdout);
    let bad = remote.run(&["triggers", "add", "triage", "{{unclosed"]).await;
    assert_eq!(bad.code, 2, "a bad template: {}", bad.stderr);
    assert!(bad.stderr.contains("title"), "{}", bad.stderr);

    remote.run(&["triggers", "remove", &id, "--yes"]).await.ok();
    let missing = local.run(&["triggers", "show", &id]).await;
    assert_eq!(missing.code, 4, "not found: {}", missing.stderr);
}
