//! One user's token against another user's ids, on every route of the OpenAPI document that
//! takes an id: each attempt is 404 (or 403), and nothing of the first user's changes or leaks.

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, User, backend_tests};

const GUILD_A: &str = "4242";
const GUILD_B: &str = "5353";
/// A's MCP server (never connected to: B's attempts must not reach it).
const MCP_A: &str = "tools-a";

/// Everything a user can see of their own, to compare before and after the attempts.
async fn snapshot(app: &TestApp, user: &User) -> Value {
    let mut seen = serde_json::Map::new();
    for path in [
        "/api/agents",
        "/api/agents/alpha",
        "/api/agents/alpha/backlog",
        "/api/agents/alpha/activity?limit=1000",
        "/api/agents/alpha/memory",
        "/api/agents/alpha/schedules",
        "/api/triggers",
        "/api/chat/connections",
        "/api/chat/mappings",
        "/api/billing",
        "/api/mcp/servers",
        "/api/workspace/members",
        "/api/workspace/invites",
        "/api/workspace/keys",
        "/api/webhooks",
    ] {
        seen.insert(path.into(), app.get(path, user).await.assert_status(200).clone());
    }
    Value::Object(seen)
}

/// B's attempts on `method template` against A's agent, task and guild: a body that passes
/// validation, so only ownership can refuse it. An operation missing here fails the test.
fn against_a(
    method: &Method,
    template: &str,
    (task, schedule): (&str, &str),
    a: &AccessOfA,
) -> Vec<(String, Option<Value>)> {
    let agent = "/api/agents/alpha";
    let a_schedule = format!("{agent}/schedules/{schedule}");
    let schedule_via_b = format!("/api/agents/beta/schedules/{schedule}");
    let a_task = format!("{agent}/backlog/{task}");
    // A's task id under B's own agent.
    let via_b = format!("/api/agents/beta/backlog/{task}");
    let channel_a = format!("{GUILD_A}1");
    let channel_b = format!("{GUILD_B}1");
    match (method.as_str(), template) {
        ("GET" | "DELETE", "/api/agents/{id}") => vec![(agent.into(), None)],
        ("PATCH", "/api/agents/{id}") => vec![(agent.into(), Some(json!({"name": "Stolen"})))],
        (
            "POST",
            "/api/agents/{id}/start" | "/api/agents/{id}/stop" | "/api/agents/{id}/vacation",
        )
        | ("GET", "/api/agents/{id}/activity" | "/api/agents/{id}/backlog") => {
            vec![(template.replace("{id}", "alpha"), None)]
        }
        ("POST", "/api/agents/{id}/backlog") => {
            vec![(format!("{agent}/backlog"), Some(json!({"title": "Planted"})))]
        }
        ("GET" | "DELETE", "/api/agents/{id}/backlog/{task_id}") => {
            vec![(a_task, None), (via_b, None)]
        }
        ("PATCH", "/api/agents/{id}/backlog/{task_id}") => {
            let body = json!({"title": "Changed"});
            vec![(a_task, Some(body.clone())), (via_b, Some(body))]
        }
        ("POST", "/api/agents/{id}/backlog/{task_id}/retry") => {
            vec![(format!("{a_task}/retry"), None), (format!("{via_b}/retry"), None)]
        }
        ("POST", "/api/agents/{id}/backlog/{task_id}/cancel") => {
            vec![(format!("{a_task}/cancel"), None), (format!("{via_b}/cancel"), None)]
        }
        // Refused before a stream opens; B's own stream never shows A's events
        // (events::streams_are_bounded_per_user_and_show_only_the_users_own_events).
        ("GET", "/api/agents/{id}/events") => {
            vec![
                (format!("{agent}/events"), None),
                (format!("/api/agents/beta/events?task={task}"), None),
            ]
        }
        ("GET", "/api/agents/{id}/backlog/{task_id}/steps") => {
            vec![(format!("{a_task}/steps"), None), (format!("{via_b}/steps"), None)]
        }
        ("GET", "/api/agents/{id}/memory") => vec![(format!("{agent}/memory"), None)],
        ("GET", "/api/agents/{id}/schedules") => vec![(format!("{agent}/schedules"), None)],
        ("POST", "/api/agents/{id}/schedules") => vec![(
            format!("{agent}/schedules"),
            Some(json!({"cron": "0 9 * * *", "title": "Planted"})),
        )],
        ("GET" | "DELETE", "/api/agents/{id}/schedules/{schedule_id}") => {
            vec![(a_schedule, None), (schedule_via_b, None)]
        }
        ("PATCH", "/api/agents/{id}/schedules/{schedule_id}") => {
            let body = json!({"title": "Changed", "enabled": true});
            vec![(a_schedule, Some(body.clone())), (schedule_via_b, Some(body))]
        }
        ("PUT", "/api/agents/{id}/memory") => {
            vec![(format!("{agent}/memory"), Some(json!({"memory": "Planted"})))]
        }
        ("GET", "/api/chat/connections/{guild_id}/channels")
        | ("POST", "/api/chat/test/{guild_id}")
        | ("DELETE", "/api/chat/connections/{guild_id}") => {
            vec![(template.replace("{guild_id}", GUILD_A), None)]
        }
        // B's agent onto A's guild, and A's agent onto B's guild.
        ("POST", "/api/chat/mappings/{id}") => vec![
            (
                format!("/api/chat/mappings/{GUILD_A}"),
                Some(json!({"agent_id": "beta", "channel_id": channel_a})),
            ),
            (
                format!("/api/chat/mappings/{GUILD_B}"),
                Some(json!({"agent_id": "alpha", "channel_id": channel_b})),
            ),
        ],
        ("DELETE", "/api/chat/mappings/{id}") => vec![("/api/chat/mappings/alpha".into(), None)],
        ("POST", "/api/chat/send/{guild_id}") => vec![
            (
                format!("/api/chat/send/{GUILD_A}"),
                Some(json!({"agent_id": "beta", "content": "from B"})),
            ),
            (
                format!("/api/chat/send/{GUILD_A}"),
                Some(json!({"agent_id": "alpha", "content": "from B"})),
            ),
            (
                format!("/api/chat/send/{GUILD_B}"),
                Some(json!({"agent_id": "alpha", "content": "from B"})),
            ),
        ],
        (
            "POST",
            "/api/agents/{id}/backlog/{task_id}/approve"
            | "/api/agents/{id}/backlog/{task_id}/deny",
        ) => {
            let decision = template.rsplit('/').next().unwrap();
            vec![(format!("{a_task}/{decision}"), None), (format!("{via_b}/{decision}"), None)]
        }
        ("PUT", "/api/chat/connections/{guild_id}/roles") => vec![(
            format!("/api/chat/connections/{GUILD_A}/roles"),
            Some(json!({"allowed_role_ids": ["123456789"]})),
        )],
        ("GET" | "DELETE", "/api/triggers/{id}") | ("POST", "/api/triggers/{id}/rotate") => {
            vec![(template.replace("{id}", &a.trigger), None)]
        }
        ("PATCH", "/api/triggers/{id}") => vec![(
            format!("/api/triggers/{}", a.trigger),
            Some(json!({"title": "Stolen", "enabled": true})),
        )],
        // Signed with the trigger's secret, not a user's token (see triggers::calls).
        ("POST", "/hooks/{trigger_id}") => Vec::new(),
        // Signed by Discord, not by a user's token: a token reaches nothing there (see
        // interactions::a_ping_is_answered...).
        ("POST", "/api/chat/interactions/{connection_id}") => Vec::new(),
        ("DELETE", "/api/mcp/servers/{name}") => vec![(format!("/api/mcp/servers/{MCP_A}"), None)],
        ("POST", "/api/mcp/servers/{name}/test") => {
            vec![(format!("/api/mcp/servers/{MCP_A}/test"), None)]
        }
        // A in B's workspace, and A's invite and key from B's.
        ("PATCH", "/api/workspace/members/{user_id}") => {
            vec![(format!("/api/workspace/members/{}", a.user), Some(json!({"role": "viewer"})))]
        }
        ("DELETE", "/api/workspace/members/{user_id}") => {
            vec![(format!("/api/workspace/members/{}", a.user), None)]
        }
        ("DELETE", "/api/workspace/invites/{id}") => {
            vec![(format!("/api/workspace/invites/{}", a.invite), None)]
        }
        ("DELETE", "/api/workspace/keys/{id}") => {
            vec![(format!("/api/workspace/keys/{}", a.key), None)]
        }
        // A's endpoint, and A's delivery under A's endpoint and under B's.
        ("GET" | "DELETE", "/api/webhooks/{id}")
        | ("POST", "/api/webhooks/{id}/rotate" | "/api/webhooks/{id}/test")
        | ("GET", "/api/webhooks/{id}/deliveries") => {
            vec![(template.replace("{id}", &a.webhook), None)]
        }
        ("PATCH", "/api/webhooks/{id}") => vec![(
            format!("/api/webhooks/{}", a.webhook),
            Some(json!({"url": "https://93.184.215.14/stolen", "enabled": true})),
        )],
        ("POST", "/api/webhooks/{id}/deliveries/{delivery_id}/redeliver") => vec![
            (format!("/api/webhooks/{}/deliveries/{}/redeliver", a.webhook, a.delivery), None),
            (format!("/api/webhooks/{}/deliveries/{}/redeliver", a.b_webhook, a.delivery), None),
        ],
        // An invite's token is its access: B holds none of A's (an id is not a token).
        ("POST", "/api/invites/{token}/accept") => {
            vec![(format!("/api/invites/{}/accept", a.invite), None)]
        }
        _ => panic!("{method} {template} takes an id: add B's attempts on A's to the tenancy test"),
    }
}

/// A's invite and key, and A, for B's attempts.
struct AccessOfA {
    user: String,
    trigger: String,
    invite: String,
    key: String,
    /// A's webhook endpoint and a delivery of it; B's own endpoint.
    webhook: String,
    delivery: String,
    b_webhook: String,
}

backend_tests! { app;
    a_second_users_token_reaches_nothing_of_the_first,
}

async fn a_second_users_token_reaches_nothing_of_the_first(app: TestApp) {
    for (bot, guild) in [("bot-a.1", GUILD_A), ("bot-b.1", GUILD_B)] {
        app.discord.add_bot(bot, "Bot");
        app.discord.add_guild(guild, "Guild", &[bot]);
    }
    let a = app.register("a@example.com").await;
    app.create_agent(&a, "alpha").await;
    let task =
        app.add_task(&a, "alpha", "A's secret plan", 1).await["id"].as_str().unwrap().to_owned();
    app.post("/api/chat/connect", &a, json!({"bot_token": "bot-a.1", "guild_id": GUILD_A}))
        .await
        .assert_status(200);
    app.post(
        &format!("/api/chat/mappings/{GUILD_A}"),
        &a,
        json!({"agent_id": "alpha", "channel_id": format!("{GUILD_A}1")}),
    )
    .await
    .assert_status(200);

    let schedule =
        json!({"cron": "0 9 * * *", "title": "A's secret plan, daily", "enabled": false});
    let schedule = app.post("/api/agents/alpha/schedules", &a, schedule).await;
    let schedule = schedule.assert_status(201)["id"].as_str().unwrap().to_owned();

    let server = json!({"name": MCP_A, "url": "https://93.184.215.14/mcp", "token": "a-secret"});
    app.post("/api/mcp/servers", &a, server).await.assert_status(201);

    let trigger = json!({"agent": "alpha", "title": "A's secret plan: {{what}}", "enabled": false});
    let trigger = app.post("/api/triggers", &a, trigger).await;
    let trigger = trigger.assert_status(201)["id"].as_str().unwrap().to_owned();

    let invite = app.post("/api/workspace/invites", &a, json!({"role": "member"})).await;
    let key = app.post("/api/workspace/keys", &a, json!({"name": "ci", "role": "member"})).await;
    // Disabled at once: its test delivery waits, and nothing is sent anywhere.
    let hook = json!({"url": "https://93.184.215.14/hooks", "events": ["task.completed"]});
    let webhook = app.post("/api/webhooks", &a, hook.clone()).await;
    let webhook = webhook.assert_status(201)["id"].as_str().unwrap().to_owned();
    app.patch(&format!("/api/webhooks/{webhook}"), &a, json!({"enabled": false}))
        .await
        .assert_status(200);
    let delivery = app.post_empty(&format!("/api/webhooks/{webhook}/test"), &a).await;
    let delivery = delivery.assert_status(202)["id"].as_str().unwrap().to_owned();

    let b = app.register("b@example.com").await;
    app.create_agent(&b, "beta").await;
    let b_webhook = app.post("/api/webhooks", &b, hook).await;
    let b_webhook = b_webhook.assert_status(201)["id"].as_str().unwrap().to_owned();
    app.patch(&format!("/api/webhooks/{b_webhook}"), &b, json!({"enabled": false}))
        .await
        .assert_status(200);
    let access = AccessOfA {
        user: a.id.clone(),
        trigger,
        invite: invite.assert_status(201)["id"].as_str().unwrap().to_owned(),
        key: key.assert_status(201)["id"].as_str().unwrap().to_owned(),
        webhook,
        delivery,
        b_webhook,
    };
    app.post("/api/chat/connect", &b, json!({"bot_token": "bot-b.1", "guild_id": GUILD_B}))
        .await
        .assert_status(200);
    let before = snapshot(&app, &a).await;
    let posts_before = app.discord.messages().len();

    // Every operation of the document that names something by id, aimed at A's things.
    let mut attempts = Vec::new();
    for (method, template, _) in crate::openapi::operations(&crate::openapi::document(&app).await) {
        if template.contains('{') {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            attempts.extend(
                against_a(&method, &template, (&task, &schedule), &access)
                    .into_iter()
                    .map(|(path, body)| (method.clone(), path, body)),
            );
        }
    }
    // A trigger on A's agent, from B's workspace.
    let planted = json!({"agent": "alpha", "title": "Planted"});
    attempts.push((Method::POST, "/api/triggers".to_owned(), Some(planted)));
    for (method, path, body) in attempts {
        let reply = app.request(method.clone(), &path, Some(&b.token), body).await;
        let status = reply.status.as_u16();
        assert!(
            status == 404 || status == 403,
            "{method} {path} answered {status}: {}",
            reply.body
        );
        let text = reply.body.to_string();
        assert!(
            !text.contains("secret plan") && !text.contains("Agent alpha"),
            "{method} {path} leaked: {text}"
        );
    }

    // B's own lists show nothing of A's.
    let listed = [
        app.get("/api/agents", &b).await,
        app.get("/api/chat/connections", &b).await,
        app.get("/api/chat/mappings", &b).await,
        app.get("/api/triggers", &b).await,
    ];
    for reply in listed {
        let text = reply.assert_status(200).to_string();
        assert!(!text.contains("alpha") && !text.contains(GUILD_A), "{text}");
    }
    assert_eq!(snapshot(&app, &a).await, before, "nothing of A's changed");
    assert_eq!(app.discord.messages().len(), posts_before, "nothing was posted");
}
