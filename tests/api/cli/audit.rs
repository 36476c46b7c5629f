//! `agentctl audit`: the log listed, exported, and its chain checked by the CLI itself, from
//! the server's export or a file, refusing an edited entry or a head that is gone.

use super::*;

backend_tests! { app;
    the_audit_log_is_listed_exported_and_verified_from_the_terminal,
}

async fn the_audit_log_is_listed_exported_and_verified_from_the_terminal(app: TestApp) {
    let ada = Ctl::remote(&app);
    ada.run(&["register", "--email", "ada@example.com", "--password", PASSWORD, "--name", "Ada"])
        .await
        .ok();
    let ops = ada.run(&["-o", "json", "workspaces", "create", "Ops"]).await.ok().json();
    let ops = ops["id"].as_str().unwrap().to_owned();
    ada.run(&["workspace", "use", "Ops"]).await.ok();
    for id in ["a1", "a2"] {
        let agent = ["agents", "create", "--id", id, "--name", "A", "--role-prompt", "Help."];
        ada.run(&[&agent[..], &["--channel", "c"]].concat()).await.ok();
    }
    let listed = ada.run(&["audit"]).await;
    assert_eq!(listed.code, 2, "a subcommand is required: {}", listed.stderr);
    let listed = ada.run(&["audit", "list"]).await.ok();
    for expected in ["agent.created", "workspace.created", "ada@example.com"] {
        assert!(listed.stdout.contains(expected), "{expected} missing:\n{}", listed.stdout);
    }
    let page = ada.run(&["-o", "json", "audit", "list", "--action", "agent.created"]).await.ok();
    assert_eq!(page.json()["entries"].as_array().unwrap().len(), 2);

    let export = ada.run(&["audit", "export"]).await.ok();
    assert_eq!(export.stdout.lines().count(), 3, "{}", export.stdout);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &export.stdout).unwrap();
    let verified = ada.run(&["-o", "json", "audit", "verify"]).await.ok().json();
    assert_eq!((&verified["intact"], &verified["entries"]), (&json!(true), &json!(3)));
    let head = verified["last_hash"].as_str().unwrap().to_owned();

    // Someone with the database edits an entry: the server's log no longer verifies, the
    // export taken before still does.
    app.db
        .execute(
            "UPDATE audit_log SET action = 'agent.viewed' WHERE workspace_id = $1 AND seq = 2",
            &[&ops],
        )
        .await;
    let broken = ada.run(&["audit", "verify"]).await;
    assert_eq!(broken.code, 5, "{}", broken.stderr);
    assert!(broken.stderr.contains("broken at entry 2"), "{}", broken.stderr);
    let path = file.path().to_str().unwrap();
    ada.run(&["audit", "verify", "--file", path, "--head", &head]).await.ok();
    // ... puts it back and removes the last entry: intact, but the head kept earlier is gone.
    app.db
        .execute(
            "UPDATE audit_log SET action = 'agent.created' WHERE workspace_id = $1 AND seq = 2",
            &[&ops],
        )
        .await;
    ada.run(&["audit", "verify", "--head", &head]).await.ok();
    app.db.execute("DELETE FROM audit_log WHERE workspace_id = $1 AND seq = 3", &[&ops]).await;
    ada.run(&["audit", "verify"]).await.ok();
    let cut = ada.run(&["audit", "verify", "--head", &head]).await;
    assert_eq!(cut.code, 5, "{}", cut.stderr);
    assert!(cut.stderr.contains("head"), "{}", cut.stderr);
}
