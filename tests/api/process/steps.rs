//! A run of several steps survives `kill -9`: after a restart it resumes from its stored steps,
//! makes no finished model call again, and applies no effect twice.

use super::*;

backend_tests! { db;
    a_run_killed_after_its_post_resumes_without_repeating_a_call_a_post_or_a_write,
}

const GUILD: &str = "7001";
const CHANNEL: &str = "70011";
const BOT: &str = "steps-bot.1";

fn call(name: &str, arguments: Value) -> Script {
    Script::Call { name: name.into(), arguments }
}

async fn a_run_killed_after_its_post_resumes_without_repeating_a_call_a_post_or_a_write(
    db: TestDb,
) {
    let models = FakeModels::start().await;
    models.script_for(
        "crashy",
        [
            call("memory", json!({"action": "append", "text": "Kickoff is Monday."})),
            call("post_message", json!({"content": "Halfway there."})),
            // The process is killed while this call is open: it is the step cut off mid-flight.
            Script::Hang(Duration::from_secs(60)),
            call("create_task", json!({"title": "Follow up"})),
            Script::Answer("All done.".into()),
        ],
    );
    let discord = FakeDiscord::start().await;
    discord.add_bot(BOT, "StepsBot");
    discord.add_guild(GUILD, "Steps", &[BOT]);
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_DISCORD__API_BASE", discord.api_base.clone()));
    let server = Server::start(&env).await;
    let token = server.register("steps@example.com").await;
    server.connect(&token, BOT, GUILD).await;
    server.mapped_agent(&token, ("crashy", "Crashy"), GUILD, CHANNEL).await;
    let tools =
        json!({"model": "openai:crashy", "tools": ["memory", "post_message", "create_task"]});
    server.patch("/api/agents/crashy", &token, tools, 200).await;
    let task =
        server.post("/api/agents/crashy/backlog", &token, json!({"title": "Kick off"}), 201).await;
    server.post("/api/agents/crashy/start", &token, Value::Null, 200).await;
    eventually(Duration::from_secs(20), "the third model call is open", || async {
        models.calls().len() == 3
    })
    .await;
    server.signal("-KILL").await;
    assert_eq!(db.count("SELECT COUNT(*) FROM task_steps", &[]).await, 4, "two calls, two tools");

    let server = Server::start(&env).await;
    let path = format!("/api/agents/crashy/backlog/{}", task["id"].as_str().unwrap());
    eventually(Duration::from_secs(30), "the task completes after the restart", || async {
        server.send(reqwest::Method::GET, &path, Some(&token), Value::Null).await.1["status"]
            == "complete"
    })
    .await;
    let done = server.send(reqwest::Method::GET, &path, Some(&token), Value::Null).await.1;
    assert_eq!((done["result"].as_str(), done["attempts"].as_i64()), (Some("All done."), Some(2)));

    // Each finished call once; only the one cut off was made again (same conversation).
    let sizes: Vec<usize> = models
        .calls()
        .iter()
        .filter(|c| c.user() == "Kick off")
        .map(|c| c.body["messages"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [2, 4, 6, 6, 8], "messages per call (system prompt included)");
    let (_, steps) = server
        .send(reqwest::Method::GET, &format!("{path}/steps"), Some(&token), Value::Null)
        .await;
    let seqs: Vec<i64> =
        steps["steps"].as_array().unwrap().iter().map(|s| s["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6, 7], "{steps}");
    let (_, memory) = server
        .send(reqwest::Method::GET, "/api/agents/crashy/memory", Some(&token), Value::Null)
        .await;
    assert_eq!(memory["memory"], "Kickoff is Monday.");
    assert_eq!(db.count("SELECT COUNT(*) FROM tasks WHERE title = 'Follow up'", &[]).await, 1);
    eventually(Duration::from_secs(20), "the result reaches the channel", || async {
        discord
            .messages_in(CHANNEL)
            .iter()
            .any(|m| m.body["embeds"][0]["description"] == "All done.")
    })
    .await;
    let halfway = discord
        .messages_in(CHANNEL)
        .iter()
        .filter(|m| m.body["content"] == "Halfway there.")
        .count();
    assert_eq!(halfway, 1, "the post was sent twice, or never");
    assert!(server.signal("-TERM").await.success());
}
