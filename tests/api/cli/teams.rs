//! `agentctl workspaces|workspace|members|invites|keys`, remote and local: a team made, joined
//! through an invite's link and left, the workspace chosen by `--workspace` or the profile, and
//! an API key in `AGENTD_API_KEY` acting for a script until it is revoked.

use super::*;

backend_tests! { app;
    a_team_is_made_joined_and_managed_from_the_terminal,
    an_api_key_works_for_a_script_until_it_is_revoked,
}

/// The value of the line of `stdout` that starts with `label`.
fn labelled(stdout: &str, label: &str) -> String {
    let found = stdout.lines().find_map(|line| line.strip_prefix(label));
    found.unwrap_or_else(|| panic!("no {label:?} line in\n{stdout}")).trim().to_owned()
}

/// The ids of the agents `ctl` lists, with `before` ahead of the command.
async fn agent_ids(ctl: &Ctl, before: &[&str]) -> Vec<String> {
    let listed = ctl.run(&[before, &["-o", "json", "agents", "list"]].concat()).await.ok().json();
    let agents = listed["agents"].as_array().unwrap().iter();
    agents.map(|agent| agent["id"].as_str().unwrap().to_owned()).collect()
}

async fn a_team_is_made_joined_and_managed_from_the_terminal(app: TestApp) {
    let ada = Ctl::remote(&app);
    let bob = Ctl::local(&app);
    ada.run(&["register", "--email", "ada@example.com", "--password", PASSWORD, "--name", "Ada"])
        .await
        .ok();
    bob.run(&["register", "--email", "bob@example.com", "--password", PASSWORD, "--name", "Bob"])
        .await
        .ok();
    let ops = ada.run(&["-o", "json", "workspaces", "create", "Ops"]).await.ok().json();
    let ops_id = ops["id"].as_str().unwrap().to_owned();
    assert_eq!((&ops["role"], &ops["personal"]), (&json!("owner"), &json!(false)));
    let listed = ada.run(&["workspaces"]).await.ok();
    for expected in ["PERSONAL", "PLAN", "Ops", ops_id.as_str(), "owner"] {
        assert!(listed.stdout.contains(expected), "{expected} missing:\n{}", listed.stdout);
    }
    let agent = ["agents", "create", "--id", "shared", "--name", "S", "--role-prompt", "Help."];
    ada.run(&[&["--workspace", "Ops"][..], &agent[..], &["--channel", "ops"]].concat()).await.ok();
    assert!(agent_ids(&ada, &[]).await.is_empty(), "the personal workspace has none");

    // The invite's token and link are printed once; Bob, in local mode, joins by the link.
    let invite = ["--workspace", "Ops", "invites", "create", "--role", "member"];
    let invite = ada.run(&[&invite[..], &["--email", "bob@example.com"]].concat()).await.ok();
    let token = labelled(&invite.stdout, "Token: ");
    let link = labelled(&invite.stdout, "Link: ");
    assert_eq!(link, format!("{}/invite/{token}", app.address));
    assert!(invite.stderr.contains("only this once"), "{}", invite.stderr);
    let pending = ada.run(&["--workspace", &ops_id, "-o", "json", "invites"]).await.ok().json();
    assert_eq!(pending["invites"][0]["email"], "bob@example.com");
    assert!(!pending.to_string().contains(&token), "a list never shows a token");
    let joined = bob.run(&["-o", "json", "invites", "accept", &link]).await.ok().json();
    assert_eq!((&joined["id"], &joined["role"]), (&json!(ops_id), &json!("member")));
    let used = bob.run(&["invites", "accept", &token]).await;
    assert_eq!(used.code, 4, "an invite is used once: {}", used.stderr);

    // `--workspace` by name, then the profile's choice, reach the team's agents.
    assert_eq!(agent_ids(&bob, &["--workspace", "ops"]).await, ["shared"]);
    assert!(agent_ids(&bob, &[]).await.is_empty());
    let unknown = bob.run(&["--workspace", "Nowhere", "agents", "list"]).await;
    assert_eq!(unknown.code, 4, "{}", unknown.stderr);
    assert!(unknown.stderr.contains("'Nowhere'"), "{}", unknown.stderr);
    bob.run(&["workspace", "use", "Ops"]).await.ok();
    assert_eq!(agent_ids(&bob, &[]).await, ["shared"]);
    bob.run(&["tasks", "add", "shared", "From Bob"]).await.ok();
    let current = bob.run(&["workspace", "current"]).await.ok();
    assert!(current.stdout.contains(&ops_id), "{}", current.stdout);
    assert!(current.stderr.contains("workspace use"), "{}", current.stderr);

    // A member may not invite; an admin may.
    let refused = bob.run(&["invites", "create", "--role", "viewer"]).await;
    assert_eq!(refused.code, 3, "forbidden: {}", refused.stderr);
    let members = ada.run(&["--workspace", "Ops", "members"]).await.ok();
    assert!(members.stdout.contains("bob@example.com"), "{}", members.stdout);
    let role = ["--workspace", "Ops", "-o", "json", "members", "role", "BOB@example.com", "admin"];
    assert_eq!(ada.run(&role).await.ok().json()["role"], "admin");
    bob.run(&["invites", "create", "--role", "viewer"]).await.ok();

    // The last owner cannot leave; anyone else can, and the profile forgets the workspace.
    let last = ada.run(&["--workspace", "Ops", "members", "leave", "--yes"]).await;
    assert_eq!(last.code, 5, "a conflict: {}", last.stderr);
    assert!(last.stderr.contains("last_owner"), "{}", last.stderr);
    bob.run(&["members", "leave", "--yes"]).await.ok();
    assert!(agent_ids(&bob, &[]).await.is_empty(), "back in the personal workspace");

    // A removed member is refused the workspace.
    let invite = ["--workspace", "Ops", "-o", "json", "invites", "create", "--role", "viewer"];
    let token = ada.run(&invite).await.ok().json()["token"].as_str().unwrap().to_owned();
    bob.run(&["invites", "accept", &token]).await.ok();
    ada.run(&["--workspace", "Ops", "members", "remove", "bob@example.com", "--yes"]).await.ok();
    let gone = bob.run(&["--workspace", &ops_id, "agents", "list"]).await;
    assert_eq!(gone.code, 4, "{}", gone.stderr);
    assert!(gone.stderr.contains("workspace_not_found"), "{}", gone.stderr);
}

async fn an_api_key_works_for_a_script_until_it_is_revoked(app: TestApp) {
    let mut ada = Ctl::remote(&app);
    ada.run(&["register", "--email", "ada@example.com", "--password", PASSWORD, "--name", "Ada"])
        .await
        .ok();
    ada.run(&["workspaces", "create", "Ops"]).await.ok();
    ada.run(&["workspace", "use", "Ops"]).await.ok();
    let agent = ["agents", "create", "--id", "shared", "--name", "S", "--role-prompt", "Help."];
    ada.run(&[&agent[..], &["--channel", "ops"]].concat()).await.ok();
    let created = ada.run(&["keys", "create", "ci", "--role", "member"]).await.ok();
    let secret = labelled(&created.stdout, "Secret: ");
    assert!(secret.starts_with("agk_"), "{secret}");
    assert!(created.stderr.contains("only this once"), "{}", created.stderr);
    let listed = ada.run(&["keys"]).await.ok();
    assert!(listed.stdout.contains("ci") && !listed.stdout.contains(&secret), "{}", listed.stdout);

    // A script with the key and no login, remote and local, acts in the key's workspace.
    let mut scripts = [Ctl::remote(&app), Ctl::local(&app)];
    for (n, script) in scripts.iter_mut().enumerate() {
        script.env.push(("AGENTD_API_KEY", secret.clone()));
        let title = format!("From CI {n}");
        let task = script.run(&["-o", "json", "tasks", "add", "shared", &title]).await.ok().json();
        assert_eq!(task["status"], "queued");
        let refused = script.run(&["invites", "create", "--role", "viewer"]).await;
        assert_eq!(refused.code, 3, "a member's key cannot invite: {}", refused.stderr);
        assert!(refused.stderr.contains("forbidden"), "{}", refused.stderr);
    }
    let tasks = ada.run(&["-o", "json", "tasks", "list", "shared"]).await.ok().json();
    assert_eq!(tasks["tasks"].as_array().unwrap().len(), 2);
    // The key goes before the profile's login: a key is not a person.
    ada.env.push(("AGENTD_API_KEY", secret.clone()));
    assert_eq!(ada.run(&["whoami"]).await.code, 3);
    ada.env.clear();

    let keys = ada.run(&["-o", "json", "keys"]).await.ok().json();
    let id = keys["keys"][0]["id"].as_str().unwrap().to_owned();
    ada.run(&["keys", "revoke", &id, "--yes"]).await.ok();
    for script in &scripts {
        let revoked = script.run(&["tasks", "add", "shared", "Too late"]).await;
        assert_eq!(revoked.code, 3, "{}", revoked.stderr);
        assert!(revoked.stderr.contains("AGENTD_API_KEY"), "{}", revoked.stderr);
    }
}
