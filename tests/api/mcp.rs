//! MCP servers users add: only streamable HTTP, only on public addresses (unless the operator
//! allows private ones), their tokens sealed and never shown, each visible to its owner alone.

use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, app_with, backend_tests};
use support::mcp_server::McpHttpServer;

backend_tests! { db;
    a_url_that_reaches_a_private_address_is_refused_unless_the_operator_allows_it,
    a_users_server_is_theirs_alone_and_its_token_is_never_returned,
}

async fn private_ok(db: TestDb) -> TestApp {
    app_with(db, |o| o.tools.http.allow_private = true).await
}

async fn a_url_that_reaches_a_private_address_is_refused_unless_the_operator_allows_it(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let user = app.register("ssrf@example.com").await;
    for url in ["http://127.0.0.1:9/mcp", "http://localhost:9/mcp", "http://[::1]:9/mcp"] {
        let refused =
            app.post("/api/mcp/servers", &user, json!({"name": "mine", "url": url})).await;
        refused.assert_error(400, "validation_failed");
        let why = refused.body["error"]["details"]["url"].as_str().unwrap();
        assert!(why.contains("loopback") && why.contains("allow_private"), "{url}: {why}");
    }
    for (body, field) in [
        (json!({"name": "mine", "url": "file:///etc/passwd"}), "url"),
        (json!({"name": "Mine", "url": "https://mcp.example.com/"}), "name"),
        (json!({"name": "mine"}), "url"),
        (json!({"name": "mine", "url": "https://mcp.example.com/", "token": "a b"}), "token"),
    ] {
        let refused = app.post("/api/mcp/servers", &user, body.clone()).await;
        refused.assert_error(400, "validation_failed");
        assert!(refused.body["error"]["details"][field].is_string(), "{body}: {}", refused.body);
    }
    let listed = app.get("/api/mcp/servers", &user).await;
    assert_eq!(listed.assert_status(200)["servers"], json!([]), "nothing was stored");

    let (db, mut options) = app.stop().await;
    options.tools.http.allow_private = true;
    let app = TestApp::start(db, options).await;
    let user = app.register("intranet@example.com").await;
    let added = app
        .post("/api/mcp/servers", &user, json!({"name": "mine", "url": "http://127.0.0.1:9/mcp"}))
        .await;
    assert_eq!(added.assert_status(201)["has_token"], false);

    // The operator takes the permission back: the stored URL is refused when connecting.
    let (db, mut options) = app.stop().await;
    options.tools.http.allow_private = false;
    let app = TestApp::start(db, options).await;
    let tools = app.get("/api/tools", &user).await.assert_status(200).clone();
    let error = tools["mcp_servers"][0]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("loopback"), "{tools}");
}

async fn a_users_server_is_theirs_alone_and_its_token_is_never_returned(db: TestDb) {
    const TOKEN: &str = "mcp-secret-token-42";
    let server = McpHttpServer::start().await;
    let app = private_ok(db).await;
    let owner = app.register("owner@example.com").await;
    let body = json!({"name": "mine", "url": server.url, "token": TOKEN});
    let added = app.post("/api/mcp/servers", &owner, body.clone()).await;
    assert_eq!(added.assert_status(201)["has_token"], true);
    assert!(!added.body.to_string().contains(TOKEN), "{}", added.body);
    app.post("/api/mcp/servers", &owner, body).await.assert_error(409, "mcp_server_exists");
    let sealed = "SELECT COUNT(*) FROM mcp_servers WHERE token LIKE 'v1:%' AND token NOT LIKE $1";
    assert_eq!(app.db.count(sealed, &[&format!("%{TOKEN}%")]).await, 1, "stored sealed");

    let listed = app.get("/api/mcp/servers", &owner).await.assert_status(200).clone();
    assert_eq!(listed["servers"][0]["name"], "mine");
    assert_eq!(listed["servers"][0]["url"], server.url);
    assert!(!listed.to_string().contains(TOKEN));

    let tested = app.post_empty("/api/mcp/servers/mine/test", &owner).await;
    let tested = tested.assert_status(200).clone();
    assert_eq!((tested["origin"].as_str(), tested.get("error")), (Some("user"), None));
    assert_eq!(tested["tools"][0]["name"], "mine__add");
    let sent = server.authorizations.lock().unwrap().clone();
    assert!(!sent.is_empty() && sent.iter().all(|h| *h == format!("Bearer {TOKEN}")), "{sent:?}");
    let tools = app.get("/api/tools", &owner).await.assert_status(200).clone();
    let mine: Vec<&Value> = tools["mcp_servers"].as_array().unwrap().iter().collect();
    assert_eq!((mine.len(), &mine[0]["server"]), (1, &json!("mine")));

    let other = app.register("other@example.com").await;
    let theirs = app.get("/api/mcp/servers", &other).await.assert_status(200).clone();
    assert_eq!(theirs["servers"], json!([]));
    let empty = app.get("/api/tools", &other).await.assert_status(200).clone();
    assert_eq!(empty["mcp_servers"], json!([]));
    app.post_empty("/api/mcp/servers/mine/test", &other)
        .await
        .assert_error(404, "mcp_server_not_found");
    app.delete("/api/mcp/servers/mine", &other).await.assert_error(404, "mcp_server_not_found");
    let agent = json!({"id": "a", "name": "A", "role_prompt": "Work.", "channel": "general",
                       "mcp_servers": ["mine"]});
    app.post("/api/agents", &other, agent.clone()).await.assert_error(400, "validation_failed");
    app.post("/api/agents", &owner, agent).await.assert_status(201);

    let deleted = app.delete("/api/mcp/servers/mine", &owner).await;
    assert_eq!(deleted.assert_status(200)["deleted"], "mine");
    app.post_empty("/api/mcp/servers/mine/test", &owner)
        .await
        .assert_error(404, "mcp_server_not_found");
}
