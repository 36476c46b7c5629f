//! Chat over HTTP against the fake Discord: connections, channels, mappings, sending, OAuth.

use serde_json::json;

use crate::fake_discord::{self, Failure};
use crate::helpers::{TestApp, User, backend_tests};

const BOT: &str = "user-bot-token.1";
const GUILD: &str = "111";
const GENERAL: &str = "1111";
const UPDATES: &str = "1112";

/// A user with their own bot connected to guild 111 ("Acme") and an agent `writer`.
async fn connected(app: &TestApp, email: &str) -> User {
    app.discord.add_bot(BOT, "AcmeBot");
    app.discord.add_guild(GUILD, "Acme", &[BOT]);
    let user = app.register(email).await;
    let reply =
        app.post("/api/chat/connect", &user, json!({"bot_token": BOT, "guild_id": GUILD})).await;
    reply.assert_status(200);
    app.create_agent(&user, "writer").await;
    user
}

backend_tests! { app;
    connecting_checks_the_token_and_the_guild_before_storing,
    bot_tokens_are_sealed_at_rest_and_never_returned,
    channels_are_the_guilds_text_channels_by_position,
    a_revoked_token_fails_the_test_and_is_not_used_again,
    mapping_puts_an_agent_on_one_text_channel_and_remapping_replaces_it,
    disconnecting_removes_the_guilds_mappings,
    another_users_guild_and_agents_do_not_exist_for_the_caller,
    sending_validates_the_message_and_posts_without_pinging_anyone,
    oauth_installs_the_service_bot_into_the_guild_discord_names,
}

async fn connecting_checks_the_token_and_the_guild_before_storing(app: TestApp) {
    app.discord.add_bot(BOT, "AcmeBot");
    app.discord.add_guild(GUILD, "Acme", &[BOT]);
    app.discord.add_guild("222", "Elsewhere", &[]);
    let user = app.register("connect@example.com").await;

    let bad = app
        .post(
            "/api/chat/connect",
            &user,
            json!({"bot_token": "not-a-real-token", "guild_id": GUILD}),
        )
        .await;
    bad.assert_error(400, "invalid_bot_token");
    app.post("/api/chat/connect", &user, json!({"bot_token": BOT, "guild_id": "222"}))
        .await
        .assert_error(400, "guild_not_accessible");
    app.post("/api/chat/connect", &user, json!({"bot_token": BOT, "guild_id": "333"}))
        .await
        .assert_error(400, "guild_not_accessible");
    for (body, field) in [
        (json!({"guild_id": GUILD}), "bot_token"),
        (json!({"bot_token": BOT}), "guild_id"),
        (json!({"bot_token": BOT, "guild_id": "acme"}), "guild_id"),
        (json!({"bot_token": "two words", "guild_id": GUILD}), "bot_token"),
    ] {
        let reply = app.post("/api/chat/connect", &user, body).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"][field].is_string(), "{}", reply.body);
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM chat_connections", &[]).await, 0);

    let reply =
        app.post("/api/chat/connect", &user, json!({"bot_token": BOT, "guild_id": GUILD})).await;
    assert_eq!(
        reply.assert_status(200),
        &json!({"status": "connected", "guild_id": GUILD, "guild_name": "Acme"})
    );
    let named = app
        .post(
            "/api/chat/connect",
            &user,
            json!({"bot_token": BOT, "guild_id": GUILD, "guild_name": "Acme HQ"}),
        )
        .await;
    assert_eq!(named.assert_status(200)["guild_name"], "Acme HQ");

    let list = app.get("/api/chat/connections", &user).await;
    let connections = list.assert_status(200)["connections"].as_array().unwrap().clone();
    assert_eq!(connections.len(), 1, "connecting again replaces, it does not add");
    let connection = &connections[0];
    assert_eq!(connection["guild_id"], GUILD);
    assert_eq!(connection["guild_name"], "Acme HQ");
    assert_eq!(connection["channel_count"], 3, "text and announcement channels only");
    assert_eq!(connection["kind"], "bot_token");
    assert!(
        connection["id"].is_string() && connection["connected_at"].as_str().unwrap().ends_with('Z')
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM chat_connections", &[]).await, 1);

    let calls = app.discord.requests();
    assert!(calls.iter().all(|r| r.path == "/oauth2/token"
        || r.authorization.as_deref().is_some_and(|a| a.starts_with("Bot "))));
}

async fn bot_tokens_are_sealed_at_rest_and_never_returned(app: TestApp) {
    let user = connected(&app, "sealed@example.com").await;
    let stored = app
        .db
        .count(
            "SELECT COUNT(*) FROM chat_connections WHERE bot_token LIKE '%' || $1 || '%'",
            &[BOT],
        )
        .await;
    assert_eq!(stored, 0, "the token column holds ciphertext");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM chat_connections WHERE bot_token LIKE 'v1:%'", &[])
            .await,
        1
    );
    if app.db.backend == crate::helpers::Backend::Sqlite {
        for file in app.db.files() {
            let bytes = std::fs::read(&file).unwrap_or_default();
            assert!(
                !bytes.windows(BOT.len()).any(|w| w == BOT.as_bytes()),
                "{} holds the token",
                file.display()
            );
        }
    }
    for path in [
        "/api/chat/connections",
        "/api/chat/mappings",
        &format!("/api/chat/connections/{GUILD}/channels"),
    ] {
        let reply = app.get(path, &user).await;
        assert!(!reply.body.to_string().contains(BOT), "{path} leaks the token");
    }
    let tested = app.post(&format!("/api/chat/test/{GUILD}"), &user, json!({})).await;
    assert_eq!(tested.assert_status(200), &json!({"status": "ok", "guild_name": "Acme"}));
}

async fn channels_are_the_guilds_text_channels_by_position(app: TestApp) {
    let user = connected(&app, "channels@example.com").await;
    let reply = app.get(&format!("/api/chat/connections/{GUILD}/channels"), &user).await;
    let channels = reply.assert_status(200)["channels"].clone();
    assert_eq!(
        channels,
        json!([
            {"id": UPDATES, "name": "updates", "position": 0},
            {"id": GENERAL, "name": "general", "position": 1},
            {"id": "1115", "name": "news", "position": 4},
        ])
    );
    app.get("/api/chat/connections/999/channels", &user)
        .await
        .assert_error(404, "connection_not_found");
    app.get("/api/chat/connections/not-an-id/channels", &user)
        .await
        .assert_error(404, "connection_not_found");
}

async fn a_revoked_token_fails_the_test_and_is_not_used_again(app: TestApp) {
    let user = connected(&app, "revoked@example.com").await;
    app.discord.revoke(BOT);
    app.post(&format!("/api/chat/test/{GUILD}"), &user, json!({}))
        .await
        .assert_error(400, "invalid_bot_token");
    let before = app.discord.requests().len();
    app.post(&format!("/api/chat/test/{GUILD}"), &user, json!({}))
        .await
        .assert_error(400, "invalid_bot_token");
    assert_eq!(app.discord.requests().len(), before, "a token refused with 401 is not sent again");

    app.discord.add_bot("fresh-token.2", "AcmeBot");
    app.discord.add_guild(GUILD, "Acme", &["fresh-token.2"]);
    app.post("/api/chat/connect", &user, json!({"bot_token": "fresh-token.2", "guild_id": GUILD}))
        .await
        .assert_status(200);
    app.post(&format!("/api/chat/test/{GUILD}"), &user, json!({})).await.assert_status(200);
}

async fn mapping_puts_an_agent_on_one_text_channel_and_remapping_replaces_it(app: TestApp) {
    let user = connected(&app, "map@example.com").await;
    let path = format!("/api/chat/mappings/{GUILD}");
    let reply = app
        .post(
            &path,
            &user,
            json!({"agent_id": "writer", "channel_id": GENERAL, "channel_name": "general"}),
        )
        .await;
    let mapped = reply.assert_status(200).clone();
    assert_eq!(
        (&mapped["status"], &mapped["agent_id"], &mapped["channel_id"]),
        (&json!("mapped"), &json!("writer"), &json!(GENERAL))
    );
    assert_eq!((&mapped["channel_name"], &mapped["guild_id"]), (&json!("general"), &json!(GUILD)));

    let remapped =
        app.post(&path, &user, json!({"agent_id": "writer", "channel_id": UPDATES})).await;
    assert_eq!(remapped.assert_status(200)["channel_name"], "updates");
    let list = app.get("/api/chat/mappings", &user).await;
    let mappings = list.body["mappings"].as_array().unwrap();
    assert_eq!(mappings.len(), 1);
    assert_eq!(mappings[0]["channel_id"], UPDATES);
    for field in ["id", "agent_id", "guild_id", "channel_id", "channel_name", "created_at"] {
        assert!(mappings[0].get(field).is_some(), "{field}");
    }

    for channel in ["1113", "1114", "1116", "2221"] {
        let reply =
            app.post(&path, &user, json!({"agent_id": "writer", "channel_id": channel})).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"]["channel_id"].is_string());
    }
    app.post(&path, &user, json!({"agent_id": "nobody", "channel_id": GENERAL}))
        .await
        .assert_error(404, "agent_not_found");
    app.post("/api/chat/mappings/999", &user, json!({"agent_id": "writer", "channel_id": GENERAL}))
        .await
        .assert_error(404, "connection_not_found");
    app.post(&path, &user, json!({"agent_id": "writer"}))
        .await
        .assert_error(400, "validation_failed");

    let removed = app.delete("/api/chat/mappings/writer", &user).await;
    assert_eq!(removed.assert_status(200), &json!({"status": "unmapped", "agent_id": "writer"}));
    app.delete("/api/chat/mappings/writer", &user).await.assert_error(404, "mapping_not_found");

    app.post(&path, &user, json!({"agent_id": "writer", "channel_id": GENERAL}))
        .await
        .assert_status(200);
    app.delete("/api/agents/writer", &user).await.assert_status(200);
    assert_eq!(
        app.get("/api/chat/mappings", &user).await.body["mappings"],
        json!([]),
        "deleting the agent removes its mapping"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM chat_mappings", &[]).await, 0);
}

async fn disconnecting_removes_the_guilds_mappings(app: TestApp) {
    let user = connected(&app, "disconnect@example.com").await;
    app.post(
        &format!("/api/chat/mappings/{GUILD}"),
        &user,
        json!({"agent_id": "writer", "channel_id": GENERAL}),
    )
    .await
    .assert_status(200);
    let reply = app.delete(&format!("/api/chat/connections/{GUILD}"), &user).await;
    assert_eq!(reply.assert_status(200), &json!({"status": "disconnected", "guild_id": GUILD}));
    assert_eq!(app.get("/api/chat/mappings", &user).await.body["mappings"], json!([]));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM chat_mappings", &[]).await, 0);
    app.delete(&format!("/api/chat/connections/{GUILD}"), &user)
        .await
        .assert_error(404, "connection_not_found");
    app.get("/api/agents/writer", &user).await.assert_status(200);
}

async fn another_users_guild_and_agents_do_not_exist_for_the_caller(app: TestApp) {
    let owner = connected(&app, "owner@example.com").await;
    app.post(
        &format!("/api/chat/mappings/{GUILD}"),
        &owner,
        json!({"agent_id": "writer", "channel_id": GENERAL}),
    )
    .await
    .assert_status(200);
    let intruder = app.register("intruder@example.com").await;
    assert_eq!(app.get("/api/chat/connections", &intruder).await.body["connections"], json!([]));
    assert_eq!(app.get("/api/chat/mappings", &intruder).await.body["mappings"], json!([]));
    app.get(&format!("/api/chat/connections/{GUILD}/channels"), &intruder)
        .await
        .assert_error(404, "connection_not_found");
    app.post(&format!("/api/chat/test/{GUILD}"), &intruder, json!({}))
        .await
        .assert_error(404, "connection_not_found");
    app.delete(&format!("/api/chat/connections/{GUILD}"), &intruder)
        .await
        .assert_error(404, "connection_not_found");
    app.post(
        &format!("/api/chat/send/{GUILD}"),
        &intruder,
        json!({"agent_id": "writer", "content": "hi"}),
    )
    .await
    .assert_error(404, "connection_not_found");
    app.delete("/api/chat/mappings/writer", &intruder).await.assert_error(404, "mapping_not_found");

    // With a connection of their own to the same guild, the owner's agent is still not theirs.
    app.discord.add_bot("intruder-bot.9", "Other");
    app.discord.add_guild(GUILD, "Acme", &[BOT, "intruder-bot.9"]);
    app.post(
        "/api/chat/connect",
        &intruder,
        json!({"bot_token": "intruder-bot.9", "guild_id": GUILD}),
    )
    .await
    .assert_status(200);
    app.post(
        &format!("/api/chat/mappings/{GUILD}"),
        &intruder,
        json!({"agent_id": "writer", "channel_id": GENERAL}),
    )
    .await
    .assert_error(404, "agent_not_found");
    app.post(
        &format!("/api/chat/send/{GUILD}"),
        &intruder,
        json!({"agent_id": "writer", "content": "hi"}),
    )
    .await
    .assert_error(404, "agent_not_found");
    assert_eq!(
        app.get("/api/chat/mappings", &owner).await.body["mappings"].as_array().unwrap().len(),
        1
    );
}

async fn sending_validates_the_message_and_posts_without_pinging_anyone(app: TestApp) {
    let user = connected(&app, "send@example.com").await;
    let path = format!("/api/chat/send/{GUILD}");
    app.post(&path, &user, json!({"agent_id": "writer", "content": "hello"}))
        .await
        .assert_error(409, "agent_not_mapped");
    app.post(
        &format!("/api/chat/mappings/{GUILD}"),
        &user,
        json!({"agent_id": "writer", "channel_id": GENERAL}),
    )
    .await
    .assert_status(200);

    for (body, field) in [
        (json!({"agent_id": "writer", "content": "x".repeat(2001)}), "content"),
        (json!({"agent_id": "writer", "embed_title": "t".repeat(257)}), "embed_title"),
        (json!({"agent_id": "writer", "embed_description": "d".repeat(4097)}), "embed_description"),
        (
            json!({"agent_id": "writer", "embed_title": "t", "embed_color": 16_777_216}),
            "embed_color",
        ),
        (json!({"agent_id": "writer", "embed_title": "t", "embed_color": -1}), "embed_color"),
        (json!({"agent_id": "writer", "embed_title": "t", "embed_color": "red"}), "embed_color"),
        (json!({"agent_id": "writer"}), "content"),
        (json!({"agent_id": "writer", "content": "", "embed_color": 5}), "content"),
        (json!({"content": "hi"}), "agent_id"),
    ] {
        let reply = app.post(&path, &user, body.clone()).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"][field].is_string(), "{body}: {}", reply.body);
    }
    app.post(&path, &user, json!({"agent_id": "ghost", "content": "hi"}))
        .await
        .assert_error(404, "agent_not_found");
    assert!(app.discord.messages().is_empty());

    let body = json!({"agent_id": "writer", "content": "Hello @everyone", "embed_title": "Weekly", "embed_description": "All good.", "embed_color": 3_447_003});
    let reply = app.post(&path, &user, body).await;
    let sent = reply.assert_status(200);
    assert_eq!((&sent["status"], &sent["channel_id"]), (&json!("sent"), &json!(GENERAL)));
    let messages = app.discord.messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(sent["message_id"], messages[0].id.as_str());
    let posted = &messages[0].body;
    assert_eq!(posted["content"], "Hello @everyone");
    assert_eq!(posted["allowed_mentions"], json!({"parse": []}));
    assert_eq!(
        posted["embeds"],
        json!([{"title": "Weekly", "description": "All good.", "color": 3_447_003}])
    );
    let edge = json!({"agent_id": "writer", "content": "x".repeat(2000), "embed_description": "d".repeat(4096)});
    app.post(&path, &user, edge).await.assert_status(200);
    assert_eq!(app.actions(&user, "writer").await[..2], ["message_sent", "message_sent"]);

    app.discord.fail_next(&[Failure::ServerError]);
    app.post(&path, &user, json!({"agent_id": "writer", "content": "again"}))
        .await
        .assert_error(502, "upstream_error");
}

async fn oauth_installs_the_service_bot_into_the_guild_discord_names(app: TestApp) {
    app.discord.add_guild("444", "Installed Guild", &[]);
    let user = app.register("oauth@example.com").await;
    let reply = app.get("/api/chat/oauth-url", &user).await;
    let body = reply.assert_status(200).clone();
    let url = body["url"].as_str().unwrap();
    let state = body["state"].as_str().unwrap();
    assert!(url.contains("/oauth2/authorize?"), "{url}");
    for part in [
        format!("client_id={}", fake_discord::CLIENT_ID),
        "scope=bot".into(),
        "permissions=84992".into(),
        "response_type=code".into(),
        "redirect_uri=https%3A%2F%2Fagents.example%2Fdiscord%2Fcallback".into(),
        format!("state={state}"),
    ] {
        assert!(url.contains(&part), "{url} lacks {part}");
    }

    app.discord.issue_code("code-1", "444");
    let other = app.register("other@example.com").await;
    let others_state =
        app.get("/api/chat/oauth-url", &other).await.body["state"].as_str().unwrap().to_owned();
    app.post(
        "/api/chat/callback",
        &user,
        json!({"code": "code-1", "guild_id": "444", "state": others_state}),
    )
    .await
    .assert_error(400, "validation_failed");
    app.post("/api/chat/callback", &user, json!({"code": "code-1", "state": "forged"}))
        .await
        .assert_error(400, "validation_failed");
    app.post("/api/chat/callback", &user, json!({"code": "wrong", "state": state}))
        .await
        .assert_error(400, "validation_failed");

    let reply = app
        .post(
            "/api/chat/callback",
            &user,
            json!({"code": "code-1", "guild_id": "999", "state": state}),
        )
        .await;
    assert_eq!(
        reply.assert_status(200),
        &json!({"status": "connected", "guild_id": "444", "guild_name": "Installed Guild"})
    );
    let exchange = app.discord.requests().into_iter().rfind(|r| r.path == "/oauth2/token").unwrap();
    assert_eq!(exchange.body["grant_type"], "authorization_code");
    assert_eq!(exchange.body["redirect_uri"], fake_discord::REDIRECT_URI);
    let connections = app.get("/api/chat/connections", &user).await.body["connections"].clone();
    assert_eq!(
        (&connections[0]["guild_id"], &connections[0]["kind"]),
        (&json!("444"), &json!("oauth"))
    );
    // A state serves once, and none is no install: a link carrying someone's code connects
    // nothing for the signed-in user who follows it.
    app.discord.add_guild("555", "Attacker Guild", &[]);
    app.discord.issue_code("code-2", "555");
    let stateless = app.post("/api/chat/callback", &user, json!({"code": "code-2"})).await;
    stateless.assert_error(400, "validation_failed");
    assert!(stateless.body["error"]["details"]["state"].is_string(), "{}", stateless.body);
    let replayed =
        app.post("/api/chat/callback", &user, json!({"code": "code-2", "state": state})).await;
    replayed.assert_error(400, "validation_failed");
    let why = replayed.body["error"]["details"]["state"].as_str().unwrap_or_default();
    assert!(why.contains("already used"), "{why}");
    let connections = app.get("/api/chat/connections", &user).await.body["connections"].clone();
    assert_eq!(connections.as_array().map(Vec::len), Some(1), "{connections}");

    app.create_agent(&user, "helper").await;
    app.post("/api/chat/mappings/444", &user, json!({"agent_id": "helper", "channel_id": "4441"}))
        .await
        .assert_status(200);
    app.post(
        "/api/chat/send/444",
        &user,
        json!({"agent_id": "helper", "content": "via the service bot"}),
    )
    .await
    .assert_status(200);
    let last = app
        .discord
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.method == "POST" && r.path.contains("/messages"))
        .unwrap();
    assert_eq!(
        last.authorization.as_deref(),
        Some(&*format!("Bot {}", fake_discord::SERVICE_BOT_TOKEN))
    );
}

backend_tests! { app_without_discord_app;
    without_the_discord_application_installs_are_not_configured,
}

async fn without_the_discord_application_installs_are_not_configured(app: TestApp) {
    let user = app.register("noapp@example.com").await;
    let reply = app.get("/api/chat/oauth-url", &user).await;
    reply.assert_error(503, "not_configured");
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("discord.client_id"));
    app.post("/api/chat/callback", &user, json!({"code": "x"}))
        .await
        .assert_error(503, "not_configured");
}
