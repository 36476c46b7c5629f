//! Discord down for ten seconds in the middle of a burst of posts: every post arrives once,
//! in the order it was queued.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_discord::FakeDiscord;
use crate::fake_models::FakeModels;
use crate::helpers::{TestDb, backend_tests, eventually};
use crate::process::{Server, runtime_env};

backend_tests! { db;
    a_discord_outage_during_a_burst_delivers_every_post_once_and_in_order,
}

async fn a_discord_outage_during_a_burst_delivers_every_post_once_and_in_order(db: TestDb) {
    const TASKS: usize = 12;
    let models = FakeModels::start().await;
    let discord = FakeDiscord::start().await;
    discord.add_bot("outage-bot.1", "OutageBot");
    discord.add_guild("555", "Outage", &["outage-bot.1"]);
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_DISCORD__API_BASE", discord.api_base.clone()));
    let server = Server::start(&env).await;
    let token = server.register("outage@example.com").await;
    server.connect(&token, "outage-bot.1", "555").await;
    server.mapped_agent(&token, ("herald", "Herald"), "555", "5551").await;
    for n in 0..TASKS {
        server
            .post(
                "/api/agents/herald/backlog",
                &token,
                json!({"title": format!("News {n:02}"), "priority": 100 - n}),
                201,
            )
            .await;
    }
    discord.set_outage(true);
    server.post("/api/agents/herald/start", &token, Value::Null, 200).await;
    eventually(Duration::from_secs(30), "the burst is worked while Discord is down", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await == TASKS as i64
    })
    .await;
    // The outage is the fault under test: it lasts ten seconds whatever the service does.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(discord.messages().is_empty(), "nothing is posted during the outage");
    assert!(discord.requests().iter().any(|r| r.method == "POST"), "posts were tried meanwhile");
    discord.set_outage(false);

    let results = || {
        discord
            .messages_in("5551")
            .iter()
            .filter_map(|m| m.body["embeds"][0]["title"].as_str().map(str::to_owned))
            .filter(|title| title.starts_with("News"))
            .collect::<Vec<_>>()
    };
    eventually(Duration::from_secs(90), "every post arrives after the outage", || async {
        results().len() >= TASKS
    })
    .await;
    let expected: Vec<String> = (0..TASKS).map(|n| format!("News {n:02}")).collect();
    assert_eq!(results(), expected, "each post once, in the order the tasks finished");
    let status = discord
        .messages_in("5551")
        .iter()
        .filter(|m| m.body["embeds"][0]["title"] == "Herald is active")
        .count();
    assert_eq!(status, 1, "the status post also arrives once");
    drop(server);
}
