//! What agents act with, from the terminal: `tools`, an agent's `--tools` and `--max-steps`,
//! `agents memory` and `tasks steps`, `mcp add|list|test|remove` and `--mcp-servers`, the same
//! bytes in both modes.

use serde_json::json;

use super::{PASSWORD, both_modes};
use crate::fake_models::Script;
use crate::helpers::{TestApp, TestDb, app_with, backend_tests, eventually};
use support::mcp_server::McpHttpServer;

backend_tests! { app;
    tools_memory_and_a_tasks_steps_from_the_terminal,
}

async fn tools_memory_and_a_tasks_steps_from_the_terminal(app: TestApp) {
    let [remote, local] = both_modes(&app).await;
    remote
        .run(&["register", "--email", "act@example.com", "--password", PASSWORD, "--name", "Act"])
        .await
        .ok();
    local.run(&["login", "--email", "act@example.com", "--password", PASSWORD]).await.ok();
    let create = |tools: &'static str| {
        [
            "-o",
            "json",
            "agents",
            "create",
            "--id",
            "keeper",
            "--name",
            "Keeper",
            "--role-prompt",
            "You keep notes.",
            "--channel",
            "notes",
            "--model",
            "openai:cli",
            "--max-steps",
            "4",
            "--tools",
            tools,
        ]
    };
    let unknown = remote.run(&create("memory,shell")).await;
    assert_eq!(unknown.code, 2);
    assert!(unknown.stderr.contains("tools: unknown tool 'shell'"), "{}", unknown.stderr);
    let created = remote.run(&create("memory")).await.ok();
    assert_eq!(
        (created.json()["tools"].clone(), created.json()["max_steps"].clone()),
        (json!(["memory"]), json!(4))
    );

    app.options.models.script_for(
        "cli",
        [
            Script::Call {
                name: "memory".into(),
                arguments: json!({"action": "append", "text": "Standup at 9."}),
            },
            Script::Answer("Noted.".into()),
        ],
    );
    let task = local.run(&["-o", "json", "tasks", "add", "keeper", "Remember standup"]).await.ok();
    let task_id = task.json()["id"].as_str().unwrap().to_owned();
    remote.run(&["agents", "start", "keeper"]).await.ok();
    eventually(std::time::Duration::from_secs(20), "the task completes", || async {
        let shown = remote.run(&["-o", "json", "tasks", "show", "keeper", &task_id]).await.ok();
        shown.json()["status"] == "complete"
    })
    .await;

    let from_remote = remote.run(&["-o", "json", "tasks", "steps", "keeper", &task_id]).await.ok();
    let from_local = local.run(&["-o", "json", "tasks", "steps", "keeper", &task_id]).await.ok();
    assert_eq!(from_remote.stdout, from_local.stdout, "the same bytes in both modes");
    let kinds: Vec<String> = from_remote.json()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["model", "tool", "model"]);
    let table = local.run(&["tasks", "steps", "keeper", &task_id]).await.ok();
    for expected in ["KIND", "→ memory", "memory({\"action\":\"append\"", "Saved.", "Noted."] {
        assert!(table.stdout.contains(expected), "{expected} missing:\n{}", table.stdout);
    }

    let memory = remote.run(&["agents", "memory", "keeper"]).await.ok();
    assert!(memory.stdout.contains("Standup at 9.\n(13 of 8000 characters)"), "{}", memory.stdout);
    let set = local
        .run(&["-o", "json", "agents", "memory", "keeper", "--set", "Standup at 10."])
        .await
        .ok();
    assert_eq!(set.json()["memory"], "Standup at 10.");
    let cleared = remote.run(&["-o", "json", "agents", "memory", "keeper", "--clear"]).await.ok();
    assert_eq!(cleared.json()["memory"], "");
    assert!(remote.run(&["agents", "memory", "keeper"]).await.ok().stdout.starts_with("(empty)"));

    let tools = local.run(&["tools"]).await.ok();
    for name in ["http_fetch", "post_message", "create_task", "memory", "read_channel"] {
        assert!(tools.stdout.contains(name), "{name} missing:\n{}", tools.stdout);
    }
}

backend_tests! { db;
    mcp_servers_are_added_listed_tested_and_removed_from_the_terminal,
}

async fn mcp_servers_are_added_listed_tested_and_removed_from_the_terminal(db: TestDb) {
    const TOKEN: &str = "cli-mcp-token-7";
    let server = McpHttpServer::start().await;
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let [remote, mut local] = both_modes(&app).await;
    local.env.push(("AGENTD_TOOLS__HTTP__ALLOW_PRIVATE", "true".into()));
    remote
        .run(&["register", "--email", "mcp@example.com", "--password", PASSWORD, "--name", "M"])
        .await
        .ok();
    local.run(&["login", "--email", "mcp@example.com", "--password", PASSWORD]).await.ok();
    let mut add = remote.command(&["-o", "json", "mcp", "add", "calc", "--url", &server.url]);
    let added = add.env("AGENTCTL_MCP_TOKEN", TOKEN).output().await.unwrap();
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let added = String::from_utf8_lossy(&added.stdout).into_owned();
    assert!(added.contains("\"has_token\":true") && !added.contains(TOKEN), "{added}");

    let from_remote = remote.run(&["-o", "json", "mcp", "list"]).await.ok();
    let from_local = local.run(&["-o", "json", "mcp", "list"]).await.ok();
    assert_eq!(from_remote.stdout, from_local.stdout, "the same bytes in both modes");
    let table = local.run(&["mcp", "list"]).await.ok();
    assert!(
        table.stdout.contains("calc") && table.stdout.contains(&server.url),
        "{}",
        table.stdout
    );
    assert!(!table.stdout.contains(TOKEN));

    for ctl in [&remote, &local] {
        let tested = ctl.run(&["mcp", "test", "calc"]).await.ok();
        assert!(tested.stdout.contains("calc__add"), "{}", tested.stdout);
    }
    let tools = remote.run(&["tools"]).await.ok();
    assert!(tools.stdout.contains("MCP server calc (user)"), "{}", tools.stdout);
    let agent = [
        "-o",
        "json",
        "agents",
        "create",
        "--id",
        "adder",
        "--name",
        "Adder",
        "--role-prompt",
        "Add.",
        "--channel",
        "c",
        "--mcp-servers",
        "calc",
    ];
    let created = local.run(&agent).await.ok();
    assert_eq!(created.json()["mcp_servers"], json!(["calc"]));
    let cleared = remote.run(&["-o", "json", "agents", "update", "adder", "--mcp-servers", ""]);
    assert_eq!(cleared.await.ok().json()["mcp_servers"], json!([]));

    let missing = remote.run(&["mcp", "test", "nope"]).await;
    assert_eq!(missing.code, 4, "not found: {}", missing.stderr);
    remote.run(&["mcp", "remove", "calc", "--yes"]).await.ok();
    assert_eq!(remote.run(&["-o", "json", "mcp", "list"]).await.ok().json()["servers"], json!([]));
}
