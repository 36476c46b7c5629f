//! Agents calling the tools of MCP servers, through the test server of the test crate served
//! over streamable HTTP as an operator's server: the qualified names and schemas the model is
//! offered, results and errors, the call timeout, and one session per server.

use std::time::Duration;

use serde_json::{Value, json};

use super::tools::{acting_agent, call, calls_of, finished, start, steps};
use super::{WAIT, models};
use crate::fake_models::Script;
use crate::helpers::{
    TestApp, TestDb, app_with, backend_tests, eventually, metric_samples, sample,
};
use agentcore::domain::mcp::McpServerName;
use agentcore::mcp::{McpConfig, McpServerConfig, McpTransport};
use support::closed_port::ClosedPort;
use support::mcp_server::McpHttpServer;

backend_tests! { db;
    an_agent_adds_with_a_servers_tool_and_the_model_saw_its_schema,
    a_slow_call_past_the_servers_timeout_and_a_failing_tool_are_errors_the_model_reads,
    twenty_tasks_of_three_steps_initialise_the_session_once_and_list_the_tools_once,
    the_tool_list_shows_each_servers_tools_or_why_it_is_unreachable,
    an_agent_may_name_only_servers_that_exist,
    a_server_that_says_its_tools_changed_is_listed_again,
    a_tool_the_model_names_that_the_list_lacks_is_looked_for_once_more,
    a_users_servers_are_counted_in_the_metrics_without_their_names,
}

/// An operator's HTTP server called `name` at `url`, with a call timeout.
pub(super) fn http_server(name: &str, url: &str, timeout: Duration) -> McpConfig {
    let mut config = McpConfig::default();
    let transport = McpTransport::Http { url: url.to_owned(), headers: Default::default() };
    config
        .servers
        .insert(McpServerName::parse(name).unwrap(), McpServerConfig { transport, timeout });
    config
}

async fn app_with_calc(db: TestDb, server: &McpHttpServer, timeout: Duration) -> TestApp {
    let config = http_server("calc", &server.url, timeout);
    app_with(db, |o| o.mcp = config).await
}

/// Agent `id` on `model` with the `calc` server and no built-in tools, started.
async fn calculator(app: &TestApp, email: &str, id: &str, model: &str) -> crate::helpers::User {
    let user = acting_agent(app, email, id, model, &[]).await;
    app.patch(&format!("/api/agents/{id}"), &user, json!({"mcp_servers": ["calc"]}))
        .await
        .assert_status(200);
    user
}

async fn an_agent_adds_with_a_servers_tool_and_the_model_saw_its_schema(db: TestDb) {
    let server = McpHttpServer::start().await;
    let app = app_with_calc(db, &server, McpServerConfig::DEFAULT_TIMEOUT).await;
    for (model, email) in [("openai:adder", "a@example.com"), ("anthropic:adder", "b@example.com")]
    {
        let id = if model.starts_with("openai") { "adder" } else { "adder-2" };
        let user = calculator(&app, email, id, model).await;
        models(&app).script_for(
            "adder",
            [call("calc__add", json!({"a": 10, "b": 25})), Script::Answer("It is 35.".into())],
        );
        let task = app.add_task(&user, id, "Add 10 and 25", 0).await;
        start(&app, &user, id).await;
        let done = finished(&app, &user, id, &task["id"]).await;
        assert_eq!(done["status"], "complete", "{done}");
        let run = steps(&app, &user, id, &task["id"]).await;
        let tool = run.iter().find(|s| s["kind"] == "tool").expect("a tool step");
        assert_eq!(tool["tool"], "calc__add", "the transcript names the server and the tool");
        assert_eq!(tool["output"], "35", "{tool}");
        let asked = calls_of(&app, "adder");
        let first = asked.iter().find(|c| c.user() == "Add 10 and 25").unwrap();
        assert_eq!(
            first.tools(),
            [
                "calc__add",
                "calc__slow",
                "calc__fail",
                "calc__crash",
                "calc__learn",
                "calc__learn_quietly"
            ]
        );
        let offered = &first.body["tools"][0];
        let schema = if first.format == "openai" {
            &offered["function"]["parameters"]
        } else {
            &offered["input_schema"]
        };
        assert_eq!(schema["properties"]["a"]["type"], "integer", "{offered}");
        assert_eq!(schema["required"], json!(["a", "b"]));
        let last = asked.iter().rev().find(|c| c.user() == "Add 10 and 25").unwrap();
        assert!(last.tool_results().iter().any(|(_, content)| content == "35"));
    }
}

async fn a_slow_call_past_the_servers_timeout_and_a_failing_tool_are_errors_the_model_reads(
    db: TestDb,
) {
    let server = McpHttpServer::start().await;
    let app = app_with_calc(db, &server, Duration::from_secs(1)).await;
    let user = calculator(&app, "slow@example.com", "waiter", "openai:waiter").await;
    models(&app).script_for(
        "waiter",
        [
            call("calc__slow", json!({"seconds": 5})),
            call("calc__fail", json!({})),
            call("calc__add", json!({"a": 1, "b": 2})),
            Script::Answer("Done despite the errors.".into()),
        ],
    );
    let task = app.add_task(&user, "waiter", "Try the tools", 0).await;
    start(&app, &user, "waiter").await;
    let done = finished(&app, &user, "waiter", &task["id"]).await;
    assert_eq!(done["status"], "complete", "a tool error does not fail the task: {done}");
    let run = steps(&app, &user, "waiter", &task["id"]).await;
    let tools: Vec<&Value> = run.iter().filter(|s| s["kind"] == "tool").collect();
    let error = |i: usize| tools[i]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error(0).contains("timed out"), "{}", tools[0]);
    assert_eq!(error(1), "the tool failed on purpose");
    assert_eq!(tools[2]["output"], "3", "the session still works after a timed-out call");
    let last = calls_of(&app, "waiter").pop().unwrap();
    let results = last.tool_results();
    assert!(results[1].1.contains("the tool failed on purpose"), "{results:?}");
    let text = app.client.get(format!("{}/metrics", app.address)).send().await.unwrap();
    let samples = metric_samples(&text.text().await.unwrap());
    let series =
        |name: &str| sample(&samples, &format!("{name}{{server=\"calc\",origin=\"operator\"}}"));
    assert_eq!(series("agentd_mcp_calls_total"), 3.0);
    assert_eq!(series("agentd_mcp_call_errors_total"), 2.0, "the timeout and the failure");
    assert_eq!(series("agentd_mcp_call_duration_seconds_count"), 3.0);
}

async fn twenty_tasks_of_three_steps_initialise_the_session_once_and_list_the_tools_once(
    db: TestDb,
) {
    let server = McpHttpServer::start().await;
    let app = app_with_calc(db, &server, McpServerConfig::DEFAULT_TIMEOUT).await;
    let user = calculator(&app, "many@example.com", "counter", "openai:counter").await;
    let mut script = Vec::new();
    for n in 0..20 {
        script.push(call("calc__add", json!({"a": n, "b": 1})));
        script.push(call("calc__add", json!({"a": n, "b": 2})));
        script.push(Script::Answer(format!("Task {n} done.")));
    }
    models(&app).script_for("counter", script);
    for n in 0..20 {
        app.add_task(&user, "counter", &format!("Count {n}"), 0).await;
    }
    start(&app, &user, "counter").await;
    eventually(WAIT * 3, "twenty tasks complete", || async {
        super::count_in(&app, &user, "counter", "complete").await == 20
    })
    .await;
    assert_eq!(server.calls(), 40);
    assert_eq!((server.initialized(), server.listed()), (1, 1), "one session, one tool list");
}

async fn the_tool_list_shows_each_servers_tools_or_why_it_is_unreachable(db: TestDb) {
    let server = McpHttpServer::start().await;
    let closed = ClosedPort::new();
    let dead = format!("http://{}/mcp", closed.address());
    let mut config = http_server("calc", &server.url, Duration::from_secs(5));
    config.servers.extend(http_server("gone", &dead, Duration::from_secs(5)).servers);
    let app = app_with(db, |o| o.mcp = config).await;
    let user = app.register("lister@example.com").await;
    let list = app.get("/api/tools", &user).await.assert_status(200).clone();
    assert!(list["tools"].as_array().unwrap().iter().any(|t| t["name"] == "memory"));
    let servers = list["mcp_servers"].as_array().unwrap();
    let names: Vec<&str> = servers.iter().map(|s| s["server"].as_str().unwrap()).collect();
    assert_eq!(names, ["calc", "gone"]);
    let calc = &servers[0];
    assert_eq!((calc["origin"].as_str(), calc.get("error")), (Some("operator"), None));
    let tools: Vec<&str> =
        calc["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        tools,
        [
            "calc__add",
            "calc__slow",
            "calc__fail",
            "calc__crash",
            "calc__learn",
            "calc__learn_quietly"
        ]
    );
    assert_eq!(calc["tools"][0]["tool"], "add");
    assert_eq!(calc["tools"][0]["description"], "Adds two integers.");
    let gone = &servers[1];
    assert!(gone["error"].as_str().unwrap().contains("gone"), "{gone}");
    assert_eq!(gone["tools"], json!([]));
    // A server that just failed is not waited on again by the next request...
    let again = app.get("/api/tools", &user).await.assert_status(200).clone();
    let error = again["mcp_servers"][1]["error"].as_str().unwrap().to_owned();
    assert!(error.contains("not tried again"), "{error}");
    // ...but a test tries at once.
    let tested =
        app.post_empty("/api/mcp/servers/gone/test", &user).await.assert_status(200).clone();
    let error = tested["error"].as_str().unwrap().to_owned();
    assert!(error.contains("gone") && !error.contains("not tried again"), "{error}");
}

async fn an_agent_may_name_only_servers_that_exist(db: TestDb) {
    let server = McpHttpServer::start().await;
    let app = app_with_calc(db, &server, McpServerConfig::DEFAULT_TIMEOUT).await;
    let user = app.register("names@example.com").await;
    let agent = json!({"id": "a", "name": "A", "role_prompt": "Work.", "channel": "general",
                       "mcp_servers": ["calc", "nope"]});
    let refused = app.post("/api/agents", &user, agent).await;
    refused.assert_error(400, "validation_failed");
    let problem = refused.body["error"]["details"]["mcp_servers"].as_str().unwrap().to_owned();
    assert!(problem.contains("'nope'") && problem.contains("calc"), "{problem}");
    let agent = json!({"id": "a", "name": "A", "role_prompt": "Work.", "channel": "general",
                       "mcp_servers": ["calc"]});
    let created = app.post("/api/agents", &user, agent).await;
    assert_eq!(created.assert_status(201)["mcp_servers"], json!(["calc"]));
    let bad = app.patch("/api/agents/a", &user, json!({"mcp_servers": ["Calc"]})).await;
    bad.assert_error(400, "validation_failed");
    let cleared = app.patch("/api/agents/a", &user, json!({"mcp_servers": []})).await;
    assert_eq!(cleared.assert_status(200)["mcp_servers"], json!([]));
}

async fn a_server_that_says_its_tools_changed_is_listed_again(db: TestDb) {
    let server = McpHttpServer::start().await;
    let app = app_with_calc(db, &server, McpServerConfig::DEFAULT_TIMEOUT).await;
    let user = calculator(&app, "learner@example.com", "learner", "openai:learner").await;
    models(&app).script_for(
        "learner",
        [
            call("calc__learn", json!({})),
            Script::Answer("Learned.".into()),
            call("calc__mul", json!({"a": 6, "b": 7})),
            Script::Answer("42".into()),
        ],
    );
    let first = app.add_task(&user, "learner", "Learn to multiply", 0).await;
    start(&app, &user, "learner").await;
    assert_eq!(finished(&app, &user, "learner", &first["id"]).await["status"], "complete");
    assert_eq!(server.listed(), 1);
    let second = app.add_task(&user, "learner", "Multiply 6 by 7", 0).await;
    assert_eq!(finished(&app, &user, "learner", &second["id"]).await["status"], "complete");
    let run = steps(&app, &user, "learner", &second["id"]).await;
    let tool = run.iter().find(|s| s["kind"] == "tool").unwrap();
    assert_eq!(tool["output"], "42", "{tool}");
    let offered = calls_of(&app, "learner").pop().unwrap().tools();
    assert!(offered.contains(&"calc__mul".to_owned()), "{offered:?}");
    assert_eq!((server.initialized(), server.listed()), (1, 2), "listed again, not reconnected");
}

/// The server added `mul` without a `tools/list_changed` (or the notice is still on its way):
/// the model naming `calc__mul` makes the run list that server's tools again, once, instead of
/// calling the name unknown; a name the server does not have is then unknown without more lists.
async fn a_tool_the_model_names_that_the_list_lacks_is_looked_for_once_more(db: TestDb) {
    let server = McpHttpServer::start().await;
    let app = app_with_calc(db, &server, McpServerConfig::DEFAULT_TIMEOUT).await;
    let user = calculator(&app, "quiet@example.com", "quiet", "openai:quiet").await;
    models(&app).script_for(
        "quiet",
        [
            call("calc__learn_quietly", json!({})),
            Script::Answer("Learned.".into()),
            call("calc__mul", json!({"a": 6, "b": 7})),
            call("calc__div", json!({"a": 6, "b": 3})),
            call("calc__pow", json!({"a": 2, "b": 3})),
            Script::Answer("42".into()),
        ],
    );
    let first = app.add_task(&user, "quiet", "Learn to multiply", 0).await;
    start(&app, &user, "quiet").await;
    assert_eq!(finished(&app, &user, "quiet", &first["id"]).await["status"], "complete");
    assert_eq!(server.listed(), 1);
    let second = app.add_task(&user, "quiet", "Multiply 6 by 7", 0).await;
    assert_eq!(finished(&app, &user, "quiet", &second["id"]).await["status"], "complete");
    let run = steps(&app, &user, "quiet", &second["id"]).await;
    let tools: Vec<_> = run.iter().filter(|s| s["kind"] == "tool").collect();
    assert_eq!(tools[0]["output"], "42", "{}", tools[0]);
    assert_eq!(tools[1]["error"], "unknown tool 'calc__div'", "{}", tools[1]);
    assert_eq!(tools[2]["error"], "unknown tool 'calc__pow'", "{}", tools[2]);
    let offered = calls_of(&app, "quiet").pop().unwrap().tools();
    assert!(
        offered.contains(&"calc__mul".to_owned()),
        "offered from the next call on: {offered:?}"
    );
    assert_eq!((server.initialized(), server.listed()), (1, 2), "listed once more, for one run");
}

async fn a_users_servers_are_counted_in_the_metrics_without_their_names(db: TestDb) {
    let server = McpHttpServer::start().await;
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let user = acting_agent(&app, "tenant@example.com", "payer", "openai:payer", &[]).await;
    let body = json!({"name": "acme-payroll", "url": server.url});
    app.post("/api/mcp/servers", &user, body).await.assert_status(201);
    app.patch("/api/agents/payer", &user, json!({"mcp_servers": ["acme-payroll"]}))
        .await
        .assert_status(200);
    models(&app).script_for(
        "payer",
        [call("acme-payroll__add", json!({"a": 2, "b": 3})), Script::Answer("5".into())],
    );
    let task = app.add_task(&user, "payer", "Add two and three", 0).await;
    start(&app, &user, "payer").await;
    let done = finished(&app, &user, "payer", &task["id"]).await;
    assert_eq!(done["status"], "complete", "{done}");
    let metrics = || async {
        let answer = app.client.get(format!("{}/metrics", app.address)).send().await.unwrap();
        answer.text().await.unwrap()
    };
    let text = metrics().await;
    assert!(!text.contains("acme-payroll"), "a tenant's server name is public:\n{text}");
    let samples = metric_samples(&text);
    assert_eq!(sample(&samples, "agentd_mcp_calls_total{origin=\"user\"}"), 1.0);
    assert_eq!(sample(&samples, "agentd_mcp_call_duration_seconds_count{origin=\"user\"}"), 1.0);

    app.delete("/api/mcp/servers/acme-payroll", &user).await.assert_status(200);
    assert!(!metrics().await.contains("acme-payroll"));
}
