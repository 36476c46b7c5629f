//! What agents act with, from the terminal: `tools`, an agent's `--tools` and `--max-steps`,
//! `agents memory` and `tasks steps`, the same bytes in both modes.

use serde_json::json;

use super::{PASSWORD, both_modes};
use crate::fake_models::Script;
use crate::helpers::{TestApp, backend_tests, eventually};

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
