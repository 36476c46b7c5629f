//! `GET /openapi.json`: the document lists exactly the API's routes (docs/api.md), each with its
//! parameters, bodies, success and error responses, and what it says about authentication is
//! what the server does.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::Value;

use crate::helpers::{Backend, TestApp, app};

/// Every route of the API (docs/api.md), operational ones included. A route served but missing here,
/// or listed here but missing from the document, fails the test.
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("POST", "/auth/register"),
    ("POST", "/auth/login"),
    ("GET", "/auth/me"),
    ("POST", "/auth/logout"),
    ("GET", "/api/agents"),
    ("POST", "/api/agents"),
    ("GET", "/api/agents/{id}"),
    ("PATCH", "/api/agents/{id}"),
    ("DELETE", "/api/agents/{id}"),
    ("POST", "/api/agents/{id}/start"),
    ("POST", "/api/agents/{id}/stop"),
    ("POST", "/api/agents/{id}/vacation"),
    ("GET", "/api/agents/{id}/activity"),
    ("GET", "/api/agents/{id}/backlog"),
    ("POST", "/api/agents/{id}/backlog"),
    ("GET", "/api/agents/{id}/backlog/{task_id}"),
    ("PATCH", "/api/agents/{id}/backlog/{task_id}"),
    ("DELETE", "/api/agents/{id}/backlog/{task_id}"),
    ("POST", "/api/agents/{id}/backlog/{task_id}/retry"),
    ("POST", "/api/agents/{id}/backlog/{task_id}/cancel"),
    ("GET", "/api/agents/{id}/events"),
    ("GET", "/api/events"),
    ("POST", "/api/agents/{id}/backlog/{task_id}/approve"),
    ("POST", "/api/agents/{id}/backlog/{task_id}/deny"),
    ("GET", "/api/agents/{id}/backlog/{task_id}/steps"),
    ("GET", "/api/agents/{id}/memory"),
    ("PUT", "/api/agents/{id}/memory"),
    ("GET", "/api/agents/{id}/schedules"),
    ("POST", "/api/agents/{id}/schedules"),
    ("GET", "/api/agents/{id}/schedules/{schedule_id}"),
    ("PATCH", "/api/agents/{id}/schedules/{schedule_id}"),
    ("DELETE", "/api/agents/{id}/schedules/{schedule_id}"),
    ("GET", "/api/triggers"),
    ("POST", "/api/triggers"),
    ("GET", "/api/triggers/{id}"),
    ("PATCH", "/api/triggers/{id}"),
    ("DELETE", "/api/triggers/{id}"),
    ("POST", "/api/triggers/{id}/rotate"),
    ("POST", "/hooks/{trigger_id}"),
    ("GET", "/api/tools"),
    ("GET", "/api/mcp/servers"),
    ("POST", "/api/mcp/servers"),
    ("DELETE", "/api/mcp/servers/{name}"),
    ("GET", "/api/workspaces"),
    ("POST", "/api/workspaces"),
    ("GET", "/api/workspace"),
    ("PATCH", "/api/workspace"),
    ("GET", "/api/workspace/members"),
    ("PATCH", "/api/workspace/members/{user_id}"),
    ("DELETE", "/api/workspace/members/{user_id}"),
    ("GET", "/api/workspace/invites"),
    ("POST", "/api/workspace/invites"),
    ("DELETE", "/api/workspace/invites/{id}"),
    ("POST", "/api/invites/{token}/accept"),
    ("GET", "/api/workspace/keys"),
    ("POST", "/api/workspace/keys"),
    ("DELETE", "/api/workspace/keys/{id}"),
    ("GET", "/api/audit"),
    ("GET", "/api/audit/export"),
    ("GET", "/api/audit/verify"),
    ("POST", "/api/mcp/servers/{name}/test"),
    ("GET", "/api/models"),
    ("GET", "/api/budget"),
    ("PUT", "/api/budget"),
    ("GET", "/api/usage"),
    ("GET", "/api/billing"),
    ("POST", "/api/billing/webhook"),
    ("GET", "/api/onboarding/templates"),
    ("POST", "/api/onboarding/setup"),
    ("GET", "/api/chat/oauth-url"),
    ("POST", "/api/chat/callback"),
    ("POST", "/api/chat/connect"),
    ("GET", "/api/chat/connections"),
    ("DELETE", "/api/chat/connections/{guild_id}"),
    ("GET", "/api/chat/connections/{guild_id}/channels"),
    ("POST", "/api/chat/test/{guild_id}"),
    ("GET", "/api/chat/mappings"),
    ("POST", "/api/chat/mappings/{id}"),
    ("DELETE", "/api/chat/mappings/{id}"),
    ("POST", "/api/chat/send/{guild_id}"),
    ("PUT", "/api/chat/connections/{guild_id}/roles"),
    ("POST", "/api/chat/interactions"),
    ("POST", "/api/chat/interactions/{connection_id}"),
    ("GET", "/api/webhooks"),
    ("POST", "/api/webhooks"),
    ("GET", "/api/webhooks/{id}"),
    ("PATCH", "/api/webhooks/{id}"),
    ("DELETE", "/api/webhooks/{id}"),
    ("POST", "/api/webhooks/{id}/rotate"),
    ("POST", "/api/webhooks/{id}/test"),
    ("GET", "/api/webhooks/{id}/deliveries"),
    ("POST", "/api/webhooks/{id}/deliveries/{delivery_id}/redeliver"),
];

/// Operations that take a JSON body (vacation's is optional).
const WITH_BODY: &[(&str, &str)] = &[
    ("POST", "/api/workspaces"),
    ("PATCH", "/api/workspace"),
    ("PATCH", "/api/workspace/members/{user_id}"),
    ("POST", "/api/workspace/invites"),
    ("POST", "/api/workspace/keys"),
    ("PUT", "/api/agents/{id}/memory"),
    ("PUT", "/api/budget"),
    ("POST", "/api/agents/{id}/schedules"),
    ("PATCH", "/api/agents/{id}/schedules/{schedule_id}"),
    ("POST", "/api/triggers"),
    ("PATCH", "/api/triggers/{id}"),
    ("POST", "/hooks/{trigger_id}"),
    ("POST", "/auth/register"),
    ("POST", "/auth/login"),
    ("POST", "/api/agents"),
    ("PATCH", "/api/agents/{id}"),
    ("POST", "/api/agents/{id}/vacation"),
    ("POST", "/api/agents/{id}/backlog"),
    ("PATCH", "/api/agents/{id}/backlog/{task_id}"),
    ("POST", "/api/mcp/servers"),
    ("POST", "/api/billing/webhook"),
    ("POST", "/api/onboarding/setup"),
    ("POST", "/api/chat/callback"),
    ("POST", "/api/chat/connect"),
    ("POST", "/api/chat/mappings/{id}"),
    ("POST", "/api/chat/send/{guild_id}"),
    ("PUT", "/api/chat/connections/{guild_id}/roles"),
    ("POST", "/api/chat/interactions"),
    ("POST", "/api/chat/interactions/{connection_id}"),
    ("POST", "/api/webhooks"),
    ("PATCH", "/api/webhooks/{id}"),
];

/// Each operation of the document, as (METHOD, path template, operation).
pub(crate) fn operations(document: &Value) -> Vec<(String, String, Value)> {
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            operations.push((method.to_uppercase(), path.clone(), operation.clone()));
        }
    }
    operations
}

pub(crate) async fn document(app: &TestApp) -> Value {
    let response = app.client.get(format!("{}/openapi.json", app.address)).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    response.json().await.unwrap()
}

/// Follows `#/components/schemas/...` references; panics on one that leads nowhere.
fn check_refs(document: &Value, value: &Value, at: &str) {
    match value {
        Value::Object(object) => {
            if let Some(Value::String(reference)) = object.get("$ref") {
                let name = reference
                    .strip_prefix("#/components/schemas/")
                    .unwrap_or_else(|| panic!("{at}: unexpected reference {reference}"));
                assert!(
                    document["components"]["schemas"].get(name).is_some(),
                    "{at}: {reference} leads nowhere"
                );
            }
            for (key, inner) in object {
                check_refs(document, inner, &format!("{at}/{key}"));
            }
        }
        Value::Array(items) => items.iter().for_each(|inner| check_refs(document, inner, at)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_lists_every_route_with_its_schemas() {
    let app = app(Backend::Sqlite).await.unwrap();
    let document = document(&app).await;
    assert_eq!(document["openapi"], "3.1.0");
    assert!(document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer");
    check_refs(&document, &document, "#");

    let listed: BTreeSet<(String, String)> =
        operations(&document).into_iter().map(|(m, p, _)| (m, p)).collect();
    let expected: BTreeSet<(String, String)> =
        ROUTES.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    let undocumented: Vec<_> = expected.difference(&listed).collect();
    let unknown: Vec<_> = listed.difference(&expected).collect();
    assert!(undocumented.is_empty(), "routes missing from the document: {undocumented:?}");
    assert!(unknown.is_empty(), "documented routes missing from ROUTES: {unknown:?}");

    let mut operation_ids = BTreeSet::new();
    for (method, path, operation) in operations(&document) {
        let at = format!("{method} {path}");
        assert!(operation_ids.insert(operation["operationId"].to_string()), "{at}: operationId");
        let responses = operation["responses"].as_object().unwrap();
        let success: Vec<_> = responses.keys().filter(|s| s.starts_with('2')).collect();
        // A trigger call answers 202 when it queues a task and 200 for a repeat of one.
        let expected = if path == "/hooks/{trigger_id}" { 2 } else { 1 };
        assert_eq!(success.len(), expected, "{at}: success responses, got {success:?}");
        let content = responses[success[0].as_str()]["content"].as_object();
        let schema = content.and_then(|c| c.values().next()).map(|media| &media["schema"]);
        assert!(schema.is_some_and(|s| s.is_object()), "{at}: the success body has no schema");
        for range in ["4XX", "5XX"] {
            assert_eq!(
                responses[range]["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/ErrorBody",
                "{at}: {range} is not the error envelope"
            );
        }
        let parameters = operation["parameters"].as_array().cloned().unwrap_or_default();
        let in_path: BTreeSet<&str> = parameters
            .iter()
            .filter(|p| p["in"] == "path")
            .filter_map(|p| p["name"].as_str())
            .collect();
        let templated: BTreeSet<&str> =
            path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
        assert_eq!(in_path, templated, "{at}: path parameters");
        let has_body = operation.get("requestBody").is_some();
        let wants_body = WITH_BODY.iter().any(|(m, p)| *m == method && *p == path);
        assert_eq!(has_body, wants_body, "{at}: request body");
    }
    let schemas = document["components"]["schemas"].as_object().unwrap();
    let error = &schemas["ErrorDetail"];
    for field in ["code", "message", "request_id"] {
        assert!(error["required"].as_array().unwrap().contains(&Value::from(field)), "{field}");
    }
}

/// Every documented operation is served (never `route_not_found` or `method_not_allowed`),
/// and it asks for a token exactly when the document says it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_operation_is_served_and_authenticates_as_documented() {
    let app = app(Backend::Sqlite).await.unwrap();
    let document = document(&app).await;
    for (method, template, operation) in operations(&document) {
        let path = template
            .replace("{id}", "alpha")
            .replace("{task_id}", "0196a1b2-0000-7000-8000-000000000000")
            .replace("{guild_id}", "4242");
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let url = format!("{}{path}", app.address);
        let response = app.client.request(method.clone(), url).send().await.unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let code = body["error"]["code"].as_str().unwrap_or_default();
        assert!(
            code != "route_not_found" && code != "method_not_allowed",
            "{method} {template} is documented but not served: {body}"
        );
        let security = operation["security"].as_array().cloned().unwrap_or_default();
        let needs_token = !security.is_empty()
            && !security.iter().any(|s| s == &Value::Null)
            && !security.iter().any(|s| s.as_object().is_some_and(|o| o.is_empty()));
        if needs_token {
            assert_eq!((status, code), (401, "unauthorized"), "{method} {template} needs a token");
        } else {
            // Discord's interactions are signed: a missing signature is 401 by Discord's rules,
            // and says so, never that a token is missing.
            let signed = template.starts_with("/api/chat/interactions");
            if signed {
                assert_eq!((status, code), (401, "invalid_interaction_signature"), "{template}");
            } else {
                assert_ne!(status, 401, "{method} {template} is documented as public: {body}");
            }
        }
    }
}

/// `agentd openapi` prints the document the server serves, without a database or a server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentd_openapi_prints_the_served_document() {
    let app = app(Backend::Sqlite).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let printed = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentd-under-test"))
        .env("AGENTD_DATA_DIR", dir.path())
        .env("AGENTD_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .arg("openapi")
        .output()
        .await
        .unwrap();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let printed: Value = serde_json::from_slice(&printed.stdout).unwrap();
    assert_eq!(printed, document(&app).await);
}

/// `docs/openapi.json` is the committed snapshot of the document: a change to the API shows in
/// review as a change to this file. Regenerate it with
/// `cargo run -q -p agentd -- openapi > docs/openapi.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_equals_the_committed_snapshot() {
    let app = app(Backend::Sqlite).await.unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
    let committed: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        committed == document(&app).await,
        "{} differs from the served document; if the change is meant, regenerate it with \
         `cargo run -q -p agentd -- openapi > docs/openapi.json`",
        path.display()
    );
}
