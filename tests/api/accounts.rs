//! Registering, logging in and out, tokens, and the error body of the HTTP layer.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::helpers::{Backend, TestApp, TestDb, User, app_with, backend_tests, eventually};

fn register_body(email: &str, password: &str, name: &str) -> serde_json::Value {
    json!({"email": email, "password": password, "name": name})
}

backend_tests! { db;
    a_logout_on_one_node_refuses_the_token_on_another_within_a_second,
}

backend_tests! { app;
    registering_returns_a_token_and_the_user_and_me_returns_the_same_user,
    registration_refuses_each_invalid_field,
    malformed_and_empty_bodies_are_invalid_json,
    an_email_registers_once_whatever_its_letter_case,
    concurrent_registrations_of_one_email_create_exactly_one_account,
    login_returns_a_working_token_and_every_failure_looks_the_same,
    missing_garbage_and_foreign_tokens_are_unauthorized,
    logout_revokes_every_token_of_the_user,
    tokens_survive_a_restart_with_the_generated_secret,
    a_configured_secret_replaces_the_generated_one,
    every_response_carries_a_request_id_and_keeps_the_clients,
    bodies_over_one_mebibyte_are_refused,
    health_and_readiness_answer_and_unknown_routes_use_the_error_body,
    a_lifetime_set_later_refuses_the_tokens_issued_without_one,
    every_answer_forbids_content_sniffing,
    an_address_in_either_unicode_form_is_one_account_and_invisible_marks_are_refused,
    a_copy_of_the_database_cannot_mint_a_token_and_a_key_stored_in_clear_is_sealed,
}

async fn registering_returns_a_token_and_the_user_and_me_returns_the_same_user(app: TestApp) {
    let reply = app
        .post_anonymous(
            "/auth/register",
            register_body("  Ada@Example.com ", "correct horse", "Ada Lovelace"),
        )
        .await;
    let body = reply.assert_status(201).clone();
    assert_eq!(body["token_type"], "Bearer");
    let token = body["access_token"].as_str().unwrap();
    assert_eq!(token.split('.').count(), 3, "a JWT");
    let user = &body["user"];
    assert_eq!(user["email"], "Ada@Example.com");
    assert_eq!(user["name"], "Ada Lovelace");
    assert!(uuid::Uuid::parse_str(user["id"].as_str().unwrap()).is_ok());
    assert_eq!(user.as_object().unwrap().len(), 3);

    let me = app.request(Method::GET, "/auth/me", Some(token), None).await;
    assert_eq!(me.assert_status(200), user);
}

async fn registration_refuses_each_invalid_field(app: TestApp) {
    let cases = [
        (register_body("not-an-email", "correct horse", "Ada"), "email"),
        (register_body("ada@", "correct horse", "Ada"), "email"),
        (register_body("ada@example.com", "short", "Ada"), "password"),
        (register_body("ada@example.com", &"x".repeat(1025), "Ada"), "password"),
        (register_body("ada@example.com", "correct horse", ""), "name"),
        (register_body("ada@example.com", "correct horse", &"n".repeat(101)), "name"),
        (json!({"email": "ada@example.com", "password": "correct horse"}), "name"),
        (json!({"email": "ada@example.com", "password": 12345678, "name": "Ada"}), "password"),
        (
            json!({"email": ["ada@example.com"], "password": "correct horse", "name": "Ada"}),
            "email",
        ),
    ];
    for (body, field) in cases {
        let reply = app.post_anonymous("/auth/register", body.clone()).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"][field].is_string(), "{body} -> {}", reply.body);
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM users", &[]).await, 0);
}

async fn malformed_and_empty_bodies_are_invalid_json(app: TestApp) {
    for raw in ["{\"email\": ", "not json", "", "{} {}", "{\"email\": 5, \"password\": "] {
        let reply = app.send_raw(Method::POST, "/auth/register", None, raw).await;
        reply.assert_error(400, "invalid_json");
    }
    let reply = app.send_raw(Method::POST, "/auth/register", None, "[1, 2]").await;
    reply.assert_error(400, "validation_failed");
}

async fn an_email_registers_once_whatever_its_letter_case(app: TestApp) {
    app.register("grace@example.com").await;
    let reply = app
        .post_anonymous(
            "/auth/register",
            register_body("GRACE@example.COM", "another pass", "Grace"),
        )
        .await;
    reply.assert_error(409, "email_taken");
}

async fn concurrent_registrations_of_one_email_create_exactly_one_account(app: TestApp) {
    let attempts = (0..10).map(|i| {
        app.post_anonymous(
            "/auth/register",
            register_body("race@example.com", "correct horse", &format!("Racer {i}")),
        )
    });
    let replies = futures::future::join_all(attempts).await;
    let created = replies.iter().filter(|r| r.status == 201).count();
    let taken = replies.iter().filter(|r| r.status == 409 && r.code() == "email_taken").count();
    assert_eq!((created, taken), (1, 9));
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM users WHERE email_key = $1", &["race@example.com"])
            .await,
        1
    );
}

async fn login_returns_a_working_token_and_every_failure_looks_the_same(app: TestApp) {
    let user = app.register("alan@example.com").await;
    let reply = app
        .post_anonymous(
            "/auth/login",
            json!({"email": " ALAN@example.com", "password": "correct horse"}),
        )
        .await;
    let body = reply.assert_status(200).clone();
    assert_eq!(body["user"]["id"], user.id.as_str());
    let me = app.request(Method::GET, "/auth/me", body["access_token"].as_str(), None).await;
    assert_eq!(me.assert_status(200)["email"], "alan@example.com");

    let wrong_password = app
        .post_anonymous(
            "/auth/login",
            json!({"email": "alan@example.com", "password": "wrong horse"}),
        )
        .await;
    let unknown_email = app
        .post_anonymous(
            "/auth/login",
            json!({"email": "nobody@example.com", "password": "correct horse"}),
        )
        .await;
    wrong_password.assert_error(401, "unauthorized");
    unknown_email.assert_error(401, "unauthorized");
    assert_eq!(wrong_password.body["error"]["message"], unknown_email.body["error"]["message"]);
    let nul_email = app
        .post_anonymous(
            "/auth/login",
            json!({"email": "alan\0@example.com", "password": "correct horse"}),
        )
        .await;
    nul_email.assert_error(401, "unauthorized");

    let missing = app.post_anonymous("/auth/login", json!({"email": "alan@example.com"})).await;
    missing.assert_error(400, "validation_failed");
    assert_eq!(missing.body["error"]["details"]["password"], "is required");
}

async fn missing_garbage_and_foreign_tokens_are_unauthorized(app: TestApp) {
    let user = app.register("tokens@example.com").await;
    let foreign = {
        // A well-formed token signed with another secret.
        let other = agentcore::Core::open({
            let mut config = app.options.core_config(&app.db);
            config.database_url = agentcore::store::DatabaseUrl::new("sqlite::memory:");
            config.jwt_secret =
                Some("another secret, long enough for HS256 keys".to_owned().into());
            config
        })
        .await
        .unwrap();
        let session = other
            .register(
                agentcore::api::RegisterRequest {
                    email: Some("tokens@example.com".into()),
                    password: Some("correct horse".into()),
                    name: Some("X".into()),
                }
                .parse()
                .unwrap(),
            )
            .await
            .unwrap();
        session.access_token
    };
    for path in ["/auth/me", "/api/agents"] {
        app.request(Method::GET, path, None, None).await.assert_error(401, "unauthorized");
        app.request(Method::GET, path, Some("garbage"), None)
            .await
            .assert_error(401, "unauthorized");
        app.request(Method::GET, path, Some(&foreign), None)
            .await
            .assert_error(401, "unauthorized");
        let basic = app
            .client
            .get(format!("{}{path}", app.address))
            .header("authorization", format!("Basic {}", user.token))
            .send()
            .await
            .unwrap();
        assert_eq!(basic.status(), 401);
    }
    let reply = app.request(Method::GET, "/auth/me", None, None).await;
    assert_eq!(reply.headers["www-authenticate"], "Bearer");
}

async fn logout_revokes_every_token_of_the_user(app: TestApp) {
    let user = app.register("logout@example.com").await;
    let second = app
        .post_anonymous(
            "/auth/login",
            json!({"email": "logout@example.com", "password": "correct horse"}),
        )
        .await;
    let second_token = second.body["access_token"].as_str().unwrap().to_owned();
    let other = app.register("stays@example.com").await;

    let reply = app.request(Method::POST, "/auth/logout", Some(&user.token), None).await;
    assert_eq!(reply.assert_status(200), &json!({"status": "logged_out"}));

    app.request(Method::GET, "/auth/me", Some(&user.token), None)
        .await
        .assert_error(401, "unauthorized");
    app.request(Method::GET, "/auth/me", Some(&second_token), None)
        .await
        .assert_error(401, "unauthorized");
    app.request(Method::POST, "/auth/logout", Some(&user.token), None)
        .await
        .assert_error(401, "unauthorized");
    app.get("/auth/me", &other).await.assert_status(200);

    let again = app
        .post_anonymous(
            "/auth/login",
            json!({"email": "logout@example.com", "password": "correct horse"}),
        )
        .await;
    let fresh = again.body["access_token"].as_str().unwrap();
    app.request(Method::GET, "/auth/me", Some(fresh), None).await.assert_status(200);
}

async fn tokens_survive_a_restart_with_the_generated_secret(app: TestApp) {
    let user = app.register("restart@example.com").await;
    let (db, options) = app.stop().await;
    let app = TestApp::start(db, options).await;
    app.get("/auth/me", &user).await.assert_status(200);
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM secrets WHERE name = 'jwt_secret'", &[]).await,
        1
    );
}

async fn a_configured_secret_replaces_the_generated_one(app: TestApp) {
    let user = app.register("secret@example.com").await;
    let (db, mut options) = app.stop().await;
    options.jwt_secret = Some("an operator-chosen secret of 32+ bytes".into());
    let app = TestApp::start(db, options).await;
    app.get("/auth/me", &user).await.assert_error(401, "unauthorized");
}

async fn every_response_carries_a_request_id_and_keeps_the_clients(app: TestApp) {
    let reply = app.request(Method::GET, "/healthz", None, None).await;
    assert!(reply.headers.contains_key("x-request-id"));
    let sent = app
        .client
        .get(format!("{}/auth/me", app.address))
        .header("x-request-id", "client-chosen-42")
        .send()
        .await
        .unwrap();
    assert_eq!(sent.headers()["x-request-id"], "client-chosen-42");
    let body: serde_json::Value = sent.json().await.unwrap();
    assert_eq!(body["error"]["request_id"], "client-chosen-42");
}

async fn bodies_over_one_mebibyte_are_refused(app: TestApp) {
    let user = app.register("big@example.com").await;
    let prompt = "x".repeat(1024 * 1024);
    let body =
        json!({"id": "big", "name": "Big", "role_prompt": prompt, "channel": "c"}).to_string();
    let reply = app.send_raw(Method::POST, "/api/agents", Some(&user.token), body).await;
    reply.assert_error(413, "payload_too_large");
}

async fn health_and_readiness_answer_and_unknown_routes_use_the_error_body(app: TestApp) {
    assert_eq!(
        app.request(Method::GET, "/healthz", None, None).await.assert_status(200),
        &json!({"status": "ok"})
    );
    assert_eq!(
        app.request(Method::GET, "/readyz", None, None).await.assert_status(200),
        &json!({"status": "ready"})
    );
    app.request(Method::GET, "/no/such/route", None, None)
        .await
        .assert_error(404, "route_not_found");
    app.request(Method::DELETE, "/auth/login", None, None)
        .await
        .assert_error(405, "method_not_allowed");
    let user = app.register("routes@example.com").await;
    app.get("/api/agents/%FF", &user).await.assert_error(404, "route_not_found");
    app.core.close().await;
    app.request(Method::GET, "/readyz", None, None).await.assert_error(503, "not_ready");
}

/// Tokens are checked against each node's cache of token versions: a logout on one node must
/// still reach the others, through PostgreSQL's notifications (or, on SQLite, the cache's
/// short trust), also while a node's listener is reconnecting.
async fn a_logout_on_one_node_refuses_the_token_on_another_within_a_second(db: TestDb) {
    let a = app_with(db, |_| {}).await;
    let b = TestApp::start(a.db.stand_in(), a.options.clone()).await;
    for round in 0..2 {
        let user = a.register(&format!("two-nodes-{round}@example.com")).await;
        b.get("/api/agents", &user).await.assert_status(200);
        b.get("/api/agents", &user).await.assert_status(200);
        if round == 1 && a.db.backend == Backend::Postgres {
            // Cut every listening connection: B's listener reconnects meanwhile.
            let sql = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                       WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()";
            let pool = sqlx::PgPool::connect(&a.db.url_for_process()).await.unwrap();
            sqlx::query(sql).execute(&pool).await.unwrap();
            pool.close().await;
        }
        a.post_empty("/auth/logout", &user).await.assert_status(200);
        a.get("/api/agents", &user).await.assert_error(401, "unauthorized");
        eventually(Duration::from_secs(1), "node B refuses the revoked token", || async {
            b.get("/api/agents", &user).await.status == 401
        })
        .await;
    }
}

async fn a_lifetime_set_later_refuses_the_tokens_issued_without_one(app: TestApp) {
    // Issued with no lifetime configured: the token carries no expiry.
    let user = app.register("lifetime@example.com").await;
    let (db, mut options) = app.stop().await;
    options.token_ttl = Some(Duration::from_secs(3600));
    let app = TestApp::start(db, options).await;
    app.get("/auth/me", &user).await.assert_error(401, "unauthorized");
    let login = app
        .post_anonymous(
            "/auth/login",
            json!({"email": "lifetime@example.com", "password": "correct horse"}),
        )
        .await;
    let token = login.assert_status(200)["access_token"].as_str().unwrap().to_owned();
    let again = User { id: user.id.clone(), token };
    app.get("/auth/me", &again).await.assert_status(200);
}

async fn every_answer_forbids_content_sniffing(app: TestApp) {
    let user = app.register("sniff@example.com").await;
    let answers = [
        app.request(Method::GET, "/healthz", None, None).await,
        app.request(Method::GET, "/openapi.json", None, None).await,
        app.request(Method::GET, "/no/such/route", None, None).await,
        app.request(Method::GET, "/auth/me", None, None).await,
        app.get("/api/agents", &user).await,
        app.post("/api/agents", &user, json!({"id": "Bad Id"})).await,
        app.send_raw(Method::POST, "/api/agents", Some(&user.token), "x".repeat(1 << 21)).await,
    ];
    for answer in answers {
        assert_eq!(answer.headers["x-content-type-options"], "nosniff", "{answer:?}");
    }
}

async fn an_address_in_either_unicode_form_is_one_account_and_invisible_marks_are_refused(
    app: TestApp,
) {
    let composed = "jos\u{e9}@example.com";
    let decomposed = "jose\u{301}@example.com";
    let registered = app
        .post_anonymous("/auth/register", register_body(composed, "correct horse", "Jose"))
        .await;
    let id = registered.assert_status(201)["user"]["id"].clone();
    let again = register_body(decomposed, "another pass", "Impostor");
    app.post_anonymous("/auth/register", again).await.assert_error(409, "email_taken");
    let upper = register_body("JOS\u{c9}@EXAMPLE.COM", "another pass", "Impostor");
    app.post_anonymous("/auth/register", upper).await.assert_error(409, "email_taken");
    let login = json!({"email": decomposed, "password": "correct horse"});
    let session = app.post_anonymous("/auth/login", login).await;
    assert_eq!(session.assert_status(200)["user"]["id"], id, "one account");

    for hidden in ["ada\u{200b}@example.com", "\u{202e}moc.elpmaxe@ada", "a\u{2066}da@example.com"]
    {
        let refused = app
            .post_anonymous("/auth/register", register_body(hidden, "correct horse", "Ada"))
            .await;
        refused.assert_error(400, "validation_failed");
        let why = refused.body["error"]["details"]["email"].as_str().unwrap_or_default();
        assert!(why.contains("invisible"), "{hidden:?}: {why}");
    }
    let users = app.db.count("SELECT COUNT(*) FROM users", &[]).await;
    assert_eq!(users, 1);
}

/// An HS256 access token for `user_id` signed with `key`, as anyone holding the key could make.
fn minted(user_id: &str, key: &str) -> String {
    let claims = json!({"sub": user_id, "ver": 0, "iat": chrono::Utc::now().timestamp()});
    let key = jsonwebtoken::EncodingKey::from_secret(key.as_bytes());
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key).unwrap()
}

async fn a_copy_of_the_database_cannot_mint_a_token_and_a_key_stored_in_clear_is_sealed(
    app: TestApp,
) {
    const KEY: &str = "SELECT value FROM secrets WHERE name = 'jwt_secret'";
    let user = app.register("mint@example.com").await;
    let stored = app.db.text(KEY, &[]).await;
    assert!(stored.starts_with("v1:"), "the key is stored sealed: {stored}");
    let forged = minted(user.id.as_str(), &stored);
    let me = app.request(Method::GET, "/auth/me", Some(&forged), None).await;
    me.assert_error(401, "unauthorized");
    app.get("/auth/me", &user).await.assert_status(200);

    // A deployment from before kept its key in clear, and tokens signed with it are out there.
    let (db, options) = app.stop().await;
    let clear = "0123456789abcdef".repeat(4);
    db.execute("UPDATE secrets SET value = $1 WHERE name = 'jwt_secret'", &[&clear]).await;
    let app = TestApp::start(db, options).await;
    let issued_before = minted(user.id.as_str(), &clear);
    let me = app.request(Method::GET, "/auth/me", Some(&issued_before), None).await;
    me.assert_status(200);
    let sealed = app.db.text(KEY, &[]).await;
    assert!(sealed.starts_with("v1:") && !sealed.contains(&clear), "sealed in place: {sealed}");
    let (db, options) = app.stop().await;
    let app = TestApp::start(db, options).await;
    let me = app.request(Method::GET, "/auth/me", Some(&issued_before), None).await;
    me.assert_status(200);
}
