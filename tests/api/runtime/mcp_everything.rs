//! The reference MCP server, `@modelcontextprotocol/server-everything` (npm), over stdio as an
//! operator's server: its adding tool (`add` or `get-sum`, by version: found by its schema, not
//! by name) answers through an agent.
//!
//! `AGENTD_TEST_MCP_EVERYTHING` names its executable (`.ci/run` installs a pinned version).
//! Without it the test passes with a notice, unless `AGENTD_TEST_REQUIRE_MCP_EVERYTHING=1` (set
//! by CI) turns that into a failure.

use serde_json::{Value, json};

use super::models;
use super::tools::{acting_agent, call, finished, start, steps};
use crate::fake_models::Script;
use crate::helpers::{TestDb, app_with, backend_tests};
use agentcore::domain::mcp::McpServerName;
use agentcore::mcp::{McpConfig, McpServerConfig, McpTransport};

backend_tests! { db;
    the_reference_servers_adding_tool_answers_through_an_agent,
}

fn everything() -> Option<String> {
    match std::env::var("AGENTD_TEST_MCP_EVERYTHING") {
        Ok(path) if !path.is_empty() => Some(path),
        _ if std::env::var("AGENTD_TEST_REQUIRE_MCP_EVERYTHING").is_ok_and(|v| v == "1") => {
            panic!("AGENTD_TEST_REQUIRE_MCP_EVERYTHING=1 but AGENTD_TEST_MCP_EVERYTHING is not set")
        }
        _ => {
            eprintln!(
                "note: MCP reference server test skipped: AGENTD_TEST_MCP_EVERYTHING is not set"
            );
            None
        }
    }
}

/// Whether a tool's schema takes two numbers `a` and `b`.
fn adds(tool: &Value) -> bool {
    let properties = &tool["parameters"]["properties"];
    ["a", "b"]
        .iter()
        .all(|p| properties[p]["type"] == "number" || properties[p]["type"] == "integer")
}

async fn the_reference_servers_adding_tool_answers_through_an_agent(db: TestDb) {
    let Some(command) = everything() else { return };
    let mut config = McpConfig::default();
    let transport =
        McpTransport::Stdio { command, args: vec!["stdio".into()], env: Default::default() };
    let server = McpServerConfig { transport, timeout: McpServerConfig::DEFAULT_TIMEOUT };
    config.servers.insert(McpServerName::parse("everything").unwrap(), server);
    let app = app_with(db, |o| o.mcp = config).await;
    let user = acting_agent(&app, "ref@example.com", "summer", "openai:summer", &[]).await;
    app.patch("/api/agents/summer", &user, json!({"mcp_servers": ["everything"]}))
        .await
        .assert_status(200);

    let listed = app.get("/api/tools", &user).await.assert_status(200).clone();
    let server = &listed["mcp_servers"][0];
    assert_eq!((server["server"].as_str(), server.get("error")), (Some("everything"), None));
    let tools = server["tools"].as_array().unwrap();
    let adder =
        tools.iter().find(|t| adds(t)).unwrap_or_else(|| panic!("no adding tool: {server}"));
    let name = adder["name"].as_str().unwrap();
    assert!(name.starts_with("everything__"), "{name}");

    models(&app).script_for(
        "summer",
        [call(name, json!({"a": 10, "b": 25})), Script::Answer("The sum is 35.".into())],
    );
    let task = app.add_task(&user, "summer", "Add 10 and 25", 0).await;
    start(&app, &user, "summer").await;
    let done = finished(&app, &user, "summer", &task["id"]).await;
    assert_eq!(done["status"], "complete", "{done}");
    let run = steps(&app, &user, "summer", &task["id"]).await;
    let tool = run.iter().find(|s| s["kind"] == "tool").unwrap();
    assert!(tool["output"].as_str().unwrap_or_default().contains("35"), "{tool}");
    app.stop().await;
}
