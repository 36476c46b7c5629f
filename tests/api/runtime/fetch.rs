//! The `http_fetch` tool against local pages: the address policy (loopback refused unless
//! allowed, redirects checked hop by hop), what a page becomes for the model, and the model
//! step stored before a fetch waits on the network.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tokio::sync::Notify;

use super::models;
use super::tools::{acting_agent, call, finished, kinds, start, steps};
use crate::fake_models::Script;
use crate::helpers::{TestApp, TestDb, app_with, backend_tests, eventually};
use support::mcp_server::McpHttpServer;

backend_tests! { app;
    http_fetch_refuses_loopback_unless_allowed,
}

backend_tests! { db;
    http_fetch_quotes_a_local_page_when_private_addresses_are_allowed,
    a_redirect_to_a_private_address_is_refused,
    the_model_step_is_stored_before_a_fetch_waits_on_the_network,
    the_operators_allowed_addresses_are_for_http_fetch_not_for_users_mcp_servers,
}

async fn http_fetch_refuses_loopback_unless_allowed(app: TestApp) {
    let page = page_server("<p>secret</p>").await;
    let user =
        acting_agent(&app, "ssrf@example.com", "fetcher", "openai:fetcher", &["http_fetch"]).await;
    let url = format!("http://{}/", page.address);
    models(&app).script_for(
        "fetcher",
        [call("http_fetch", json!({"url": url})), Script::AnswerFromToolResult],
    );
    let added = app.add_task(&user, "fetcher", "Read the page", 0).await;
    start(&app, &user, "fetcher").await;
    let done = finished(&app, &user, "fetcher", &added["id"]).await;
    let result = done["result"].as_str().unwrap();
    assert!(result.starts_with("Done: Error: refused") && result.contains("loopback"), "{result}");
    assert!(!result.contains("secret"));
    assert_eq!(page.hits(), 0, "the page was requested");
}

async fn http_fetch_quotes_a_local_page_when_private_addresses_are_allowed(db: TestDb) {
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let page = page_server("<html><head><title>Notes</title><script>x()</script></head><body><h1>Release notes</h1><p>Version 2.0 ships &amp; Thursday. <a href=\"changes#v2\">All changes</a></p></body></html>").await;
    let user =
        acting_agent(&app, "fetch@example.com", "fetcher", "openai:fetcher", &["http_fetch"]).await;
    let url = format!("http://{}/notes", page.address);
    models(&app).script_for(
        "fetcher",
        [call("http_fetch", json!({"url": url})), Script::AnswerFromToolResult],
    );
    let added = app.add_task(&user, "fetcher", "Summarise the release notes", 0).await;
    start(&app, &user, "fetcher").await;
    let done = finished(&app, &user, "fetcher", &added["id"]).await;
    let result = done["result"].as_str().unwrap();
    assert!(result.contains("Version 2.0 ships & Thursday."), "{result}");
    assert!(!result.contains("x()") && !result.contains("<p>"), "{result}");
    let link = format!("All changes (http://{}/changes)", page.address);
    assert!(result.contains(&link), "the link, resolved against the page: {result}");
    assert_eq!(page.hits(), 1);
}

async fn a_redirect_to_a_private_address_is_refused(db: TestDb) {
    let target = page_server("<p>internal</p>").await;
    let redirector = redirect_server(&format!("http://{}/admin", target.address)).await;
    let allowed = redirector.address.clone();
    let app = app_with(db, |o| o.tools.http.allowed = vec![allowed.parse().unwrap()]).await;
    let user =
        acting_agent(&app, "redirect@example.com", "fetcher", "openai:fetcher", &["http_fetch"])
            .await;
    let url = format!("http://{}/", redirector.address);
    models(&app).script_for(
        "fetcher",
        [call("http_fetch", json!({"url": url})), Script::AnswerFromToolResult],
    );
    let added = app.add_task(&user, "fetcher", "Follow the link", 0).await;
    start(&app, &user, "fetcher").await;
    let done = finished(&app, &user, "fetcher", &added["id"]).await;
    let result = done["result"].as_str().unwrap();
    assert!(result.starts_with("Done: Error: ") && result.contains("refused"), "{result}");
    assert_eq!((redirector.hits(), target.hits()), (1, 0), "the redirect was followed");
}

async fn the_operators_allowed_addresses_are_for_http_fetch_not_for_users_mcp_servers(db: TestDb) {
    let mcp = McpHttpServer::start().await;
    let page = page_server("<p>intranet notes</p>").await;
    let mcp_address = mcp.url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let allowed = vec![mcp_address.parse().unwrap(), page.address.parse().unwrap()];
    let app = app_with(db, |o| o.tools.http.allowed = allowed).await;
    let user =
        acting_agent(&app, "tenant@example.com", "fetcher", "openai:fetcher", &["http_fetch"])
            .await;
    let port = mcp_address.rsplit(':').next().unwrap();
    for url in [mcp.url.clone(), format!("http://localhost:{port}/mcp")] {
        let body = json!({"name": "payroll", "url": url, "token": "tenant-chosen-token"});
        let refused = app.post("/api/mcp/servers", &user, body).await;
        refused.assert_error(400, "validation_failed");
        let why = refused.body["error"]["details"]["url"].as_str().unwrap_or_default();
        assert!(why.contains("loopback") && why.contains("allow_private"), "{url}: {why}");
    }
    let listed = app.get("/api/mcp/servers", &user).await;
    assert_eq!(listed.assert_status(200)["servers"], json!([]), "nothing was stored");
    assert_eq!((mcp.initialized(), mcp.authorizations.lock().unwrap().len()), (0, 0));

    // The same list still lets the operator's agents' http_fetch reach the page.
    let url = format!("http://{}/", page.address);
    models(&app).script_for(
        "fetcher",
        [call("http_fetch", json!({"url": url})), Script::AnswerFromToolResult],
    );
    let added = app.add_task(&user, "fetcher", "Read the notes", 0).await;
    start(&app, &user, "fetcher").await;
    let done = finished(&app, &user, "fetcher", &added["id"]).await;
    let result = done["result"].as_str().unwrap();
    assert!(result.contains("intranet notes"), "{result}");
}

async fn the_model_step_is_stored_before_a_fetch_waits_on_the_network(db: TestDb) {
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let release = Arc::new(Notify::new());
    let page = held_page_server("<p>Slow news.</p>", release.clone()).await;
    let user =
        acting_agent(&app, "held@example.com", "waiter", "openai:waiter", &["http_fetch"]).await;
    let url = format!("http://{}/news", page.address);
    models(&app).script_for(
        "waiter",
        [call("http_fetch", json!({"url": url})), Script::AnswerFromToolResult],
    );
    let added = app.add_task(&user, "waiter", "Read the slow page", 0).await;
    start(&app, &user, "waiter").await;
    eventually(super::WAIT, "the page is requested", || async { page.hits() == 1 }).await;
    // A crash now must not cost the model call: it is stored before the fetch goes out.
    let stored = steps(&app, &user, "waiter", &added["id"]).await;
    assert_eq!(kinds(&stored), ["model"], "{stored:?}");
    release.notify_one();
    let done = finished(&app, &user, "waiter", &added["id"]).await;
    assert!(done["result"].as_str().unwrap().contains("Slow news."), "{done}");
    assert_eq!(
        kinds(&steps(&app, &user, "waiter", &added["id"]).await),
        ["model", "tool", "model"]
    );
}

/// A local HTTP server answering every request with `html`, counting requests.
pub(crate) struct PageServer {
    pub(crate) address: String,
    hits: Arc<AtomicUsize>,
}

impl PageServer {
    pub(crate) fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

pub(crate) async fn page_server(html: &'static str) -> PageServer {
    serve(move || {
        axum::response::Response::builder()
            .header("content-type", "text/html; charset=utf-8")
            .body(axum::body::Body::from(html))
            .unwrap()
    })
    .await
}

async fn redirect_server(to: &str) -> PageServer {
    let to = to.to_owned();
    serve(move || {
        axum::response::Response::builder()
            .status(302)
            .header("location", to.as_str())
            .body(axum::body::Body::empty())
            .unwrap()
    })
    .await
}

async fn serve(
    answer: impl Fn() -> axum::response::Response + Clone + Send + Sync + 'static,
) -> PageServer {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().fallback(move || {
        let answer = answer.clone();
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            answer()
        }
    });
    listen(app, hits).await
}

async fn listen(app: axum::Router, hits: Arc<AtomicUsize>) -> PageServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    PageServer { address, hits }
}

/// Like [`page_server`], but each answer waits until `release` is notified.
async fn held_page_server(html: &'static str, release: Arc<Notify>) -> PageServer {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().fallback(move || {
        let (counted, release) = (counted.clone(), release.clone());
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            release.notified().await;
            axum::response::Html(html)
        }
    });
    listen(app, hits).await
}
