//! Inbound triggers through the real server on both backends: managing them (`manage.rs`) and
//! calling them with Standard Webhooks signatures (`calls.rs`), the reference Python library
//! signing where it is set up.

mod calls;
mod manage;

use secrecy::SecretString;
use serde_json::{Value, json};

use agentcore::standard_webhooks::SigningKey;

use crate::helpers::{Reply, TestApp, User, read};

/// Creates a trigger on `agent` with `body`'s fields over a plain one: the 201 answer.
pub(super) async fn create(app: &TestApp, user: &User, agent: &str, body: Value) -> Value {
    let mut fields = json!({"agent": agent, "title": "Call"});
    for (key, value) in body.as_object().unwrap() {
        fields[key] = value.clone();
    }
    app.post("/api/triggers", user, fields).await.assert_status(201).clone()
}

/// The Unix time now.
pub(super) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// `v1,<signature>` of a message, made in Rust (for the refusals, where the library's own
/// signing is not what is tested).
pub(super) fn signature(secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    let key = SigningKey::from_secret(&SecretString::from(secret.to_owned())).unwrap();
    key.sign(id, timestamp, body.as_bytes())
}

/// The three headers of a signed call.
pub(super) fn signed(secret: &str, id: &str, timestamp: i64, body: &str) -> Vec<(String, String)> {
    headers(id, timestamp, &signature(secret, id, timestamp, body))
}

pub(super) fn headers(id: &str, timestamp: i64, signature: &str) -> Vec<(String, String)> {
    vec![
        ("webhook-id".into(), id.into()),
        ("webhook-timestamp".into(), timestamp.to_string()),
        ("webhook-signature".into(), signature.into()),
    ]
}

/// `POST /hooks/{id}` with `headers` and `body` as given, no token.
pub(super) async fn call(
    app: &TestApp,
    trigger: &str,
    headers: &[(String, String)],
    body: impl Into<reqwest::Body>,
) -> Reply {
    let mut request = app
        .client
        .post(format!("{}/hooks/{trigger}", app.address))
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    read(request.body(body).send().await.expect("request sent")).await
}

/// The agent's tasks, in creation order.
pub(super) async fn tasks(app: &TestApp, user: &User, agent: &str) -> Vec<Value> {
    let reply = app.get(&format!("/api/agents/{agent}/backlog"), user).await;
    reply.assert_status(200)["tasks"].as_array().unwrap().clone()
}

/// The agent's activity entries of `action`.
pub(super) async fn entries(app: &TestApp, user: &User, agent: &str, action: &str) -> Vec<Value> {
    let reply = app.get(&format!("/api/agents/{agent}/activity?limit=1000"), user).await;
    let all = reply.assert_status(200)["entries"].as_array().unwrap().clone();
    all.into_iter().filter(|e| e["action"] == action).collect()
}

/// `agentd_trigger_calls_total` of `outcome`.
pub(super) async fn counted(app: &TestApp, outcome: &str) -> f64 {
    let samples = crate::metrics::scrape(app, None).await;
    samples[&format!("agentd_trigger_calls_total{{outcome=\"{outcome}\"}}")]
}
