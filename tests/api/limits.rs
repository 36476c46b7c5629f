//! Abuse limits and HTTP bounds through the real server: sign-ins per client address, requests
//! per user, the body limit, the request deadline against a slow client, and CORS.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{Reply, TestApp, TestDb, app_with, backend_tests};

fn retry_after(reply: &Reply) -> u64 {
    assert_eq!(reply.status.as_u16(), 429, "{}", reply.body);
    assert_eq!(reply.code(), "rate_limited");
    assert!(reply.body["error"]["request_id"].is_string());
    let seconds = reply.headers["retry-after"].to_str().unwrap().parse::<u64>().unwrap();
    assert!((1..=60).contains(&seconds), "Retry-After {seconds}");
    seconds
}

async fn login(app: &TestApp, forwarded_for: Option<&str>) -> Reply {
    let mut request = app
        .client
        .post(format!("{}/auth/login", app.address))
        .json(&json!({"email": "nobody@example.com", "password": "guess guess"}));
    if let Some(address) = forwarded_for {
        request = request.header("x-forwarded-for", address);
    }
    crate::helpers::read(request.send().await.unwrap()).await
}

async fn preflight(app: &TestApp, origin: &str) -> reqwest::Response {
    app.client
        .request(Method::OPTIONS, format!("{}/api/agents", app.address))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization, content-type")
        .send()
        .await
        .unwrap()
}

backend_tests! { db;
    sign_ins_are_limited_per_client_address,
    behind_a_trusted_proxy_each_forwarded_address_has_its_own_budget,
    one_account_has_a_sign_in_budget_across_addresses,
    each_user_has_a_request_budget_and_cors_is_off_by_default,
    bodies_over_the_limit_are_refused_and_nothing_is_created,
    a_client_that_stalls_mid_body_gets_408,
    a_client_that_never_finishes_its_headers_is_disconnected,
    cors_allows_only_configured_origins,
}

async fn sign_ins_are_limited_per_client_address(db: TestDb) {
    let app = app_with(db, |o| o.limits.auth_per_minute = 3).await;
    for _ in 0..3 {
        login(&app, None).await.assert_status(401);
    }
    let refused = login(&app, None).await;
    retry_after(&refused);
    // Registering counts against the same budget; other routes do not.
    let register = app
        .post_anonymous(
            "/auth/register",
            json!({"email": "new@example.com", "password": "correct horse", "name": "N"}),
        )
        .await;
    retry_after(&register);
    app.request(Method::GET, "/healthz", None, None).await.assert_status(200);
    // Without a trusted proxy, X-Forwarded-For is the client's word and changes nothing.
    retry_after(&login(&app, Some("203.0.113.9")).await);
}

async fn behind_a_trusted_proxy_each_forwarded_address_has_its_own_budget(db: TestDb) {
    let app = app_with(db, |o| {
        o.limits.auth_per_minute = 2;
        o.http.trust_forwarded_for = true;
    })
    .await;
    for _ in 0..2 {
        login(&app, Some("198.51.100.1, 203.0.113.1")).await.assert_status(401);
    }
    retry_after(&login(&app, Some("198.51.100.1, 203.0.113.1")).await);
    // The proxy's own hop (the last) is the client, not what the client claimed before it.
    retry_after(&login(&app, Some("198.51.100.77, 203.0.113.1")).await);
    login(&app, Some("203.0.113.2")).await.assert_status(401);
}

async fn each_user_has_a_request_budget_and_cors_is_off_by_default(db: TestDb) {
    let app = app_with(db, |o| o.limits.requests_per_minute = 5).await;
    let reply = preflight(&app, "https://app.example.com").await;
    assert!(reply.headers().get("access-control-allow-origin").is_none());
    let (ada, bob) = (app.register("ada@example.com").await, app.register("bob@example.com").await);
    for _ in 0..5 {
        app.get("/api/agents", &ada).await.assert_status(200);
    }
    let refused = app.get("/api/agents", &ada).await;
    retry_after(&refused);
    app.get("/api/agents", &bob).await.assert_status(200);
}

async fn bodies_over_the_limit_are_refused_and_nothing_is_created(db: TestDb) {
    let app = app_with(db, |o| o.http.body_limit_bytes = 1000).await;
    let user = app.register("big@example.com").await;
    let big = json!({"id": "big", "name": "Big", "role_prompt": "x".repeat(2000), "channel": "c"});
    let reply = app.post("/api/agents", &user, big).await;
    assert_eq!(reply.status.as_u16(), 413);
    assert_eq!(reply.code(), "payload_too_large");
    app.get("/api/agents/big", &user).await.assert_status(404);
}

async fn a_client_that_stalls_mid_body_gets_408(db: TestDb) {
    let app = app_with(db, |o| o.http.request_timeout = Duration::from_millis(300)).await;
    let address = app.address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    // Headers promise 100 bytes; only 10 come.
    stream.write_all(b"POST /auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"email\":").await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buffer = [0u8; 4096];
        loop {
            let n = stream.read(&mut buffer).await.unwrap();
            answer.extend_from_slice(&buffer[..n]);
            if n == 0 || String::from_utf8_lossy(&answer).contains("request_timeout") {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server answered within the deadline");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
}

async fn a_client_that_never_finishes_its_headers_is_disconnected(db: TestDb) {
    let app = app_with(db, |o| o.http.request_timeout = Duration::from_millis(300)).await;
    let mut stream =
        tokio::net::TcpStream::connect(app.address.trim_start_matches("http://")).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the connection is closed once the header deadline passes");
    // The server still serves everyone else.
    app.request(Method::GET, "/healthz", None, None).await.assert_status(200);
}

async fn cors_allows_only_configured_origins(db: TestDb) {
    let open = app_with(db, |o| o.http.cors_origins = vec!["https://app.example.com".into()]).await;
    let reply = preflight(&open, "https://app.example.com").await;
    assert!(reply.status().is_success(), "{}", reply.status());
    assert_eq!(reply.headers()["access-control-allow-origin"], "https://app.example.com");
    let methods = reply.headers()["access-control-allow-methods"].to_str().unwrap().to_owned();
    assert!(methods.contains("PATCH") && methods.contains("DELETE"), "{methods}");
    let reply = preflight(&open, "https://evil.example").await;
    assert!(reply.headers().get("access-control-allow-origin").is_none());
    // Ordinary answers carry the header for the allowed origin, errors included.
    let unauthorized = open
        .client
        .get(format!("{}/api/agents", open.address))
        .header("origin", "https://app.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status().as_u16(), 401);
    assert_eq!(unauthorized.headers()["access-control-allow-origin"], "https://app.example.com");
}

async fn one_account_has_a_sign_in_budget_across_addresses(db: TestDb) {
    let app = app_with(db, |o| {
        o.limits.auth_per_minute = 2;
        o.limits.sign_ins_per_account_per_minute = 3;
        o.http.trust_forwarded_for = true;
    })
    .await;
    app.register("target@example.com").await;
    let attempt = |address: String, email: &'static str, password: &'static str| {
        let request = app
            .client
            .post(format!("{}/auth/login", app.address))
            .header("x-forwarded-for", address)
            .json(&json!({"email": email, "password": password}));
        async move { crate::helpers::read(request.send().await.unwrap()).await }
    };
    // Each guess from an address of its own: the per-address budget never runs out.
    for n in 0..3 {
        attempt(format!("198.51.100.{n}"), "target@example.com", "guess guess")
            .await
            .assert_status(401);
    }
    // The account's budget did, however the address is written or the letters cased.
    let refused = attempt("198.51.100.50".into(), "TARGET@example.com", "correct horse").await;
    retry_after(&refused);
    // Other accounts are not held up.
    attempt("198.51.100.51".into(), "someone@example.com", "guess guess").await.assert_status(401);
}
