//! A NUL character anywhere a client can put text (a query parameter, a path segment, a string
//! field of a body) is bad input, never a server error. PostgreSQL cannot store or even compare
//! a text holding NUL, so a value that reaches it unchecked answers 500 there and not on SQLite:
//! this walks every operation of the OpenAPI document instead of waiting for a fuzzer to hit one.

use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::helpers::{TestApp, backend_tests};
use crate::openapi::{document, operations};

backend_tests! { app;
    a_nul_in_any_parameter_or_body_field_is_a_client_error,
}

const NUL_TEXT: &str = "nul\u{0}here";
const NUL_IN_URL: &str = "nul%00here";

async fn a_nul_in_any_parameter_or_body_field_is_a_client_error(app: TestApp) {
    let user = app.register("nul@example.com").await;
    app.create_agent(&user, "alpha").await;
    let task = app.add_task(&user, "alpha", "A task to point at", 0).await;
    let task_id = task["id"].as_str().unwrap().to_owned();
    let document = document(&app).await;
    let mut tried = 0;
    let mut failures = Vec::new();
    for (method, template, operation) in operations(&document) {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let path = template
            .replace("{id}", "alpha")
            .replace("{task_id}", &task_id)
            .replace("{guild_id}", "4242");
        let mut requests: Vec<(String, Option<Value>)> = Vec::new();
        // Each path parameter in turn.
        for name in parameters(&operation, "path") {
            let one = template
                .replace(&format!("{{{name}}}"), NUL_IN_URL)
                .replace("{id}", "alpha")
                .replace("{task_id}", &task_id)
                .replace("{guild_id}", "4242");
            requests.push((one, None));
        }
        // Each query parameter in turn.
        for name in parameters(&operation, "query") {
            requests.push((format!("{path}?{name}={NUL_IN_URL}"), None));
        }
        // Each string field of the body in turn, then all of them at once.
        let fields = body_string_fields(&document, &operation);
        for field in &fields {
            requests.push((path.clone(), Some(json!({ field: NUL_TEXT }))));
        }
        if fields.len() > 1 {
            let all: Map<String, Value> =
                fields.iter().map(|f| (f.clone(), Value::from(NUL_TEXT))).collect();
            requests.push((path.clone(), Some(Value::Object(all))));
        }
        for (url, body) in requests {
            tried += 1;
            let reply = app.request(method.clone(), &url, Some(&user.token), body.clone()).await;
            if reply.status.is_server_error() {
                failures
                    .push(format!("{method} {url} {body:?} -> {}: {}", reply.status, reply.body));
            }
        }
    }
    // The walk must reach the places that once failed, or it proves nothing.
    assert!(tried > 60, "only {tried} requests were made: the document was not walked");
    assert!(failures.is_empty(), "server errors for a NUL:\n{}", failures.join("\n"));
}

/// The names of an operation's parameters that live `place` (`path`, `query`).
fn parameters(operation: &Value, place: &str) -> Vec<String> {
    let parameters = operation["parameters"].as_array().cloned().unwrap_or_default();
    parameters
        .iter()
        .filter(|p| p["in"] == place)
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

/// The top-level fields of the JSON request body whose type admits a string.
fn body_string_fields(document: &Value, operation: &Value) -> Vec<String> {
    let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
    let schema = resolve(document, schema);
    let Some(properties) = schema["properties"].as_object() else { return Vec::new() };
    properties
        .iter()
        .filter(|(_, property)| admits_string(&resolve(document, property)))
        .map(|(name, _)| name.clone())
        .collect()
}

fn admits_string(schema: &Value) -> bool {
    match &schema["type"] {
        Value::String(kind) => kind == "string",
        Value::Array(kinds) => kinds.iter().any(|k| k == "string"),
        _ => ["oneOf", "anyOf"].iter().any(|key| {
            schema[key].as_array().is_some_and(|options| options.iter().any(admits_string))
        }),
    }
}

/// Follows a `$ref` into `components`; any other schema is itself.
fn resolve(document: &Value, schema: &Value) -> Value {
    match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => document["components"]["schemas"][name].clone(),
        None => schema.clone(),
    }
}
