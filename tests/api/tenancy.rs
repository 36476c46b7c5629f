//! One user's token against another user's ids, on every route that takes an id: each attempt
//! is 404 (or 403), and nothing of the first user's changes or leaks.

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, User, backend_tests};

const GUILD_A: &str = "4242";
const GUILD_B: &str = "5353";

/// Everything a user can see of their own, to compare before and after the attempts.
async fn snapshot(app: &TestApp, user: &User) -> Value {
    let mut seen = serde_json::Map::new();
    for path in [
        "/api/agents",
        "/api/agents/alpha",
        "/api/agents/alpha/backlog",
        "/api/agents/alpha/activity?limit=1000",
        "/api/chat/connections",
        "/api/chat/mappings",
        "/api/billing",
    ] {
        seen.insert(path.into(), app.get(path, user).await.assert_status(200).clone());
    }
    Value::Object(seen)
}

backend_tests! { app;

async fn a_second_users_token_reaches_nothing_of_the_first(app) {
    for (bot, guild) in [("bot-a.1", GUILD_A), ("bot-b.1", GUILD_B)] {
        app.discord.add_bot(bot, "Bot");
        app.discord.add_guild(guild, "Guild", &[bot]);
    }
    let a = app.register("a@example.com").await;
    app.create_agent(&a, "alpha").await;
    let task = app.add_task(&a, "alpha", "A's secret plan", 1).await["id"].as_str().unwrap().to_owned();
    app.post("/api/chat/connect", &a, json!({"bot_token": "bot-a.1", "guild_id": GUILD_A})).await.assert_status(200);
    app.post(&format!("/api/chat/mappings/{GUILD_A}"), &a, json!({"agent_id": "alpha", "channel_id": format!("{GUILD_A}1")})).await.assert_status(200);

    let b = app.register("b@example.com").await;
    app.create_agent(&b, "beta").await;
    app.post("/api/chat/connect", &b, json!({"bot_token": "bot-b.1", "guild_id": GUILD_B})).await.assert_status(200);
    let before = snapshot(&app, &a).await;
    let posts_before = app.discord.messages().len();

    let agent = "/api/agents/alpha";
    let a_task = format!("{agent}/backlog/{task}");
    let via_b = format!("/api/agents/beta/backlog/{task}");
    let attempts: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, agent.into(), None),
        (Method::PATCH, agent.into(), Some(json!({"name": "Stolen"}))),
        (Method::DELETE, agent.into(), None),
        (Method::POST, format!("{agent}/start"), None),
        (Method::POST, format!("{agent}/stop"), None),
        (Method::POST, format!("{agent}/vacation"), None),
        (Method::GET, format!("{agent}/activity"), None),
        (Method::GET, format!("{agent}/backlog"), None),
        (Method::POST, format!("{agent}/backlog"), Some(json!({"title": "Planted"}))),
        (Method::GET, a_task.clone(), None),
        (Method::PATCH, a_task.clone(), Some(json!({"title": "Changed"}))),
        (Method::DELETE, a_task.clone(), None),
        (Method::POST, format!("{a_task}/retry"), None),
        // A's task id under B's own agent.
        (Method::GET, via_b.clone(), None),
        (Method::PATCH, via_b.clone(), Some(json!({"title": "Changed"}))),
        (Method::DELETE, via_b.clone(), None),
        (Method::POST, format!("{via_b}/retry"), None),
        (Method::GET, format!("/api/chat/connections/{GUILD_A}/channels"), None),
        (Method::POST, format!("/api/chat/test/{GUILD_A}"), None),
        (Method::DELETE, format!("/api/chat/connections/{GUILD_A}"), None),
        (Method::POST, format!("/api/chat/mappings/{GUILD_A}"), Some(json!({"agent_id": "beta", "channel_id": format!("{GUILD_A}1")}))),
        (Method::POST, format!("/api/chat/mappings/{GUILD_B}"), Some(json!({"agent_id": "alpha", "channel_id": format!("{GUILD_B}1")}))),
        (Method::DELETE, "/api/chat/mappings/alpha".into(), None),
        (Method::POST, format!("/api/chat/send/{GUILD_A}"), Some(json!({"agent_id": "beta", "content": "from B"}))),
        (Method::POST, format!("/api/chat/send/{GUILD_A}"), Some(json!({"agent_id": "alpha", "content": "from B"}))),
        (Method::POST, format!("/api/chat/send/{GUILD_B}"), Some(json!({"agent_id": "alpha", "content": "from B"}))),
    ];
    for (method, path, body) in attempts {
        let reply = app.request(method.clone(), &path, Some(&b.token), body).await;
        let status = reply.status.as_u16();
        assert!(status == 404 || status == 403, "{method} {path} answered {status}: {}", reply.body);
        let text = reply.body.to_string();
        assert!(!text.contains("secret plan") && !text.contains("Agent alpha"), "{method} {path} leaked: {text}");
    }

    // B's own lists show nothing of A's.
    let listed = [app.get("/api/agents", &b).await, app.get("/api/chat/connections", &b).await, app.get("/api/chat/mappings", &b).await];
    for reply in listed {
        let text = reply.assert_status(200).to_string();
        assert!(!text.contains("alpha") && !text.contains(GUILD_A), "{text}");
    }
    assert_eq!(snapshot(&app, &a).await, before, "nothing of A's changed");
    assert_eq!(app.discord.messages().len(), posts_before, "nothing was posted");
}

}
