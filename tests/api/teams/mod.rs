//! Workspaces, members, roles, invites and API keys, through the real server on both backends.

mod audit;
mod audit_lanes;
mod keys;
mod roles;
mod upgrade;

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, User, backend_tests, eventually};

/// A team workspace of `owner`'s, named `name`: its id.
pub(super) async fn team(app: &TestApp, owner: &User, name: &str) -> String {
    let created = app.post("/api/workspaces", owner, json!({"name": name})).await;
    created.assert_status(201)["id"].as_str().unwrap().to_owned()
}

/// Invites into `workspace` with `role` as `by`, and has `user` accept: the invite's token.
pub(super) async fn join(app: &TestApp, workspace: &str, by: &User, user: &User, role: &str) {
    let invite = in_ws(
        app,
        workspace,
        by,
        Method::POST,
        "/api/workspace/invites",
        Some(json!({"role": role})),
    )
    .await;
    let token = invite.assert_status(201)["token"].as_str().unwrap().to_owned();
    app.post_empty(&format!("/api/invites/{token}/accept"), user).await.assert_status(200);
}

pub(super) async fn in_ws(
    app: &TestApp,
    workspace: &str,
    user: &User,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> crate::helpers::Reply {
    app.request_in(workspace, method, path, &user.token, body).await
}

backend_tests! { app;
    a_user_starts_in_a_personal_workspace_and_a_team_one_is_separate,
    an_invite_is_single_use_and_expires,
    the_last_owner_cannot_leave_or_be_demoted,
    another_workspaces_things_are_not_found,
}

backend_tests! { db;
    a_removed_member_is_refused_on_another_node_within_a_second,
}

async fn a_user_starts_in_a_personal_workspace_and_a_team_one_is_separate(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let listed = app.get("/api/workspaces", &ada).await;
    let personal = &listed.assert_status(200)["workspaces"];
    assert_eq!(personal.as_array().unwrap().len(), 1);
    assert_eq!(personal[0]["id"], ada.id.as_str(), "the personal workspace has the user's id");
    assert_eq!(
        (personal[0]["personal"].clone(), personal[0]["role"].clone()),
        (json!(true), json!("owner"))
    );
    app.create_agent(&ada, "mine").await;

    let ops = team(&app, &ada, "Ops").await;
    let current = in_ws(&app, &ops, &ada, Method::GET, "/api/workspace", None).await;
    assert_eq!(current.assert_status(200)["name"], "Ops");
    assert_eq!(current.body["personal"], false);
    let agent = json!({"id": "shared", "name": "Shared", "role_prompt": "Help.", "channel": "ops"});
    in_ws(&app, &ops, &ada, Method::POST, "/api/agents", Some(agent)).await.assert_status(201);
    // Each workspace sees its own agents; no header is the personal one, as before.
    let ids = |reply: &crate::helpers::Reply| -> Vec<String> {
        reply.body["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&app.get("/api/agents", &ada).await), ["mine"]);
    assert_eq!(ids(&in_ws(&app, &ops, &ada, Method::GET, "/api/agents", None).await), ["shared"]);
    let both = app.get("/api/workspaces", &ada).await;
    let names: Vec<&str> = both.body["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Test User", "Ops"], "personal first");

    // Bob, invited as a member, sees the shared agent and works on it; not Ada's own.
    let bob = app.register("bob@example.com").await;
    join(&app, &ops, &ada, &bob, "member").await;
    assert_eq!(ids(&in_ws(&app, &ops, &bob, Method::GET, "/api/agents", None).await), ["shared"]);
    let task = json!({"title": "From Bob"});
    in_ws(&app, &ops, &bob, Method::POST, "/api/agents/shared/backlog", Some(task))
        .await
        .assert_status(201);
    app.get("/api/agents/mine", &bob).await.assert_error(404, "agent_not_found");
    let members = in_ws(&app, &ops, &bob, Method::GET, "/api/workspace/members", None).await;
    let roles: Vec<(String, String)> = members.assert_status(200)["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["email"].as_str().unwrap().to_owned(), m["role"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        roles,
        [("ada@example.com".into(), "owner".into()), ("bob@example.com".into(), "member".into())]
    );
    // A workspace id that is not one, or one Carol is not in: not found.
    let carol = app.register("carol@example.com").await;
    in_ws(&app, &ops, &carol, Method::GET, "/api/agents", None)
        .await
        .assert_error(404, "workspace_not_found");
    in_ws(&app, "not-an-id", &carol, Method::GET, "/api/agents", None)
        .await
        .assert_error(404, "workspace_not_found");
}

async fn an_invite_is_single_use_and_expires(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    let invite = in_ws(
        &app,
        &ops,
        &ada,
        Method::POST,
        "/api/workspace/invites",
        Some(json!({"role": "viewer", "email": "bob@example.com"})),
    )
    .await;
    let token = invite.assert_status(201)["token"].as_str().unwrap().to_owned();
    assert_eq!(invite.body["role"], "viewer");
    let listed = in_ws(&app, &ops, &ada, Method::GET, "/api/workspace/invites", None).await;
    assert_eq!(listed.assert_status(200)["invites"].as_array().unwrap().len(), 1);
    assert!(!listed.body.to_string().contains(&token), "the token is shown once only");

    let (bob, carol) =
        (app.register("bob@example.com").await, app.register("carol@example.com").await);
    let accepted = app.post_empty(&format!("/api/invites/{token}/accept"), &bob).await;
    assert_eq!(accepted.assert_status(200)["role"], "viewer");
    app.post_empty(&format!("/api/invites/{token}/accept"), &carol)
        .await
        .assert_error(404, "invite_not_found");
    in_ws(&app, &ops, &carol, Method::GET, "/api/agents", None)
        .await
        .assert_error(404, "workspace_not_found");
    in_ws(&app, &ops, &bob, Method::GET, "/api/agents", None).await.assert_status(200);

    // Already a member: refused, and the invite stays for someone else.
    let again = in_ws(
        &app,
        &ops,
        &ada,
        Method::POST,
        "/api/workspace/invites",
        Some(json!({"role": "member"})),
    )
    .await;
    let again = again.assert_status(201)["token"].as_str().unwrap().to_owned();
    app.post_empty(&format!("/api/invites/{again}/accept"), &bob)
        .await
        .assert_error(409, "already_member");
    app.post_empty(&format!("/api/invites/{again}/accept"), &carol).await.assert_status(200);

    // Expired: as if it never was.
    let late = in_ws(
        &app,
        &ops,
        &ada,
        Method::POST,
        "/api/workspace/invites",
        Some(json!({"role": "member", "expires_in_hours": 1})),
    )
    .await;
    let late = late.assert_status(201)["token"].as_str().unwrap().to_owned();
    let past = match app.db.backend {
        Backend::Sqlite => "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '-1 seconds')",
        Backend::Postgres => "now() - interval '1 second'",
    };
    app.db
        .execute(&format!("UPDATE invites SET expires_at = {past} WHERE accepted_at IS NULL"), &[])
        .await;
    let dave = app.register("dave@example.com").await;
    app.post_empty(&format!("/api/invites/{late}/accept"), &dave)
        .await
        .assert_error(404, "invite_not_found");
    // Bounds: the role is checked, and the stay is 1 to 720 hours.
    let bad = in_ws(
        &app,
        &ops,
        &ada,
        Method::POST,
        "/api/workspace/invites",
        Some(json!({"role": "boss", "expires_in_hours": 721})),
    )
    .await;
    bad.assert_error(400, "validation_failed");
    let details = &bad.body["error"]["details"];
    assert!(
        details.get("role").is_some() && details.get("expires_in_hours").is_some(),
        "{details}"
    );
}

async fn the_last_owner_cannot_leave_or_be_demoted(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    let me = format!("/api/workspace/members/{}", ada.id);
    in_ws(&app, &ops, &ada, Method::DELETE, &me, None).await.assert_error(409, "last_owner");
    in_ws(&app, &ops, &ada, Method::PATCH, &me, Some(json!({"role": "admin"})))
        .await
        .assert_error(409, "last_owner");
    let bob = app.register("bob@example.com").await;
    join(&app, &ops, &ada, &bob, "admin").await;
    let bobs = format!("/api/workspace/members/{}", bob.id);
    // An admin cannot make an owner, nor unmake one.
    in_ws(&app, &ops, &bob, Method::PATCH, &bobs, Some(json!({"role": "owner"})))
        .await
        .assert_error(403, "forbidden");
    in_ws(&app, &ops, &bob, Method::DELETE, &me, None).await.assert_error(403, "forbidden");
    // With a second owner, the first may step down and leave.
    in_ws(&app, &ops, &ada, Method::PATCH, &bobs, Some(json!({"role": "owner"})))
        .await
        .assert_status(200);
    in_ws(&app, &ops, &ada, Method::PATCH, &me, Some(json!({"role": "viewer"})))
        .await
        .assert_status(200);
    in_ws(&app, &ops, &ada, Method::DELETE, &me, None).await.assert_status(200);
    in_ws(&app, &ops, &ada, Method::GET, "/api/agents", None)
        .await
        .assert_error(404, "workspace_not_found");
    in_ws(&app, &ops, &bob, Method::DELETE, &bobs, None).await.assert_error(409, "last_owner");
}

async fn another_workspaces_things_are_not_found(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    let agent = json!({"id": "alpha", "name": "Alpha", "role_prompt": "Help.", "channel": "ops"});
    in_ws(&app, &ops, &ada, Method::POST, "/api/agents", Some(agent)).await.assert_status(201);
    let key = in_ws(
        &app,
        &ops,
        &ada,
        Method::POST,
        "/api/workspace/keys",
        Some(json!({"name": "ci", "role": "member"})),
    )
    .await;
    let key_id = key.assert_status(201)["id"].as_str().unwrap().to_owned();
    let invite = in_ws(
        &app,
        &ops,
        &ada,
        Method::POST,
        "/api/workspace/invites",
        Some(json!({"role": "member"})),
    )
    .await;
    let invite_id = invite.assert_status(201)["id"].as_str().unwrap().to_owned();
    // Ada in her personal workspace, and Bob in his: none of Ops' things exist there.
    let bob = app.register("bob@example.com").await;
    for user in [&ada, &bob] {
        app.get("/api/agents/alpha", user).await.assert_error(404, "agent_not_found");
        app.delete(&format!("/api/workspace/keys/{key_id}"), user)
            .await
            .assert_error(404, "api_key_not_found");
        app.delete(&format!("/api/workspace/invites/{invite_id}"), user)
            .await
            .assert_error(404, "invite_not_found");
    }
    app.patch(&format!("/api/workspace/members/{}", ada.id), &bob, json!({"role": "viewer"}))
        .await
        .assert_error(404, "member_not_found");
    // A key of Ops names no other workspace.
    let secret = key.body["secret"].as_str().unwrap();
    let mine = app.request_in(&ada.id, Method::GET, "/api/agents", secret, None).await;
    mine.assert_error(404, "workspace_not_found");
}

async fn a_removed_member_is_refused_on_another_node_within_a_second(db: TestDb) {
    let a = crate::helpers::app_with(db, |_| {}).await;
    let b = TestApp::start(a.db.stand_in(), a.options.clone()).await;
    let ada = a.register("ada@example.com").await;
    let ops = team(&a, &ada, "Ops").await;
    let bob = a.register("bob@example.com").await;
    join(&a, &ops, &ada, &bob, "member").await;
    // Node B knows Bob as a member (and keeps it).
    for _ in 0..2 {
        in_ws(&b, &ops, &bob, Method::GET, "/api/agents", None).await.assert_status(200);
    }
    in_ws(&a, &ops, &ada, Method::DELETE, &format!("/api/workspace/members/{}", bob.id), None)
        .await
        .assert_status(200);
    in_ws(&a, &ops, &bob, Method::GET, "/api/agents", None)
        .await
        .assert_error(404, "workspace_not_found");
    eventually(Duration::from_secs(1), "node B refuses the removed member", || async {
        in_ws(&b, &ops, &bob, Method::GET, "/api/agents", None).await.status == 404
    })
    .await;
    // His own workspace is his still.
    b.get("/api/agents", &bob).await.assert_status(200);
}
