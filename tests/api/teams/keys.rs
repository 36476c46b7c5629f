//! API keys: a workspace and a role for scripts, shown once, stored hashed, revocable on every
//! node within a second, and never revoked by a person's logout.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::{in_ws, join, team};
use crate::helpers::{TestApp, TestDb, User, backend_tests, eventually};

backend_tests! { app;
    a_member_key_adds_tasks_and_cannot_invite_and_a_logout_leaves_it_working,
    a_member_cannot_manage_members_or_keys,
    a_key_is_stored_only_as_its_hash,
}

backend_tests! { db;
    a_revoked_key_is_refused_on_another_node_within_a_second,
}

/// A key of `workspace` with `role`, made by `by`: the key's id and a user that sends it.
async fn key(app: &TestApp, workspace: &str, by: &User, role: &str) -> (String, User) {
    let made = in_ws(
        app,
        workspace,
        by,
        Method::POST,
        "/api/workspace/keys",
        Some(json!({"name": format!("{role} script"), "role": role})),
    )
    .await;
    let body = made.assert_status(201);
    let secret = body["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with(&format!("{}_", body["prefix"].as_str().unwrap())), "{body}");
    assert!(secret.starts_with("agk_"), "secret scanners know the prefix: {secret}");
    (body["id"].as_str().unwrap().to_owned(), User { id: String::new(), token: secret })
}

async fn a_member_key_adds_tasks_and_cannot_invite_and_a_logout_leaves_it_working(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    let agent = json!({"id": "alpha", "name": "Alpha", "role_prompt": "Help.", "channel": "ops"});
    in_ws(&app, &ops, &ada, Method::POST, "/api/agents", Some(agent)).await.assert_status(201);
    let (id, script) = key(&app, &ops, &ada, "member").await;

    // No header needed: a key acts in its own workspace.
    app.post("/api/agents/alpha/backlog", &script, json!({"title": "From CI"}))
        .await
        .assert_status(201);
    app.post("/api/workspace/invites", &script, json!({"role": "viewer"}))
        .await
        .assert_error(403, "forbidden");
    app.post("/api/workspace/keys", &script, json!({"name": "more", "role": "member"}))
        .await
        .assert_error(403, "forbidden");
    app.get("/auth/me", &script).await.assert_error(403, "forbidden");
    let cancelled_by = {
        let task =
            app.post("/api/agents/alpha/backlog", &script, json!({"title": "Cancel me"})).await;
        let task = task.assert_status(201)["id"].as_str().unwrap().to_owned();
        let done =
            app.post_empty(&format!("/api/agents/alpha/backlog/{task}/cancel"), &script).await;
        done.assert_status(200)["cancelled_by"].clone()
    };
    assert_eq!(cancelled_by, "key:member script", "a key's acts are signed with its name");

    // Ada signs out everywhere: her sessions end, the key does not.
    app.post_empty("/auth/logout", &ada).await.assert_status(200);
    app.get("/api/agents", &ada).await.assert_error(401, "unauthorized");
    app.get("/api/agents/alpha", &script).await.assert_status(200);

    let ada = login(&app, "ada@example.com").await;
    let listed = in_ws(&app, &ops, &ada, Method::GET, "/api/workspace/keys", None).await;
    let listed = &listed.assert_status(200)["keys"][0];
    assert_eq!(listed["id"], id.as_str());
    assert!(listed["last_used_at"].is_string(), "{listed}");
    assert!(!listed.to_string().contains(&script.token), "the secret is shown once only");
    let revoked =
        in_ws(&app, &ops, &ada, Method::DELETE, &format!("/api/workspace/keys/{id}"), None).await;
    assert!(revoked.assert_status(200)["revoked_at"].is_string());
    app.get("/api/agents/alpha", &script).await.assert_error(401, "unauthorized");
    // A key that was never issued, and one altered by a character.
    let mut altered = script.token.clone();
    altered.pop();
    altered.push(if script.token.ends_with('0') { '1' } else { '0' });
    app.get("/api/agents", &User { id: String::new(), token: altered })
        .await
        .assert_error(401, "unauthorized");
}

async fn a_member_cannot_manage_members_or_keys(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    let bob = app.register("bob@example.com").await;
    join(&app, &ops, &ada, &bob, "member").await;
    let refused = [
        (Method::POST, "/api/workspace/invites".to_owned(), Some(json!({"role": "viewer"}))),
        (Method::GET, "/api/workspace/invites".to_owned(), None),
        (
            Method::POST,
            "/api/workspace/keys".to_owned(),
            Some(json!({"name": "k", "role": "viewer"})),
        ),
        (Method::GET, "/api/workspace/keys".to_owned(), None),
        (
            Method::PATCH,
            format!("/api/workspace/members/{}", ada.id),
            Some(json!({"role": "viewer"})),
        ),
        (Method::DELETE, format!("/api/workspace/members/{}", ada.id), None),
        (Method::PATCH, "/api/workspace".to_owned(), Some(json!({"name": "Mine now"}))),
    ];
    for (method, path, body) in refused {
        let reply = in_ws(&app, &ops, &bob, method.clone(), &path, body).await;
        reply.assert_error(403, "forbidden");
    }
    // An admin manages, but gives no more than they have.
    let carol = app.register("carol@example.com").await;
    join(&app, &ops, &ada, &carol, "admin").await;
    let owner_key = json!({"name": "k", "role": "owner"});
    in_ws(&app, &ops, &carol, Method::POST, "/api/workspace/keys", Some(owner_key))
        .await
        .assert_error(400, "validation_failed");
    in_ws(
        &app,
        &ops,
        &carol,
        Method::POST,
        "/api/workspace/invites",
        Some(json!({"role": "owner"})),
    )
    .await
    .assert_error(403, "forbidden");
    in_ws(
        &app,
        &ops,
        &carol,
        Method::POST,
        "/api/workspace/keys",
        Some(json!({"name": "k", "role": "admin"})),
    )
    .await
    .assert_status(201);
    // Bob may still leave on his own.
    in_ws(&app, &ops, &bob, Method::DELETE, &format!("/api/workspace/members/{}", bob.id), None)
        .await
        .assert_status(200);
}

async fn a_key_is_stored_only_as_its_hash(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let (id, script) = key(&app, &ada.id, &ada, "viewer").await;
    app.get("/api/agents", &script).await.assert_status(200);
    let secret_part = script.token.rsplit('_').next().unwrap().to_owned();
    let stored = app.db.text("SELECT secret_hash FROM api_keys WHERE id = $1", &[&id]).await;
    assert_ne!(stored, script.token);
    assert!(!stored.contains(&secret_part));
    // Nowhere in the database: every text column of every row, as a copy of it would show.
    let everywhere = match app.db.backend {
        crate::helpers::Backend::Postgres => app
            .db
            .count(
                "SELECT COUNT(*) FROM api_keys k WHERE row_to_json(k)::text LIKE '%' || $1 || '%'",
                &[&secret_part],
            )
            .await,
        crate::helpers::Backend::Sqlite => {
            let mut found = 0;
            for file in app.db.files() {
                if let Ok(bytes) = std::fs::read(&file) {
                    let text = String::from_utf8_lossy(&bytes);
                    found += i64::from(text.contains(&secret_part));
                }
            }
            found
        }
    };
    assert_eq!(everywhere, 0, "the key's secret is stored nowhere");
}

async fn a_revoked_key_is_refused_on_another_node_within_a_second(db: TestDb) {
    let a = crate::helpers::app_with(db, |_| {}).await;
    let b = TestApp::start(a.db.stand_in(), a.options.clone()).await;
    let ada = a.register("ada@example.com").await;
    let (id, script) = key(&a, &ada.id, &ada, "member").await;
    for _ in 0..2 {
        b.get("/api/agents", &script).await.assert_status(200);
    }
    a.delete(&format!("/api/workspace/keys/{id}"), &ada).await.assert_status(200);
    a.get("/api/agents", &script).await.assert_error(401, "unauthorized");
    eventually(Duration::from_secs(1), "node B refuses the revoked key", || async {
        b.get("/api/agents", &script).await.status == 401
    })
    .await;
}

async fn login(app: &TestApp, email: &str) -> User {
    let reply = app
        .post_anonymous("/auth/login", json!({"email": email, "password": "correct horse"}))
        .await;
    let body = reply.assert_status(200);
    User {
        id: body["user"]["id"].as_str().unwrap().to_owned(),
        token: body["access_token"].as_str().unwrap().to_owned(),
    }
}
