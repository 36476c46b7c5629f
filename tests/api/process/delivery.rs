//! Posts across process crashes and several processes on one database: none lost, none twice.

use super::*;

backend_tests! { db;
    a_killed_process_loses_no_pending_post,
    two_processes_on_one_database_deliver_each_post_once_and_in_order,
}

async fn a_killed_process_loses_no_pending_post(db: TestDb) {
    let discord = FakeDiscord::start().await;
    discord.add_bot("kill-bot.1", "KillBot");
    discord.add_guild("777", "Kill", &["kill-bot.1"]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = [
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", db.url_for_process()),
        ("AGENTD_DISCORD__API_BASE", discord.api_base.clone()),
    ];
    let server = Server::start(&env).await;
    let token = server.register("kill@example.com").await;
    server.connect(&token, "kill-bot.1", "777").await;
    server.mapped_agent(&token, ("poster", "Poster"), "777", "7771").await;

    discord.fail_next(&[Failure::ServerError; 10_000]);
    for status in ["active", "idle", "active"] {
        server.patch("/api/agents/poster", &token, json!({"status": status}), 200).await;
    }
    let attempts = || discord.requests().iter().filter(|r| r.path.ends_with("/messages")).count();
    eventually(Duration::from_secs(20), "delivery was attempted", || async { attempts() > 0 })
        .await;
    server.signal("-KILL").await;
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL", &[]).await, 3);
    assert!(discord.messages().is_empty());

    discord.clear_failures();
    let _server = Server::start(&env).await;
    // The first retry waits a second, a post held at the kill waits out its 30 s lease.
    eventually(Duration::from_secs(60), "three posts delivered", || async {
        discord.messages().len() >= 3
    })
    .await;
    eventually(Duration::from_secs(10), "the outbox drains", || async {
        db.count("SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL", &[]).await == 0
    })
    .await;
    let titles: Vec<String> = discord
        .messages()
        .iter()
        .map(|m| m.body["embeds"][0]["title"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(titles, ["Poster is active", "Poster is idle", "Poster is active"]);
}

async fn two_processes_on_one_database_deliver_each_post_once_and_in_order(db: TestDb) {
    let discord = FakeDiscord::start().await;
    discord.add_bot("shared-bot.1", "SharedBot");
    discord.add_guild("888", "Shared", &["shared-bot.1"]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = [
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", db.url_for_process()),
        ("AGENTD_DISCORD__API_BASE", discord.api_base.clone()),
    ];
    let first = Server::start(&env).await;
    let second = Server::start(&env).await;
    let token = first.register("nodes@example.com").await;
    // The guild is connected through one node and the agent created through the other.
    second.connect(&token, "shared-bot.1", "888").await;
    first.mapped_agent(&token, ("poster", "Poster"), "888", "8881").await;

    let mut expected = Vec::new();
    for i in 0..40 {
        let (name, status) = (format!("p{i:02}"), if i % 2 == 0 { "active" } else { "idle" });
        let node = if i % 3 == 0 { &second } else { &first };
        node.patch("/api/agents/poster", &token, json!({"name": name, "status": status}), 200)
            .await;
        expected.push(format!("{name} is {status}"));
    }
    eventually(Duration::from_secs(60), "40 posts delivered", || async {
        discord.messages().len() >= 40
    })
    .await;
    let titles: Vec<String> = discord
        .messages()
        .iter()
        .map(|m| m.body["embeds"][0]["title"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(titles, expected);
    let mut sends = std::collections::HashMap::<String, usize>::new();
    for request in discord.requests().iter().filter(|r| r.path.ends_with("/messages")) {
        *sends.entry(request.body["nonce"].as_str().unwrap().to_owned()).or_default() += 1;
    }
    assert_eq!(sends.len(), 40);
    assert!(sends.values().all(|n| *n == 1), "a post was sent by both processes: {sends:?}");
}
