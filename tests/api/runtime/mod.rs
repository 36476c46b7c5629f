//! The runtime through the HTTP API: active agents work through their backlog with the fake
//! model server, report to their channel, obey stop, vacation and delete, retry and fail as
//! docs/api.md says.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_models::{FakeModels, Script};
use crate::helpers::{Options, TestApp, TestDb, User, backend_tests, eventually};

mod across_nodes;
mod bound;
mod budget;
mod caching;
pub(crate) mod compaction;
mod fallback;
pub(crate) mod fetch;
mod mcp;
mod mcp_everything;
mod tokens;
mod tools;

const BOT: &str = "runtime-bot.1";
const GUILD: &str = "444";
const CHANNEL: &str = "4441";
const ROLE: &str = "You are Acme's release writer. Answer in one paragraph.";
const WAIT: Duration = Duration::from_secs(20);

/// A user with agent `id` on `model` (the server default when `None`), mapped to CHANNEL.
async fn mapped_agent(app: &TestApp, email: &str, id: &str, model: Option<&str>) -> User {
    app.discord.add_bot(BOT, "RuntimeBot");
    app.discord.add_guild(GUILD, "Runtime", &[BOT]);
    let user = app.register(email).await;
    app.post("/api/chat/connect", &user, json!({"bot_token": BOT, "guild_id": GUILD}))
        .await
        .assert_status(200);
    let mut agent = json!({"id": id, "name": "Writer", "role_prompt": ROLE, "channel": "general"});
    if let Some(model) = model {
        agent["model"] = json!(model);
    }
    app.post("/api/agents", &user, agent).await.assert_status(201);
    let mapping = json!({"agent_id": id, "channel_id": CHANNEL});
    app.post(&format!("/api/chat/mappings/{GUILD}"), &user, mapping).await.assert_status(200);
    user
}

fn models(app: &TestApp) -> &FakeModels {
    &app.options.models
}

async fn task(app: &TestApp, user: &User, agent: &str, id: &Value) -> Value {
    let id = id.as_str().unwrap();
    app.get(&format!("/api/agents/{agent}/backlog/{id}"), user).await.assert_status(200).clone()
}

async fn count_in(app: &TestApp, user: &User, agent: &str, status: &str) -> usize {
    let reply = app.get(&format!("/api/agents/{agent}/backlog?status={status}"), user).await;
    reply.assert_status(200)["tasks"].as_array().unwrap().len()
}

async fn agent_status(app: &TestApp, user: &User, agent: &str) -> String {
    let reply = app.get(&format!("/api/agents/{agent}"), user).await;
    reply.assert_status(200)["status"].as_str().unwrap().to_owned()
}

/// Until the node has let go of the agent: a worker that was going to take another task has
/// taken it by then.
async fn released(app: &TestApp) {
    eventually(WAIT, "the runtime lets go of the agent", || async {
        app.core.runtime_stats().agents_running == 0
    })
    .await;
}

/// The posts' embeds (title, description) in the channel, in order, except the tasks'
/// "Working on" posts (see `interactions/cancel.rs`).
fn posts(app: &TestApp) -> Vec<(String, String)> {
    app.discord
        .messages_in(CHANNEL)
        .iter()
        .filter(|m| !crate::process::is_working_on(m))
        .map(|m| {
            let embed = &m.body["embeds"][0];
            (
                embed["title"].as_str().unwrap_or("").to_owned(),
                embed["description"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn entries(activity: &Value) -> Vec<(String, String)> {
    activity["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (e["action"].as_str().unwrap().to_owned(), e["details"].as_str().unwrap().to_owned())
        })
        .collect()
}

backend_tests! { app;
    a_started_agent_runs_its_backlog_by_priority_and_posts_each_result,
    echo_answers_with_no_provider_configured_and_long_results_are_cut_for_the_channel,
    throttle_spaces_the_calls_of_an_agent,
    stopping_during_a_slow_task_lets_it_finish_and_takes_no_next_one,
    vacation_lets_the_task_finish_and_ending_it_resumes,
    deleting_an_agent_during_its_task_writes_and_posts_nothing,
    transient_failures_are_retried_then_the_task_fails,
    three_failed_tasks_in_a_row_put_the_agent_in_error_until_started,
    a_rejected_api_key_puts_the_agent_in_error_at_once,
    an_unknown_model_name_fails_the_task_and_errors_the_agent,
}

async fn a_started_agent_runs_its_backlog_by_priority_and_posts_each_result(app: TestApp) {
    let user = mapped_agent(&app, "order@example.com", "writer", Some("openai:gpt-test")).await;
    let low = app.add_task(&user, "writer", "Low priority", 0).await;
    let high = app.add_task(&user, "writer", "High priority", 5).await;
    let body =
        json!({"title": "Middle priority", "description": "Mention the beta.", "priority": 2});
    let middle =
        app.post("/api/agents/writer/backlog", &user, body).await.assert_status(201).clone();
    assert!(models(&app).calls().is_empty(), "an idle agent takes no task");

    app.post_empty("/api/agents/writer/start", &user).await.assert_status(200);
    eventually(WAIT, "three tasks complete", || async {
        count_in(&app, &user, "writer", "complete").await == 3
    })
    .await;

    let calls = models(&app).calls();
    let users: Vec<&str> = calls.iter().map(|c| c.user()).collect();
    assert_eq!(users, ["High priority", "Middle priority\n\nMention the beta.", "Low priority"]);
    assert!(calls.iter().all(|c| c.system().starts_with(ROLE) && c.body["model"] == "gpt-test"));
    assert!(calls[0].system().contains("## Tools"), "the default tools are explained");
    assert!(
        calls[2].system().contains("- High priority: Answer to: High priority"),
        "recent tasks"
    );
    for (t, user_message) in [
        (&high, "High priority"),
        (&middle, "Middle priority\n\nMention the beta."),
        (&low, "Low priority"),
    ] {
        let done = task(&app, &user, "writer", &t["id"]).await;
        assert_eq!(done["status"], "complete");
        assert_eq!(done["result"], format!("Answer to: {user_message}"));
        assert_eq!(done["attempts"], 1);
        assert_eq!(
            done["usage"],
            json!({"input_tokens": 11, "output_tokens": 22, "cache_read_tokens": 0,
                   "cache_write_tokens": 0})
        );
        assert!(done["started_at"].is_string() && done["completed_at"].is_string());
        assert!(done["error"].is_null());
    }
    let activity =
        app.get("/api/agents/writer/activity?limit=100", &user).await.assert_status(200).clone();
    let actions: Vec<(String, String)> = entries(&activity);
    let runtime: Vec<&str> = actions
        .iter()
        .rev()
        .map(|(a, _)| a.as_str())
        .filter(|a| a.starts_with("task_") && *a != "task_added")
        .collect();
    assert_eq!(
        runtime,
        [
            "task_started",
            "task_completed",
            "task_started",
            "task_completed",
            "task_started",
            "task_completed"
        ]
    );
    assert!(actions.iter().any(|(a, d)| a == "task_completed" && d.contains("High priority")));

    eventually(WAIT, "the results are posted", || async { posts(&app).len() >= 4 }).await;
    let posted = posts(&app);
    assert_eq!(posted[0].0, "Writer is active");
    assert_eq!(
        posted[1..],
        [
            ("High priority".to_owned(), "Answer to: High priority".to_owned()),
            (
                "Middle priority".to_owned(),
                "Answer to: Middle priority\n\nMention the beta.".to_owned()
            ),
            ("Low priority".to_owned(), "Answer to: Low priority".to_owned()),
        ]
    );
}

async fn echo_answers_with_no_provider_configured_and_long_results_are_cut_for_the_channel(
    app: TestApp,
) {
    let user = mapped_agent(&app, "echo@example.com", "echoer", None).await;
    let long = "x".repeat(5000);
    let body = json!({"title": "Summarise the week", "description": long});
    let added =
        app.post("/api/agents/echoer/backlog", &user, body).await.assert_status(201).clone();
    app.post_empty("/api/agents/echoer/start", &user).await.assert_status(200);
    eventually(WAIT, "the task completes", || async {
        count_in(&app, &user, "echoer", "complete").await == 1
    })
    .await;
    let done = task(&app, &user, "echoer", &added["id"]).await;
    let result = done["result"].as_str().unwrap();
    assert!(result.contains("No model was called"), "{result}");
    assert!(result.contains("Summarise the week") && result.contains(&long));
    assert!(done["usage"].is_null());
    assert!(models(&app).calls().is_empty(), "echo calls no provider");

    eventually(WAIT, "the result is posted", || async { posts(&app).len() >= 2 }).await;
    let (title, description) = &posts(&app)[1];
    assert_eq!(title, "Summarise the week");
    assert_eq!(description.chars().count(), 4096);
    assert!(description.ends_with('…'));
}

async fn throttle_spaces_the_calls_of_an_agent(app: TestApp) {
    let user =
        mapped_agent(&app, "throttle@example.com", "slowpoke", Some("anthropic:claude-test")).await;
    app.patch("/api/agents/slowpoke", &user, json!({"throttle_seconds": 0.4}))
        .await
        .assert_status(200);
    for n in 0..3 {
        app.add_task(&user, "slowpoke", &format!("Task {n}"), 0).await;
    }
    app.post_empty("/api/agents/slowpoke/start", &user).await.assert_status(200);
    eventually(WAIT, "three tasks complete", || async {
        count_in(&app, &user, "slowpoke", "complete").await == 3
    })
    .await;
    let calls = models(&app).calls();
    assert_eq!(calls.len(), 3);
    for pair in calls.windows(2) {
        let gap = pair[1].received - pair[0].answered.unwrap();
        assert!(gap >= Duration::from_millis(400), "calls {gap:?} apart");
    }
}

async fn stopping_during_a_slow_task_lets_it_finish_and_takes_no_next_one(app: TestApp) {
    let user = mapped_agent(&app, "stop@example.com", "stopper", Some("openai:gpt-test")).await;
    models(&app).script([Script::Hang(Duration::from_millis(600))]);
    let first = app.add_task(&user, "stopper", "First", 1).await;
    let second = app.add_task(&user, "stopper", "Second", 0).await;
    app.post_empty("/api/agents/stopper/start", &user).await.assert_status(200);
    eventually(WAIT, "the first call arrives", || async { !models(&app).calls().is_empty() }).await;
    assert_eq!(task(&app, &user, "stopper", &first["id"]).await["status"], "in_progress");

    app.post_empty("/api/agents/stopper/stop", &user).await.assert_status(200);
    eventually(WAIT, "the first task completes", || async {
        task(&app, &user, "stopper", &first["id"]).await["status"] == "complete"
    })
    .await;
    released(&app).await;
    assert_eq!(task(&app, &user, "stopper", &second["id"]).await["status"], "queued");
    assert_eq!(models(&app).calls().len(), 1);
    eventually(WAIT, "the result is posted after the stop", || async { posts(&app).len() >= 3 })
        .await;
    let titles: Vec<String> = posts(&app).into_iter().map(|(t, _)| t).collect();
    assert_eq!(titles, ["Writer is active", "Writer is idle", "First"]);

    // PATCH status has the same effect as start.
    app.patch("/api/agents/stopper", &user, json!({"status": "active"})).await.assert_status(200);
    eventually(WAIT, "the second task completes", || async {
        task(&app, &user, "stopper", &second["id"]).await["status"] == "complete"
    })
    .await;
}

async fn vacation_lets_the_task_finish_and_ending_it_resumes(app: TestApp) {
    let user =
        mapped_agent(&app, "vacation@example.com", "traveller", Some("openai:gpt-test")).await;
    models(&app).script([Script::Hang(Duration::from_millis(600))]);
    let first = app.add_task(&user, "traveller", "Before vacation", 1).await;
    let second = app.add_task(&user, "traveller", "After vacation", 0).await;
    app.post_empty("/api/agents/traveller/start", &user).await.assert_status(200);
    eventually(WAIT, "the first call arrives", || async { !models(&app).calls().is_empty() }).await;
    let on = app.post_empty("/api/agents/traveller/vacation", &user).await;
    assert_eq!(on.assert_status(200)["status"], "vacation");
    eventually(WAIT, "the first task completes", || async {
        task(&app, &user, "traveller", &first["id"]).await["status"] == "complete"
    })
    .await;
    released(&app).await;
    assert_eq!(task(&app, &user, "traveller", &second["id"]).await["status"], "queued");

    let off = app.post("/api/agents/traveller/vacation", &user, json!({"enabled": false})).await;
    assert_eq!(off.assert_status(200)["status"], "active");
    eventually(WAIT, "the second task completes", || async {
        task(&app, &user, "traveller", &second["id"]).await["status"] == "complete"
    })
    .await;
    assert_eq!(models(&app).calls().len(), 2);
}

async fn deleting_an_agent_during_its_task_writes_and_posts_nothing(app: TestApp) {
    let user = mapped_agent(&app, "delete@example.com", "doomed", Some("openai:gpt-test")).await;
    models(&app).script([Script::Hang(Duration::from_millis(600))]);
    app.add_task(&user, "doomed", "Never finished", 0).await;
    app.post_empty("/api/agents/doomed/start", &user).await.assert_status(200);
    eventually(WAIT, "the call arrives", || async { !models(&app).calls().is_empty() }).await;
    app.delete("/api/agents/doomed", &user).await.assert_status(200);
    eventually(WAIT, "the runtime drops the result", || async {
        app.core.runtime_stats().results_dropped == 1
    })
    .await;
    released(&app).await;
    assert_eq!(app.core.runtime_stats().tasks_completed, 0);
    assert!(posts(&app).iter().all(|(title, _)| title != "Never finished"), "{:?}", posts(&app));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks", &[]).await, 0);
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL", &[]).await,
        0
    );
    app.get("/api/agents/doomed", &user).await.assert_error(404, "agent_not_found");
}

async fn transient_failures_are_retried_then_the_task_fails(app: TestApp) {
    let user = mapped_agent(&app, "retry@example.com", "flaky", Some("openai:gpt-test")).await;
    models(&app).script([
        Script::Status(429, Some(1)),
        Script::Status(500, None),
        Script::Status(503, None),
    ]);
    let doomed = app.add_task(&user, "flaky", "Unlucky", 0).await;
    app.post_empty("/api/agents/flaky/start", &user).await.assert_status(200);
    eventually(WAIT, "the task fails", || async {
        task(&app, &user, "flaky", &doomed["id"]).await["status"] == "failed"
    })
    .await;
    let failed = task(&app, &user, "flaky", &doomed["id"]).await;
    assert_eq!(failed["attempts"], 3);
    assert!(failed["error"].as_str().unwrap().contains("503"), "{failed}");
    assert!(failed["result"].is_null());
    let calls = models(&app).calls();
    assert_eq!(calls.len(), 3);
    let waited = calls[1].received - calls[0].answered.unwrap();
    assert!(waited >= Duration::from_secs(1), "Retry-After: 1 was not respected: {waited:?}");
    let activity = app.get("/api/agents/flaky/activity", &user).await.assert_status(200).clone();
    assert!(
        entries(&activity)
            .iter()
            .any(|(a, d)| a == "task_failed" && d.contains("Unlucky") && d.contains("3 attempts"))
    );
    // One failed task is not a streak: the agent goes on.
    assert_eq!(agent_status(&app, &user, "flaky").await, "active");
    let next = app.add_task(&user, "flaky", "Lucky", 0).await;
    eventually(WAIT, "the next task completes", || async {
        task(&app, &user, "flaky", &next["id"]).await["status"] == "complete"
    })
    .await;

    // A failed task can be retried, and then runs again.
    let retried = app
        .post_empty(
            &format!("/api/agents/flaky/backlog/{}/retry", doomed["id"].as_str().unwrap()),
            &user,
        )
        .await;
    retried.assert_status(200);
    eventually(WAIT, "the retried task completes", || async {
        task(&app, &user, "flaky", &doomed["id"]).await["status"] == "complete"
    })
    .await;
}

async fn three_failed_tasks_in_a_row_put_the_agent_in_error_until_started(app: TestApp) {
    let user = mapped_agent(&app, "streak@example.com", "streaky", Some("openai:gpt-test")).await;
    models(&app).script(std::iter::repeat_n(Script::Status(500, None), 9));
    for n in 0..4 {
        app.add_task(&user, "streaky", &format!("Task {n}"), 10 - n).await;
    }
    app.post_empty("/api/agents/streaky/start", &user).await.assert_status(200);
    eventually(WAIT, "the agent is in error", || async {
        agent_status(&app, &user, "streaky").await == "error"
    })
    .await;
    released(&app).await;
    assert_eq!(count_in(&app, &user, "streaky", "failed").await, 3);
    assert_eq!(count_in(&app, &user, "streaky", "queued").await, 1);
    let activity = app.get("/api/agents/streaky/activity", &user).await.assert_status(200).clone();
    let (action, details) = &entries(&activity)[0];
    assert_eq!(action, "agent_error");
    assert!(details.contains("3 tasks in a row"), "{details}");
    eventually(WAIT, "the error is posted", || async {
        posts(&app).iter().any(|(t, _)| t == "Writer is error")
    })
    .await;

    app.post_empty("/api/agents/streaky/start", &user).await.assert_status(200);
    eventually(WAIT, "the last task completes", || async {
        count_in(&app, &user, "streaky", "complete").await == 1
    })
    .await;
    assert_eq!(agent_status(&app, &user, "streaky").await, "active");
}

async fn a_rejected_api_key_puts_the_agent_in_error_at_once(app: TestApp) {
    let user = mapped_agent(&app, "key@example.com", "locked", Some("openai:gpt-test")).await;
    models(&app).script([Script::Status(401, None)]);
    let first = app.add_task(&user, "locked", "First", 1).await;
    app.add_task(&user, "locked", "Second", 0).await;
    app.post_empty("/api/agents/locked/start", &user).await.assert_status(200);
    eventually(WAIT, "the agent is in error", || async {
        agent_status(&app, &user, "locked").await == "error"
    })
    .await;
    released(&app).await;
    let failed = task(&app, &user, "locked", &first["id"]).await;
    assert_eq!((failed["status"].as_str(), failed["attempts"].as_i64()), (Some("failed"), Some(1)));
    assert_eq!(models(&app).calls().len(), 1, "a permanent rejection is not retried");
    assert_eq!(count_in(&app, &user, "locked", "queued").await, 1);
    let activity = app.get("/api/agents/locked/activity", &user).await.assert_status(200).clone();
    let (action, details) = &entries(&activity)[0];
    assert_eq!(action, "agent_error");
    assert!(details.contains("rejected the API key"), "{details}");
    eventually(WAIT, "the error is posted", || async {
        posts(&app).iter().any(|(t, d)| t == "Writer is error" && d.contains("API key"))
    })
    .await;
}

async fn an_unknown_model_name_fails_the_task_and_errors_the_agent(app: TestApp) {
    let user = mapped_agent(&app, "unknown@example.com", "confused", Some("openai:gpt-test")).await;
    // Stored names are only checked for shape; the provider part is checked when it runs.
    app.db.execute("UPDATE agents SET model = 'mistral:large' WHERE id = 'confused'", &[]).await;
    let added = app.add_task(&user, "confused", "Anything", 0).await;
    app.post_empty("/api/agents/confused/start", &user).await.assert_status(200);
    eventually(WAIT, "the agent is in error", || async {
        agent_status(&app, &user, "confused").await == "error"
    })
    .await;
    let failed = task(&app, &user, "confused", &added["id"]).await;
    assert!(failed["error"].as_str().unwrap().contains("unknown model"), "{failed}");
    assert_eq!(failed["attempts"], 1);
    assert!(models(&app).calls().is_empty());
}

backend_tests! { quiet_app;
    a_task_added_to_an_idle_active_agent_starts_without_polling,
}

async fn a_task_added_to_an_idle_active_agent_starts_without_polling(app: TestApp) {
    // Polls and heartbeats are a minute apart here: only a wake-up can start the task.
    let user = mapped_agent(&app, "wake@example.com", "eager", Some("openai:gpt-test")).await;
    app.patch("/api/agents/eager", &user, json!({"status": "active"})).await.assert_status(200);
    eventually(WAIT, "the agent is running", || async {
        app.core.runtime_stats().agents_running == 1
    })
    .await;
    for n in 0..3 {
        let added = app.add_task(&user, "eager", &format!("Task {n}"), 0).await;
        eventually(Duration::from_secs(2), "the task completes within two seconds", || async {
            task(&app, &user, "eager", &added["id"]).await["status"] == "complete"
        })
        .await;
    }
    assert_eq!(models(&app).calls().len(), 3);

    // Stopping an idle agent frees its place on the node at once, not at the next heartbeat.
    app.post_empty("/api/agents/eager/stop", &user).await.assert_status(200);
    eventually(Duration::from_secs(2), "the node lets go of the stopped agent", || async {
        app.core.runtime_stats().agents_running == 0
    })
    .await;
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM agents WHERE lease_owner IS NOT NULL", &[]).await,
        0
    );
}

backend_tests! { app;
    the_throttle_and_the_backlog_survive_a_restart,
}

async fn the_throttle_and_the_backlog_survive_a_restart(app: TestApp) {
    let user = mapped_agent(&app, "restart@example.com", "steady", Some("openai:gpt-test")).await;
    app.patch("/api/agents/steady", &user, json!({"throttle_seconds": 1.5}))
        .await
        .assert_status(200);
    app.add_task(&user, "steady", "Before the restart", 0).await;
    app.post_empty("/api/agents/steady/start", &user).await.assert_status(200);
    eventually(WAIT, "the first task completes", || async {
        count_in(&app, &user, "steady", "complete").await == 1
    })
    .await;
    let (db, options) = app.stop().await;

    let app = TestApp::start(db, options).await;
    app.add_task(&user, "steady", "After the restart", 0).await;
    eventually(WAIT, "the second task completes", || async {
        count_in(&app, &user, "steady", "complete").await == 2
    })
    .await;
    let calls = models(&app).calls();
    assert_eq!(calls.len(), 2);
    let gap = calls[1].received - calls[0].answered.unwrap();
    assert!(gap >= Duration::from_millis(1500), "the throttle was forgotten: {gap:?}");
}
