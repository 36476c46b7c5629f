//! Approvals and Discord roles from the terminal: `tasks approve|deny`, `agents update
//! --approval-tools`, `chat roles`, the same bytes in both modes.

use serde_json::json;

use super::{PASSWORD, both_modes};
use crate::helpers::{TestDb, app_with, backend_tests, eventually};

backend_tests! { db;
    a_waiting_task_is_approved_and_roles_are_allowed_from_the_terminal,
}

async fn a_waiting_task_is_approved_and_roles_are_allowed_from_the_terminal(db: TestDb) {
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let user = app.register("terminal-approver@example.com").await;
    let (task, page) = crate::interactions::approvals::waiting_fetch_for(&app, &user).await;
    let [remote, local] = both_modes(&app).await;
    for ctl in [&remote, &local] {
        let email = "terminal-approver@example.com";
        ctl.run(&["login", "--email", email, "--password", PASSWORD]).await.ok();
    }

    let listed =
        remote.run(&["-o", "json", "tasks", "list", "ops", "--status", "awaiting_approval"]);
    assert_eq!(listed.await.ok().json()["tasks"][0]["id"], json!(task));
    let updated = local.run(&[
        "-o",
        "json",
        "agents",
        "update",
        "ops",
        "--approval-tools",
        "http_fetch,memory",
    ]);
    assert_eq!(updated.await.ok().json()["approval_tools"], json!(["http_fetch", "memory"]));
    let unknown = remote.run(&["agents", "update", "ops", "--approval-tools", "rm_rf"]).await;
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(unknown.stderr.contains("approval_tools"), "{}", unknown.stderr);

    let approved = local.run(&["-o", "json", "tasks", "approve", "ops", &task]).await.ok();
    assert_eq!(approved.json()["status"], "approved");
    assert_eq!(approved.json()["approval"]["decided_by"], "the owner");
    let again = remote.run(&["tasks", "deny", "ops", &task]).await;
    assert_eq!(again.code, 5, "a conflict: {}", again.stderr);
    assert!(again.stderr.contains("waits for no approval"), "{}", again.stderr);
    eventually(std::time::Duration::from_secs(20), "the fetch runs", || async { page.hits() == 1 })
        .await;

    let guild = super::super::interactions::GUILD;
    let remote_roles =
        remote.run(&["-o", "json", "chat", "roles", guild, "123456789012345678"]).await.ok();
    assert_eq!(remote_roles.json()["allowed_role_ids"], json!(["123456789012345678"]));
    let cleared = local.run(&["-o", "json", "chat", "roles", guild]).await.ok();
    assert_eq!(cleared.json()["allowed_role_ids"], json!([]));
    let bad = remote.run(&["chat", "roles", guild, "admins"]).await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}
