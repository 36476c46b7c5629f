//! The outbox: status posts reach the mapped channel in order, exactly once, through rate
//! limits, failures and crashes.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::fake_discord::Failure;
use crate::helpers::{CrashableApp, TestApp, User, backend_tests, eventually};

const BOT: &str = "outbox-bot.1";
const GUILD: &str = "555";
const CHANNEL: &str = "5551";

/// A user whose agent `poster` is mapped to channel 5551.
async fn mapped(app: &TestApp, email: &str) -> User {
    app.discord.add_bot(BOT, "PosterBot");
    app.discord.add_guild(GUILD, "Posts", &[BOT]);
    let user = app.register(email).await;
    app.post("/api/chat/connect", &user, json!({"bot_token": BOT, "guild_id": GUILD}))
        .await
        .assert_status(200);
    app.create_agent(&user, "poster").await;
    let mapping = json!({"agent_id": "poster", "channel_id": CHANNEL});
    app.post(&format!("/api/chat/mappings/{GUILD}"), &user, mapping).await.assert_status(200);
    user
}

/// The embed titles posted to the channel, in arrival order.
fn titles(app: &TestApp) -> Vec<String> {
    app.discord
        .messages_in(CHANNEL)
        .iter()
        .map(|m| m.body["embeds"][0]["title"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// How many messages each nonce produced.
fn per_nonce(app: &TestApp) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for message in app.discord.messages_in(CHANNEL) {
        *counts.entry(message.body["nonce"].as_str().unwrap().to_owned()).or_default() += 1;
    }
    counts
}

/// Posts not yet delivered.
async fn outbox_rows(app: &TestApp) -> i64 {
    app.db.count("SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL", &[]).await
}

backend_tests! { app;
    status_changes_post_to_the_mapped_channel_in_order,
    a_post_held_back_by_discord_rate_limits_keeps_its_lease_and_is_sent_by_one_node,
    agents_without_a_mapping_queue_nothing,
    a_burst_of_300_posts_is_delivered_in_order_once_each_and_the_limiter_learns,
    server_errors_and_timeouts_are_retried_without_losing_or_doubling_a_post,
    a_permanent_refusal_drops_the_post_and_logs_post_failed,
    pending_posts_survive_a_crash_and_are_delivered_after_restart,
}

async fn status_changes_post_to_the_mapped_channel_in_order(app: TestApp) {
    let user = mapped(&app, "status@example.com").await;
    app.post_empty("/api/agents/poster/start", &user).await.assert_status(200);
    app.post_empty("/api/agents/poster/vacation", &user).await.assert_status(200);
    app.post_empty("/api/agents/poster/vacation", &user).await.assert_status(200);
    app.post_empty("/api/agents/poster/stop", &user).await.assert_status(200);
    app.patch("/api/agents/poster", &user, json!({"status": "error"})).await.assert_status(200);
    app.post_empty("/api/agents/poster/stop", &user).await.assert_status(200);
    app.patch("/api/agents/poster", &user, json!({"name": "Renamed"})).await.assert_status(200);

    eventually(Duration::from_secs(10), "six status posts", || async {
        app.discord.messages_in(CHANNEL).len() >= 6
    })
    .await;
    assert_eq!(
        titles(&app),
        [
            "Agent poster is active",
            "Agent poster is vacation",
            "Agent poster is active",
            "Agent poster is idle",
            "Agent poster is error",
            "Agent poster is idle"
        ]
    );
    let first = &app.discord.messages_in(CHANNEL)[0].body;
    assert_eq!(first["allowed_mentions"], json!({"parse": []}));
    assert_eq!(first["enforce_nonce"], true);
    assert!(first["nonce"].as_str().is_some_and(|n| !n.is_empty() && n.len() <= 25));
    eventually(Duration::from_secs(5), "the outbox drains", || async {
        outbox_rows(&app).await == 0
    })
    .await;
    assert!(per_nonce(&app).values().all(|n| *n == 1));
    for message in app.discord.messages_in(CHANNEL) {
        let recorded = app
            .db
            .count(
                "SELECT COUNT(*) FROM outbox WHERE message_id = $1 AND delivered_at IS NOT NULL",
                &[&message.id],
            )
            .await;
        assert_eq!(recorded, 1, "Discord's message id {} is recorded with its post", message.id);
    }
}

async fn a_post_held_back_by_discord_rate_limits_keeps_its_lease_and_is_sent_by_one_node(
    app: TestApp,
) {
    // One message per 5 s in the channel: after the first, the server's limiter holds the second
    // post for longer than the outbox lease (2 s) before sending it.
    app.discord.limit_messages(1, Duration::from_secs(5));
    let user = mapped(&app, "slow@example.com").await;
    app.post_empty("/api/agents/poster/start", &user).await.assert_status(200);
    eventually(Duration::from_secs(10), "the first post", || async {
        app.discord.messages_in(CHANNEL).len() == 1
    })
    .await;
    app.post_empty("/api/agents/poster/stop", &user).await.assert_status(200);
    let held = "SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL AND lease_owner IS NOT NULL";
    eventually(Duration::from_secs(10), "the server leases the second post", || async {
        app.db.count(held, &[]).await == 1
    })
    .await;
    // Only now a second node on the same database starts delivering too. It has not learnt the
    // channel's limit, so if it took the post over when the first lease ran out it would send
    // at once, into a 429.
    let other = agentcore::Core::open(app.options.core_config(&app.db)).await.unwrap();
    let other_outbox = agentcore::OutboxWorker::start(&other);
    eventually(Duration::from_secs(20), "the second post", || async {
        app.discord.messages_in(CHANNEL).len() == 2
    })
    .await;
    let sends: Vec<String> = app
        .discord
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/messages"))
        .map(|r| r.body["nonce"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(sends.len(), 2, "each post was sent by one node, once: {sends:?}");
    assert_eq!(app.discord.rate_limited(CHANNEL), 0, "nobody sent past the limit");
    other_outbox.shutdown().await;
    other.close().await;
}

async fn agents_without_a_mapping_queue_nothing(app: TestApp) {
    let user = app.register("unmapped@example.com").await;
    app.create_agent(&user, "quiet").await;
    app.post_empty("/api/agents/quiet/start", &user).await.assert_status(200);
    app.post_empty("/api/agents/quiet/vacation", &user).await.assert_status(200);
    assert_eq!(outbox_rows(&app).await, 0);
    assert!(app.discord.messages().is_empty());
}

async fn a_burst_of_300_posts_is_delivered_in_order_once_each_and_the_limiter_learns(app: TestApp) {
    app.discord.limit_messages(5, Duration::from_millis(100));
    let user = mapped(&app, "burst@example.com").await;
    let mut expected = Vec::new();
    for i in 0..300 {
        let (name, status) = (format!("post-{i:03}"), if i % 2 == 0 { "active" } else { "idle" });
        app.patch("/api/agents/poster", &user, json!({"name": name, "status": status}))
            .await
            .assert_status(200);
        expected.push(format!("{name} is {status}"));
    }
    eventually(Duration::from_secs(60), "300 posts delivered", || async {
        app.discord.messages_in(CHANNEL).len() >= 300
    })
    .await;
    assert_eq!(titles(&app), expected);
    let nonces = per_nonce(&app);
    assert_eq!(nonces.len(), 300);
    assert!(nonces.values().all(|n| *n == 1));
    let limited = app.discord.rate_limited(CHANNEL);
    assert!(limited <= 1, "{limited} answers were 429: the limiter did not learn the bucket");
    eventually(Duration::from_secs(5), "the outbox drains", || async {
        outbox_rows(&app).await == 0
    })
    .await;
}

async fn server_errors_and_timeouts_are_retried_without_losing_or_doubling_a_post(app: TestApp) {
    let user = mapped(&app, "flaky@example.com").await;
    let hang = Duration::from_millis(800);
    app.discord.fail_next(&[
        Failure::ServerError,
        Failure::PostThenHang(hang),
        Failure::ServerError,
        Failure::PostThenHang(hang),
        Failure::ServerError,
    ]);
    for status in ["active", "idle", "active", "idle", "active"] {
        app.patch("/api/agents/poster", &user, json!({"status": status})).await.assert_status(200);
    }
    eventually(Duration::from_secs(20), "five distinct posts", || async {
        per_nonce(&app).len() >= 5
    })
    .await;
    eventually(Duration::from_secs(10), "the outbox drains", || async {
        outbox_rows(&app).await == 0
    })
    .await;
    let nonces = per_nonce(&app);
    assert_eq!(nonces.len(), 5);
    assert!(nonces.values().all(|n| *n == 1), "a retry posted twice: {nonces:?}");
    assert_eq!(
        titles(&app),
        [
            "Agent poster is active",
            "Agent poster is idle",
            "Agent poster is active",
            "Agent poster is idle",
            "Agent poster is active"
        ]
    );
    let attempts = app.discord.requests().iter().filter(|r| r.path.ends_with("/messages")).count();
    assert!(attempts >= 10, "only {attempts} attempts: the failures were not retried");
}

async fn a_permanent_refusal_drops_the_post_and_logs_post_failed(app: TestApp) {
    let user = mapped(&app, "gone@example.com").await;
    app.discord.remove_channel(CHANNEL);
    app.post_empty("/api/agents/poster/start", &user).await.assert_status(200);
    eventually(Duration::from_secs(10), "the post is dropped", || async {
        outbox_rows(&app).await == 0
    })
    .await;
    let actions = app.actions(&user, "poster").await;
    assert_eq!(actions[0], "post_failed");
    let entries = app.get("/api/agents/poster/activity?limit=1", &user).await;
    assert!(
        entries.body["entries"][0]["details"].as_str().unwrap().contains("Unknown Channel"),
        "{}",
        entries.body
    );

    app.discord.fail_next(&[Failure::Unauthorized]);
    app.discord.add_guild(GUILD, "Posts", &[BOT]);
    app.post_empty("/api/agents/poster/stop", &user).await.assert_status(200);
    eventually(Duration::from_secs(10), "the post is dropped", || async {
        outbox_rows(&app).await == 0
    })
    .await;
    assert_eq!(
        app.actions(&user, "poster").await.iter().filter(|a| *a == "post_failed").count(),
        2
    );
    assert!(app.discord.messages().is_empty());
}

async fn pending_posts_survive_a_crash_and_are_delivered_after_restart(app: TestApp) {
    let user = mapped(&app, "crash@example.com").await;
    let (db, options) = app.stop().await;
    let server = CrashableApp::start(&db, &options).await;
    let fake = options.discord.clone();
    fake.fail_next(&[Failure::ServerError; 10_000]);
    let client = reqwest::Client::new();
    for status in ["active", "idle", "active"] {
        let reply = client
            .patch(format!("{}/api/agents/poster", server.address))
            .bearer_auth(&user.token)
            .json(&json!({"status": status}))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200);
    }
    let failed_attempts =
        || fake.requests().iter().filter(|r| r.path.ends_with("/messages")).count();
    eventually(Duration::from_secs(10), "delivery was attempted", || async {
        failed_attempts() > 0
    })
    .await;
    server.kill();
    assert_eq!(
        db.count("SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL", &[]).await,
        3,
        "the posts are still pending"
    );
    assert!(fake.messages().is_empty());

    fake.clear_failures();
    let app = TestApp::start(db, options).await;
    eventually(Duration::from_secs(15), "three posts delivered", || async {
        per_nonce(&app).len() >= 3
    })
    .await;
    eventually(Duration::from_secs(10), "the outbox drains", || async {
        outbox_rows(&app).await == 0
    })
    .await;
    assert_eq!(
        titles(&app),
        ["Agent poster is active", "Agent poster is idle", "Agent poster is active"]
    );
    assert!(per_nonce(&app).values().all(|n| *n == 1));
}
