//! Agents that act: the tool loop through the HTTP API with the fake model's scripted tool
//! calls (both wire formats), the built-in tools, memory across tasks, and the limits that stop
//! a run.

use serde_json::{Value, json};

use super::{CHANNEL, WAIT, mapped_agent, models, task};
use crate::fake_models::{Call, Script};
use crate::helpers::{TestApp, TestDb, User, app_with, backend_tests, eventually};

backend_tests! { app;
    memory_written_in_one_task_is_in_the_next_tasks_system_prompt,
    the_third_identical_call_stops_the_run_which_ends_with_a_summary,
    a_model_calling_different_tools_forever_stops_at_max_steps,
    delegation_reaches_the_users_own_agents_only_and_stops_at_depth_three,
    malformed_or_mismatched_arguments_are_errors_the_model_reads,
    two_calls_in_one_answer_run_in_order_and_posts_go_through_the_outbox,
    read_channel_shows_the_team_s_messages,
}

backend_tests! { db;
    a_run_past_the_task_timeout_is_stopped_and_summarised,
    an_agent_on_the_servers_default_model_is_offered_its_tools,
}

/// Agent `id` of a new user, mapped to the channel, on `model` with `tools`, started.
pub(super) async fn acting_agent(
    app: &TestApp,
    email: &str,
    id: &str,
    model: &str,
    tools: &[&str],
) -> User {
    let user = mapped_agent(app, email, id, Some(model)).await;
    app.patch(&format!("/api/agents/{id}"), &user, json!({"tools": tools}))
        .await
        .assert_status(200);
    user
}

pub(super) async fn start(app: &TestApp, user: &User, id: &str) {
    app.post_empty(&format!("/api/agents/{id}/start"), user).await.assert_status(200);
}

/// Waits for the task to be complete or failed, and returns it.
pub(super) async fn finished(app: &TestApp, user: &User, agent: &str, id: &Value) -> Value {
    eventually(WAIT, "the task finishes", || async {
        let status = task(app, user, agent, id).await["status"].clone();
        status == "complete" || status == "failed"
    })
    .await;
    task(app, user, agent, id).await
}

pub(super) async fn steps(app: &TestApp, user: &User, agent: &str, id: &Value) -> Vec<Value> {
    let path = format!("/api/agents/{agent}/backlog/{}/steps", id.as_str().unwrap());
    app.get(&path, user).await.assert_status(200)["steps"].as_array().unwrap().clone()
}

pub(super) fn kinds(steps: &[Value]) -> Vec<&str> {
    steps.iter().map(|s| s["kind"].as_str().unwrap()).collect()
}

/// The calls the fake model received for `model`.
pub(super) fn calls_of(app: &TestApp, model: &str) -> Vec<Call> {
    models(app).calls().into_iter().filter(|c| c.body["model"] == model).collect()
}

pub(super) fn call(name: &str, arguments: Value) -> Script {
    Script::Call { name: name.into(), arguments }
}

async fn memory_written_in_one_task_is_in_the_next_tasks_system_prompt(app: TestApp) {
    let user =
        acting_agent(&app, "memory@example.com", "keeper", "openai:keeper", &["memory"]).await;
    models(&app).script_for(
        "keeper",
        [
            call("memory", json!({"action": "append", "text": "Release day is Thursday."})),
            Script::Answer("Noted.".into()),
            Script::Answer("Thursday.".into()),
        ],
    );
    let first = app.add_task(&user, "keeper", "Remember that release day is Thursday", 0).await;
    start(&app, &user, "keeper").await;
    let first = finished(&app, &user, "keeper", &first["id"]).await;
    assert_eq!((first["status"].as_str(), first["steps"].as_i64()), (Some("complete"), Some(3)));
    let memory = app.get("/api/agents/keeper/memory", &user).await.assert_status(200).clone();
    assert_eq!(memory["memory"], "Release day is Thursday.");
    assert_eq!((memory["chars"].as_i64(), memory["limit"].as_i64()), (Some(24), Some(8000)));

    let second = app.add_task(&user, "keeper", "When is release day?", 0).await;
    let second = finished(&app, &user, "keeper", &second["id"]).await;
    assert_eq!(second["result"], "Thursday.");
    let asked = calls_of(&app, "keeper");
    let last = asked.last().unwrap();
    assert_eq!(last.user(), "When is release day?");
    assert!(last.system().contains("Release day is Thursday."), "{}", last.system());
    assert!(
        last.system().contains("Remember that release day is Thursday: Noted."),
        "recent tasks"
    );
    assert_eq!(last.tools(), ["memory"]);
    let activity = app.actions(&user, "keeper").await;
    assert!(activity.contains(&"memory_updated".to_owned()), "{activity:?}");
    let completed = app.get("/api/agents/keeper/activity", &user).await;
    let details: Vec<&str> = completed.assert_status(200)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "task_completed")
        .map(|e| e["details"].as_str().unwrap())
        .collect();
    assert!(
        details.contains(
            &"Task 'Remember that release day is Thursday' completed in 3 steps (1 tool call)."
        ),
        "{details:?}"
    );

    // People edit it too; a write past the limit is refused and changes nothing.
    let put =
        app.put("/api/agents/keeper/memory", &user, json!({"memory": "Ship on Fridays."})).await;
    assert_eq!(put.assert_status(200)["memory"], "Ship on Fridays.");
    let long = "x".repeat(8001);
    let refused = app.put("/api/agents/keeper/memory", &user, json!({"memory": long})).await;
    refused.assert_error(400, "validation_failed");
    let kept = app.get("/api/agents/keeper/memory", &user).await.assert_status(200).clone();
    assert_eq!(kept["memory"], "Ship on Fridays.");
}

async fn the_third_identical_call_stops_the_run_which_ends_with_a_summary(app: TestApp) {
    let user =
        acting_agent(&app, "loop@example.com", "looper", "anthropic:looper", &["memory"]).await;
    models(&app).repeat_for("looper", call("memory", json!({"action": "read"})));
    let added = app.add_task(&user, "looper", "Check your memory", 0).await;
    start(&app, &user, "looper").await;
    let done = finished(&app, &user, "looper", &added["id"]).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["error"].as_str().unwrap().starts_with("loop_detected: "), "{done}");
    let asked = calls_of(&app, "looper");
    assert_eq!(asked.len(), 4, "three calls, then the summary; nothing after it");
    let summary = asked.last().unwrap();
    assert_eq!(done["result"], format!("Summary: {}", summary.last_user()));
    assert!(summary.last_user().contains("loop_detected"), "{}", summary.last_user());
    let steps = steps(&app, &user, "looper", &added["id"]).await;
    assert_eq!(kinds(&steps), ["model", "tool", "model", "tool", "model", "tool", "summary"]);
    assert!(steps[5]["error"].as_str().unwrap().starts_with("not run: loop_detected"), "{steps:?}");
    assert_eq!(done["steps"].as_i64(), Some(7));
}

async fn a_model_calling_different_tools_forever_stops_at_max_steps(app: TestApp) {
    let user = acting_agent(&app, "steps@example.com", "busy", "openai:busy", &["memory"]).await;
    app.patch("/api/agents/busy", &user, json!({"max_steps": 3})).await.assert_status(200);
    let appends =
        (0..10).map(|n| call("memory", json!({"action": "append", "text": format!("note {n}")})));
    models(&app).script_for("busy", appends);
    let added = app.add_task(&user, "busy", "Take notes", 0).await;
    start(&app, &user, "busy").await;
    let done = finished(&app, &user, "busy", &added["id"]).await;
    assert_eq!(done["status"], "failed");
    assert!(done["error"].as_str().unwrap().starts_with("max_steps: "), "{done}");
    let asked = calls_of(&app, "busy");
    assert_eq!(asked.len(), 4, "max_steps calls, then the summary");
    assert_eq!(asked[3].body["tool_choice"], "none", "the summary is asked for without tools");
    assert_eq!(done["usage"]["input_tokens"].as_i64(), Some(4 * 11), "usage sums the calls");
    let memory = app.get("/api/agents/busy/memory", &user).await.assert_status(200).clone();
    assert_eq!(
        memory["memory"], "note 0\nnote 1\nnote 2",
        "the calls of the last answer are not run"
    );
}

async fn delegation_reaches_the_users_own_agents_only_and_stops_at_depth_three(app: TestApp) {
    let stranger = app.register("stranger@example.com").await;
    app.create_agent(&stranger, "helper-x").await;
    let user =
        acting_agent(&app, "lead@example.com", "lead", "openai:lead", &["create_task"]).await;
    app.create_agent(&user, "helper").await;
    let level = || call("create_task", json!({"title": "Next level"}));
    // The first task creates one in the lead's own backlog (depth 1) and delegates one; each
    // level then creates the next, until depth 3 may not.
    models(&app).script_for(
        "lead",
        [
            Script::Calls(vec![
                ("create_task".into(), json!({"title": "Next level"})),
                (
                    "create_task".into(),
                    json!({"title": "Draft the notes", "agent_id": "helper", "priority": 3}),
                ),
                ("create_task".into(), json!({"title": "Steal", "agent_id": "helper-x"})),
            ]),
            Script::AnswerFromToolResult,
            level(),
            Script::AnswerFromToolResult,
            level(),
            Script::AnswerFromToolResult,
            level(),
            Script::AnswerFromToolResult,
        ],
    );
    let first = app.add_task(&user, "lead", "Plan the release", 0).await;
    start(&app, &user, "lead").await;
    let first = finished(&app, &user, "lead", &first["id"]).await;
    assert_eq!(first["status"], "complete");
    assert!(first["result"].as_str().unwrap().contains("404 agent_not_found"), "{first}");
    let helper =
        app.get("/api/agents/helper/backlog", &user).await.assert_status(200)["tasks"].clone();
    assert_eq!(helper.as_array().unwrap().len(), 1);
    assert_eq!(helper[0]["title"], "Draft the notes");
    assert_eq!(helper[0]["priority"], 3);
    assert_eq!(helper[0]["depth"], 1);
    assert_eq!(
        helper[0]["created_by"],
        json!({"type": "agent", "agent_id": "lead", "task_id": first["id"]})
    );
    let theirs =
        app.get("/api/agents/helper-x/backlog", &stranger).await.assert_status(200)["tasks"]
            .clone();
    assert_eq!(theirs.as_array().unwrap().len(), 0, "another user's agent got a task");

    eventually(WAIT, "the chain of tasks runs", || async {
        let tasks = app.get("/api/agents/lead/backlog?status=complete", &user).await;
        tasks.assert_status(200)["tasks"].as_array().unwrap().len() == 4
    })
    .await;
    let tasks =
        app.get("/api/agents/lead/backlog", &user).await.assert_status(200)["tasks"].clone();
    let depths: Vec<i64> =
        tasks.as_array().unwrap().iter().map(|t| t["depth"].as_i64().unwrap()).collect();
    assert_eq!(depths, [0, 1, 2, 3]);
    let deepest = &tasks[3];
    assert!(deepest["result"].as_str().unwrap().contains("delegation depth 3"), "{deepest}");
}

async fn malformed_or_mismatched_arguments_are_errors_the_model_reads(app: TestApp) {
    let user = acting_agent(&app, "bad@example.com", "clumsy", "openai:clumsy", &["memory"]).await;
    models(&app).script_for(
        "clumsy",
        [
            Script::RawCall {
                name: "memory".into(),
                arguments: "{\"action\": \"append\", ".into(),
            },
            call("memory", json!({"action": "shout", "text": "hi"})),
            call("http_fetch", json!({"url": "https://example.com"})),
            Script::AnswerFromToolResult,
        ],
    );
    let added = app.add_task(&user, "clumsy", "Try the tools", 0).await;
    start(&app, &user, "clumsy").await;
    let done = finished(&app, &user, "clumsy", &added["id"]).await;
    assert_eq!(done["status"], "complete", "{done}");
    let steps = steps(&app, &user, "clumsy", &added["id"]).await;
    let errors: Vec<&str> = steps.iter().filter_map(|s| s["error"].as_str()).collect();
    assert_eq!(errors.len(), 3, "{steps:?}");
    assert!(errors[0].contains("not valid JSON"), "{}", errors[0]);
    assert!(errors[1].contains("action must be read, append or replace"), "{}", errors[1]);
    assert!(errors[2].contains("'http_fetch' is not enabled"), "{}", errors[2]);
    let results = calls_of(&app, "clumsy")[3].tool_results();
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|(_, content)| content.starts_with("Error: ")), "{results:?}");
    assert_eq!(app.get("/api/agents/clumsy/memory", &user).await.assert_status(200)["memory"], "");
}

async fn two_calls_in_one_answer_run_in_order_and_posts_go_through_the_outbox(app: TestApp) {
    let user = acting_agent(
        &app,
        "post@example.com",
        "poster",
        "anthropic:poster",
        &["post_message", "memory"],
    )
    .await;
    models(&app).script_for(
        "poster",
        [
            Script::Calls(vec![
                ("post_message".into(), json!({"content": "Standup starts in 5 minutes."})),
                (
                    "memory".into(),
                    json!({"action": "replace", "text": "Posted the standup reminder."}),
                ),
            ]),
            Script::Answer("Reminder sent.".into()),
        ],
    );
    let added = app.add_task(&user, "poster", "Remind the team of standup", 0).await;
    start(&app, &user, "poster").await;
    let done = finished(&app, &user, "poster", &added["id"]).await;
    assert_eq!(done["result"], "Reminder sent.");
    let steps = steps(&app, &user, "poster", &added["id"]).await;
    let tools: Vec<&str> = steps.iter().filter_map(|s| s["tool"].as_str()).collect();
    assert_eq!(tools, ["post_message", "memory"]);
    let result =
        |m: &crate::fake_discord::Posted| m.body["embeds"][0]["description"] == "Reminder sent.";
    eventually(WAIT, "the result reaches the channel", || async {
        app.discord.messages_in(CHANNEL).iter().any(result)
    })
    .await;
    // After the start's status post: the agent's post, then its result, each once.
    let messages = app.discord.messages_in(CHANNEL);
    let posted: Vec<usize> = (0..messages.len())
        .filter(|&i| messages[i].body["content"] == "Standup starts in 5 minutes.")
        .collect();
    let results: Vec<usize> = (0..messages.len()).filter(|&i| result(&messages[i])).collect();
    assert_eq!(posted.len(), 1, "{messages:?}");
    assert_eq!(results.len(), 1);
    assert!(posted[0] < results[0], "the post came after the result");
}

async fn read_channel_shows_the_team_s_messages(app: TestApp) {
    let user =
        acting_agent(&app, "read@example.com", "reader", "openai:reader", &["read_channel"]).await;
    app.discord.say(CHANNEL, "alice", "Can we ship on Thursday?");
    app.discord.say(CHANNEL, "bob", "Yes, after the demo.");
    models(&app).script_for(
        "reader",
        [call("read_channel", json!({"limit": 5})), Script::AnswerFromToolResult],
    );
    let added = app.add_task(&user, "reader", "What did the team decide?", 0).await;
    start(&app, &user, "reader").await;
    let done = finished(&app, &user, "reader", &added["id"]).await;
    let result = done["result"].as_str().unwrap();
    assert!(
        result.contains("bob: Yes, after the demo.\nalice: Can we ship on Thursday?"),
        "{result}"
    );
    let read = app
        .discord
        .requests()
        .into_iter()
        .find(|r| r.method == "GET" && r.path.contains("/messages"));
    assert!(read.is_some(), "Discord was not asked");
}

async fn a_run_past_the_task_timeout_is_stopped_and_summarised(db: TestDb) {
    let app = app_with(db, |o| o.runtime.task_timeout = std::time::Duration::from_secs(1)).await;
    let user =
        acting_agent(&app, "slow@example.com", "slowpoke", "openai:slowpoke", &["memory"]).await;
    let note = call("memory", json!({"action": "append", "text": "Started."}));
    models(&app).script_for("slowpoke", [note, Script::Hang(std::time::Duration::from_secs(30))]);
    let added = app.add_task(&user, "slowpoke", "Think for a long time", 0).await;
    start(&app, &user, "slowpoke").await;
    let done = finished(&app, &user, "slowpoke", &added["id"]).await;
    assert_eq!(done["status"], "failed");
    assert!(done["error"].as_str().unwrap().starts_with("timeout: "), "{done}");
    assert!(done["result"].as_str().unwrap().starts_with("Summary: "), "{done}");
    let steps = steps(&app, &user, "slowpoke", &added["id"]).await;
    assert_eq!(kinds(&steps), ["model", "tool", "summary"], "the call cut off is no step");
    assert_eq!(calls_of(&app, "slowpoke").len(), 3);
}

async fn an_agent_on_the_servers_default_model_is_offered_its_tools(db: TestDb) {
    let app = app_with(db, |o| o.default_model = Some("openai:house".into())).await;
    let user = mapped_agent(&app, "default@example.com", "plain", None).await;
    let note = call("memory", json!({"action": "replace", "text": "Default model."}));
    models(&app).script_for("house", [note, Script::Answer("Saved.".into())]);
    let added = app.add_task(&user, "plain", "Note the model", 0).await;
    start(&app, &user, "plain").await;
    let done = finished(&app, &user, "plain", &added["id"]).await;
    assert_eq!(done["result"], "Saved.", "{done}");
    assert_eq!(calls_of(&app, "house")[0].tools(), ["post_message", "create_task", "memory"]);
    let memory = app.get("/api/agents/plain/memory", &user).await.assert_status(200).clone();
    assert_eq!(memory["memory"], "Default model.");
}
