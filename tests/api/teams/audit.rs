//! The audit log: one entry for each kind of change a team makes, readable by owners and admins,
//! exported as NDJSON, and a chain of hashes that shows an edited or removed entry.

use reqwest::Method;
use serde_json::{Value, json};

use super::{in_ws, join, team};
use crate::helpers::{TestApp, backend_tests};

const GUILD: &str = "4242";

backend_tests! { app;
    every_kind_of_change_is_recorded_once_with_who_and_what,
    an_edited_or_removed_entry_breaks_the_chain,
    a_team_plan_bought_through_stripe_is_recorded,
}

backend_tests! { db;
    approvals_are_recorded_with_the_decision,
}

/// The actions of the workspace's log, oldest first, read a page at a time.
async fn actions(app: &TestApp, ops: &str, user: &crate::helpers::User) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut before: Option<i64> = None;
    loop {
        let path = match before {
            Some(seq) => format!("/api/audit?limit=7&before={seq}"),
            None => "/api/audit?limit=7".to_owned(),
        };
        let page = in_ws(app, ops, user, Method::GET, &path, None).await;
        let page = page.assert_status(200).clone();
        entries.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page["next_before"].as_i64() {
            Some(seq) => before = Some(seq),
            None => break,
        }
    }
    entries.reverse();
    entries
}

async fn every_kind_of_change_is_recorded_once_with_who_and_what(app: TestApp) {
    app.discord.add_bot("bot-a.1", "Bot");
    app.discord.add_guild(GUILD, "Guild", &["bot-a.1"]);
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    let call = |method: Method, path: &str, body: Option<Value>| {
        let (app, ops, ada, path) = (&app, ops.clone(), &ada, path.to_owned());
        async move { in_ws(app, &ops, ada, method, &path, body).await }
    };
    let agent =
        json!({"id": "alpha", "name": "Alpha", "role_prompt": "First prompt.", "channel": "ops"});
    call(Method::POST, "/api/agents", Some(agent)).await.assert_status(201);
    call(Method::PATCH, "/api/agents/alpha", Some(json!({"role_prompt": "Second prompt."})))
        .await
        .assert_status(200);
    call(Method::POST, "/api/agents/alpha/start", None).await.assert_status(200);
    call(Method::POST, "/api/agents/alpha/stop", None).await.assert_status(200);
    call(Method::POST, "/api/agents/alpha/vacation", None).await.assert_status(200);
    let task =
        call(Method::POST, "/api/agents/alpha/backlog", Some(json!({"title": "Doomed"}))).await;
    let task = task.assert_status(201)["id"].as_str().unwrap().to_owned();
    call(Method::DELETE, &format!("/api/agents/alpha/backlog/{task}"), None)
        .await
        .assert_status(200);
    let task =
        call(Method::POST, "/api/agents/alpha/backlog", Some(json!({"title": "Stopped"}))).await;
    let task = task.assert_status(201)["id"].as_str().unwrap().to_owned();
    call(Method::POST, &format!("/api/agents/alpha/backlog/{task}/cancel"), None)
        .await
        .assert_status(200);
    let connect = json!({"bot_token": "bot-a.1", "guild_id": GUILD});
    call(Method::POST, "/api/chat/connect", Some(connect)).await.assert_status(200);
    let roles = json!({"allowed_role_ids": ["123456789"]});
    call(Method::PUT, &format!("/api/chat/connections/{GUILD}/roles"), Some(roles))
        .await
        .assert_status(200);
    call(Method::DELETE, &format!("/api/chat/connections/{GUILD}"), None).await.assert_status(200);
    let server =
        json!({"name": "tools", "url": "https://93.184.215.14/mcp", "token": "mcp-secret-value"});
    call(Method::POST, "/api/mcp/servers", Some(server)).await.assert_status(201);
    call(Method::DELETE, "/api/mcp/servers/tools", None).await.assert_status(200);
    call(Method::PUT, "/api/budget", Some(json!({"monthly_usd": 25.0}))).await.assert_status(200);
    call(Method::PATCH, "/api/workspace", Some(json!({"name": "Operations"})))
        .await
        .assert_status(200);
    let bob = app.register("bob@example.com").await;
    join(&app, &ops, &ada, &bob, "member").await;
    let bobs = format!("/api/workspace/members/{}", bob.id);
    call(Method::PATCH, &bobs, Some(json!({"role": "viewer"}))).await.assert_status(200);
    call(Method::DELETE, &bobs, None).await.assert_status(200);
    let invite =
        call(Method::POST, "/api/workspace/invites", Some(json!({"role": "viewer"}))).await;
    let invite = invite.assert_status(201)["id"].as_str().unwrap().to_owned();
    call(Method::DELETE, &format!("/api/workspace/invites/{invite}"), None)
        .await
        .assert_status(200);
    let key =
        call(Method::POST, "/api/workspace/keys", Some(json!({"name": "ci", "role": "member"})))
            .await;
    let secret = key.assert_status(201)["secret"].as_str().unwrap().to_owned();
    let key = key.body["id"].as_str().unwrap().to_owned();
    // The key acts too, and is named as the actor.
    let by_key = app.request_in(&ops, Method::POST, "/api/agents/alpha/stop", &secret, None).await;
    by_key.assert_status(200);
    call(Method::DELETE, &format!("/api/workspace/keys/{key}"), None).await.assert_status(200);
    call(Method::DELETE, "/api/agents/alpha", None).await.assert_status(200);

    let entries = actions(&app, &ops, &ada).await;
    let seen: Vec<&str> = entries.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(
        seen,
        [
            "workspace.created",
            "agent.created",
            "agent.updated",
            "agent.started",
            "agent.stopped",
            "agent.vacation",
            "task.deleted",
            "task.cancelled",
            "connection.connected",
            "connection.roles_set",
            "connection.disconnected",
            "mcp_server.added",
            "mcp_server.deleted",
            "budget.set",
            "workspace.renamed",
            "invite.created",
            "member.joined",
            "member.role_changed",
            "member.removed",
            "invite.created",
            "invite.deleted",
            "key.created",
            "agent.stopped",
            "key.revoked",
            "agent.deleted",
        ]
    );
    let seqs: Vec<i64> = entries.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=entries.len() as i64).collect::<Vec<_>>(), "numbered without gaps");
    let prompt = &entries[2];
    assert_eq!(prompt["before"]["role_prompt"], "First prompt.");
    assert_eq!(prompt["after"]["role_prompt"], "Second prompt.");
    assert_eq!(
        (prompt["actor_kind"].as_str(), prompt["actor_label"].as_str()),
        (Some("user"), Some("ada@example.com"))
    );
    assert_eq!(prompt["address"], "127.0.0.1");
    let by_key = &entries[22];
    assert_eq!(
        (by_key["actor_kind"].as_str(), by_key["actor_label"].as_str()),
        (Some("key"), Some("key:ci"))
    );
    let text = serde_json::to_string(&entries).unwrap();
    assert!(!text.contains("mcp-secret-value") && !text.contains(&secret), "no secret is recorded");

    // Members and viewers cannot read it; its own filters narrow it.
    let carol = app.register("carol@example.com").await;
    join(&app, &ops, &ada, &carol, "member").await;
    in_ws(&app, &ops, &carol, Method::GET, "/api/audit", None).await.assert_error(403, "forbidden");
    let removed =
        in_ws(&app, &ops, &ada, Method::GET, "/api/audit?action=member.removed", None).await;
    assert_eq!(removed.assert_status(200)["entries"].as_array().unwrap().len(), 1);
    // Another workspace's log is its own.
    let personal = app.get("/api/audit", &ada).await;
    assert!(personal.assert_status(200)["entries"].as_array().unwrap().is_empty());
}

async fn an_edited_or_removed_entry_breaks_the_chain(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    for n in 0..3 {
        let agent =
            json!({"id": format!("a{n}"), "name": "A", "role_prompt": "Help.", "channel": "c"});
        in_ws(&app, &ops, &ada, Method::POST, "/api/agents", Some(agent)).await.assert_status(201);
    }
    let verified = in_ws(&app, &ops, &ada, Method::GET, "/api/audit/verify", None).await;
    assert_eq!(verified.assert_status(200)["intact"], true, "{}", verified.body);
    assert_eq!(verified.body["entries"], 4);
    let export = app.text_in(&ops, "/api/audit/export", &ada.token).await;
    assert_eq!(export.lines().count(), 4, "{export}");
    let lines: Vec<Value> = export.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[3]["hash"], verified.body["last_hash"], "the export is the chain");
    let head = verified.body["last_hash"].clone();

    // Someone with the database edits who did entry 3.
    app.db
        .execute(
            "UPDATE audit_log SET actor_label = 'mallory@example.com' WHERE workspace_id = $1 AND seq = 3",
            &[&ops],
        )
        .await;
    let edited = in_ws(&app, &ops, &ada, Method::GET, "/api/audit/verify", None).await;
    assert_eq!(
        (edited.body["intact"].clone(), edited.body["broken_at"].clone()),
        (json!(false), json!(3))
    );
    app.db
        .execute(
            "UPDATE audit_log SET actor_label = 'ada@example.com' WHERE workspace_id = $1 AND seq = 3",
            &[&ops],
        )
        .await;
    let restored = in_ws(&app, &ops, &ada, Method::GET, "/api/audit/verify", None).await;
    assert_eq!(restored.body["intact"], true);
    // ... removes the last entry: the chain holds, but ends before the head kept earlier.
    app.db.execute("DELETE FROM audit_log WHERE workspace_id = $1 AND seq = 4", &[&ops]).await;
    let cut = in_ws(&app, &ops, &ada, Method::GET, "/api/audit/verify", None).await;
    assert_eq!((cut.body["intact"].clone(), cut.body["last_seq"].clone()), (json!(true), json!(3)));
    assert_ne!(cut.body["last_hash"], head, "the head kept earlier shows the cut");
    // ... and one in the middle.
    app.db.execute("DELETE FROM audit_log WHERE workspace_id = $1 AND seq = 2", &[&ops]).await;
    let removed = in_ws(&app, &ops, &ada, Method::GET, "/api/audit/verify", None).await;
    assert_eq!(
        (removed.body["intact"].clone(), removed.body["broken_at"].clone()),
        (json!(false), json!(3))
    );
}

async fn a_team_plan_bought_through_stripe_is_recorded(app: TestApp) {
    use crate::stripe_events::{PRICE_PRO, Sub, checkout, now, subscription};
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    // The checkout names the team workspace: its plan changes, not Ada's own.
    app.deliver(&checkout("evt_c1", "cus_ops", Some(&ops), None, None)).await;
    let sub =
        Sub { id: "sub_1", customer: "cus_ops", status: "active", price: PRICE_PRO, user_id: None };
    app.deliver(&subscription("created", "evt_s1", now(), &sub)).await;
    let plan = in_ws(&app, &ops, &ada, Method::GET, "/api/billing", None).await;
    assert_eq!(plan.assert_status(200)["plan"], "pro");
    assert_eq!(app.get("/api/billing", &ada).await.assert_status(200)["plan"], "free");
    let entries = actions(&app, &ops, &ada).await;
    let last = entries.last().unwrap();
    assert_eq!(
        (last["action"].as_str(), last["actor_kind"].as_str()),
        (Some("plan.applied"), Some("stripe"))
    );
    assert_eq!(last["after"]["plan"], "pro");
}

async fn approvals_are_recorded_with_the_decision(db: crate::helpers::TestDb) {
    let app = crate::helpers::app_with(db, |o| o.tools.http.allow_private = true).await;
    let ada = app.register("ada@example.com").await;
    let (task, _page) = crate::interactions::approvals::waiting_fetch_for(&app, &ada).await;
    let path = format!("/api/agents/ops/backlog/{task}/approve");
    app.post_empty(&path, &ada).await.assert_status(200);
    let entries = actions(&app, &ada.id, &ada).await;
    let approved: Vec<&Value> =
        entries.iter().filter(|e| e["action"] == "approval.approved").collect();
    assert_eq!(approved.len(), 1, "{entries:?}");
    assert_eq!(approved[0]["after"]["status"], "approved");
    assert_eq!(approved[0]["actor_label"], "ada@example.com");
}
