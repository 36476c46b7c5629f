//! A provider's error that quotes the operator's key, as a careless proxy's does: the key is
//! masked before the text is stored, posted or logged.

use super::*;

backend_tests! { db;
    a_provider_error_quoting_the_key_never_shows_it,
}

async fn a_provider_error_quoting_the_key_never_shows_it(db: TestDb) {
    let discord = FakeDiscord::start().await;
    discord.add_bot("leak-bot.1", "LeakBot");
    discord.add_guild("888", "Leak", &["leak-bot.1"]);
    let models = FakeModels::start().await;
    models.script([Script::EchoKey(401)]);
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_DISCORD__API_BASE", discord.api_base.clone()));
    let server = Server::start(&env).await;
    let token = server.register("leak@example.com").await;
    server.connect(&token, "leak-bot.1", "888").await;
    server.mapped_agent(&token, ("keyed", "Keyed"), "888", "8881").await;
    let task = server.post("/api/agents/keyed/backlog", &token, json!({"title": "Go"}), 201).await;
    server.post("/api/agents/keyed/start", &token, Value::Null, 200).await;
    let path = format!("/api/agents/keyed/backlog/{}", task["id"].as_str().unwrap());
    let get = |path: String| {
        let server = &server;
        let token = token.clone();
        async move { server.send(reqwest::Method::GET, &path, Some(&token), Value::Null).await.1 }
    };
    eventually(Duration::from_secs(20), "the task fails", || async {
        get(path.clone()).await["status"] == "failed"
    })
    .await;
    eventually(Duration::from_secs(20), "the agent's error is posted", || async {
        discord.messages().iter().any(|m| m.body.to_string().contains("rejected the API key"))
    })
    .await;

    let failed = get(path).await;
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(error.contains("rejected the API key") && error.contains("[redacted]"), "{error}");
    let activity = get("/api/agents/keyed/activity".into()).await.to_string();
    let posts: Vec<String> = discord.messages().iter().map(|m| m.body.to_string()).collect();
    let log = server.log.lock().unwrap().join("\n");
    assert!(log.contains("[redacted]"), "the operator's log keeps the scrubbed detail:\n{log}");
    for (place, text) in [("task", error), ("activity", &activity), ("log", &log)]
        .into_iter()
        .chain(posts.iter().map(|p| ("post", p.as_str())))
    {
        assert!(!text.contains(OPENAI_KEY), "the key in the {place}: {text}");
    }
    assert!(server.signal("-TERM").await.success());
}
