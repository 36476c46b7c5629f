//! Two `agentd` processes on one database: a member removed, or a key revoked, through one is
//! refused by the other within a second.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::Server;
use crate::helpers::{TestDb, backend_tests, eventually};

backend_tests! { db;
    a_removed_member_and_a_revoked_key_are_refused_by_another_process_within_a_second,
}

async fn a_removed_member_and_a_revoked_key_are_refused_by_another_process_within_a_second(
    db: TestDb,
) {
    let data_dir = tempfile::tempdir().unwrap();
    let env = vec![
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", db.url_for_process()),
    ];
    let (a, b) = (Server::start(&env).await, Server::start(&env).await);
    let ada = a.register("ada@example.com").await;
    let bob = a.register("bob@example.com").await;
    let ops = a.post("/api/workspaces", &ada, json!({"name": "Ops"}), 201).await;
    let ops = ops["id"].as_str().unwrap().to_owned();
    let (status, invite) =
        in_ops(&a, &ops, Method::POST, "/api/workspace/invites", &ada, json!({"role": "member"}))
            .await;
    assert_eq!(status, 201, "{invite}");
    let accept = format!("/api/invites/{}/accept", invite["token"].as_str().unwrap());
    a.post(&accept, &bob, Value::Null, 200).await;
    let (status, key) = in_ops(
        &a,
        &ops,
        Method::POST,
        "/api/workspace/keys",
        &ada,
        json!({"name": "ci", "role": "member"}),
    )
    .await;
    assert_eq!(status, 201, "{key}");
    let secret = key["secret"].as_str().unwrap().to_owned();

    // Process B knows both (and keeps them while it trusts what it read).
    for _ in 0..2 {
        assert_eq!(in_ops(&b, &ops, Method::GET, "/api/agents", &bob, Value::Null).await.0, 200);
        assert_eq!(b.send(Method::GET, "/api/agents", Some(&secret), Value::Null).await.0, 200);
    }
    let remove = format!("/api/workspace/members/{}", me(&a, &bob).await);
    assert_eq!(in_ops(&a, &ops, Method::DELETE, &remove, &ada, Value::Null).await.0, 200);
    let revoke = format!("/api/workspace/keys/{}", key["id"].as_str().unwrap());
    assert_eq!(in_ops(&a, &ops, Method::DELETE, &revoke, &ada, Value::Null).await.0, 200);
    eventually(Duration::from_secs(1), "process B refuses the removed member", || async {
        in_ops(&b, &ops, Method::GET, "/api/agents", &bob, Value::Null).await.0 == 404
    })
    .await;
    eventually(Duration::from_secs(1), "process B refuses the revoked key", || async {
        b.send(Method::GET, "/api/agents", Some(&secret), Value::Null).await.0 == 401
    })
    .await;
}

/// [`Server::send_in`] the workspace `ops`.
async fn in_ops(
    server: &Server,
    ops: &str,
    method: Method,
    path: &str,
    token: &str,
    body: Value,
) -> (u16, Value) {
    server.send_in(Some(ops), method, path, Some(token), body).await
}

/// The user id behind a token.
async fn me(server: &Server, token: &str) -> String {
    let (status, me) = server.send(Method::GET, "/auth/me", Some(token), Value::Null).await;
    assert_eq!(status, 200);
    me["id"].as_str().unwrap().to_owned()
}
