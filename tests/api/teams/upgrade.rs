//! A database the previous release made (its schema is migration 16) opens with every user's
//! data in their personal workspace, and works on.

use argon2::PasswordHasher;
use reqwest::Method;
use serde_json::json;

use super::{in_ws, join, team};
use crate::helpers::{Backend, TestDb, User, backend_tests};

backend_tests! { db;
    a_database_of_the_previous_release_opens_with_each_users_data_in_their_personal_workspace,
}

/// The schema of the release before workspaces.
const PREVIOUS_RELEASE: i64 = 16;
const AT: &str = "'2026-11-01T09:00:00.000000+00:00'";

async fn a_database_of_the_previous_release_opens_with_each_users_data_in_their_personal_workspace(
    db: TestDb,
) {
    db.migrate_to(PREVIOUS_RELEASE).await;
    let (ada, bob) = (uuid::Uuid::now_v7().to_string(), uuid::Uuid::now_v7().to_string());
    let salt = argon2::password_hash::SaltString::encode_b64(b"sixteen byte salt").unwrap();
    let hash =
        argon2::Argon2::default().hash_password(b"correct horse", &salt).unwrap().to_string();
    // The rows as the previous release wrote them: plan, customer and budget on the user.
    for (id, email, plan, customer, budget) in [
        (&ada, "ada@example.com", "team", "'cus_ada'", "5000000"),
        (&bob, "bob@example.com", "free", "NULL", "NULL"),
    ] {
        let sql = format!(
            "INSERT INTO users (id, email, email_key, name, password_hash, token_version, \
             created_at, updated_at, plan, stripe_customer_id, subscription_status, budget_micros) \
             VALUES ($1, $2, $2, 'Someone', $3, 0, {AT}, {AT}, $4, {customer}, NULL, {budget})"
        );
        db.execute(&sql, &[id, email, &hash, plan]).await;
        let agent = format!(
            "INSERT INTO agents (owner_id, id, name, status, channel, role_prompt, created_at, \
             updated_at) VALUES ($1, 'alpha', 'Alpha', 'idle', 'general', 'Help.', {AT}, {AT})"
        );
        db.execute(&agent, &[id]).await;
    }
    let task = format!(
        "INSERT INTO tasks (id, owner_id, agent_id, title, status, created_at, updated_at) \
         VALUES ($1, $2, 'alpha', 'Carried over', 'queued', {AT}, {AT})"
    );
    db.execute(&task, &[&uuid::Uuid::now_v7().to_string(), &ada]).await;
    let server = format!(
        "INSERT INTO mcp_servers (owner_id, name, url, token, created_at) \
         VALUES ($1, 'tools', 'https://93.184.215.14/mcp', NULL, {AT})"
    );
    db.execute(&server, &[&ada]).await;
    let spend = "INSERT INTO budget_spend (owner_id, month, agent_id, spent_micros) \
                 VALUES ($1, '2026-11', 'alpha', 1000)";
    db.execute(spend, &[&ada]).await;
    let subscription = format!(
        "INSERT INTO billing_subscriptions (id, customer_id, user_id, status, plan, \
         last_event_created, updated_at) VALUES ('sub_1', 'cus_ada', $1, 'active', 'team', 1, {AT})"
    );
    db.execute(&subscription, &[&ada]).await;
    let connection = format!(
        "INSERT INTO chat_connections (owner_id, guild_id, id, guild_name, kind, connected_at) \
         VALUES ($1, '4242', 'c1', 'Guild', 'oauth', {AT})"
    );
    db.execute(&connection, &[&bob]).await;

    // This release opens it, and migrates.
    let app = crate::helpers::app_with(db, |_| {}).await;
    let login = |email: &'static str| {
        let app = &app;
        async move {
            let body = json!({"email": email, "password": "correct horse"});
            let reply = app.post_anonymous("/auth/login", body).await;
            let body = reply.assert_status(200);
            User {
                id: body["user"]["id"].as_str().unwrap().to_owned(),
                token: body["access_token"].as_str().unwrap().to_owned(),
            }
        }
    };
    let (ada_user, bob_user) = (login("ada@example.com").await, login("bob@example.com").await);
    let listed = app.get("/api/workspaces", &ada_user).await;
    let workspaces = listed.assert_status(200)["workspaces"].as_array().unwrap().clone();
    assert_eq!(workspaces.len(), 1);
    let personal = &workspaces[0];
    assert_eq!(personal["id"], ada.as_str(), "the personal workspace has the user's id");
    assert_eq!(
        (personal["role"].as_str(), personal["plan"].as_str()),
        (Some("owner"), Some("team"))
    );
    assert_eq!(personal["personal"], true);
    let backlog = app.get("/api/agents/alpha/backlog", &ada_user).await;
    assert_eq!(backlog.assert_status(200)["tasks"][0]["title"], "Carried over");
    assert_eq!(app.get("/api/billing", &ada_user).await.assert_status(200)["plan"], "team");
    assert_eq!(app.get("/api/budget", &ada_user).await.assert_status(200)["monthly_usd"], 5.0);
    let servers = app.get("/api/mcp/servers", &ada_user).await;
    assert_eq!(servers.assert_status(200)["servers"][0]["name"], "tools");
    let connections = app.get("/api/chat/connections", &bob_user).await;
    assert_eq!(connections.assert_status(200)["connections"][0]["guild_id"], "4242");
    assert_eq!(
        app.get("/api/agents", &bob_user).await.assert_status(200)["agents"][0]["id"],
        "alpha"
    );
    assert_eq!(app.get("/api/billing", &bob_user).await.assert_status(200)["plan"], "free");

    // Every reference holds, and the data keeps working.
    if app.db.backend == Backend::Sqlite {
        assert_eq!(app.db.count("SELECT COUNT(*) FROM pragma_foreign_key_check", &[]).await, 0);
    }
    app.create_agent(&ada_user, "beta").await;
    let ops = team(&app, &ada_user, "Ops").await;
    join(&app, &ops, &ada_user, &bob_user, "member").await;
    let shared =
        json!({"id": "shared", "name": "Shared", "role_prompt": "Help.", "channel": "ops"});
    in_ws(&app, &ops, &bob_user, Method::POST, "/api/agents", Some(shared))
        .await
        .assert_status(201);
    app.delete("/api/agents/alpha", &ada_user).await.assert_status(200);
}
