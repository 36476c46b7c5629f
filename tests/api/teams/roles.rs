//! A viewer reads everything and changes nothing: every changing operation of the OpenAPI
//! document, sent by a viewer with a body that passes validation, is `forbidden`, and the
//! workspace is as it was. (A trigger's call is signed by its secret, not the workspace's to
//! refuse by role.)

use reqwest::Method;
use serde_json::{Value, json};

use super::{in_ws, join, team};
use crate::helpers::{TestApp, backend_tests};

const GUILD: &str = "4242";

backend_tests! { app;
    a_viewer_reads_and_is_refused_every_change,
}

/// What a viewer of Ops attempts for `method template`, with valid bodies; `None` for the
/// operations that are not the workspace's to refuse (a person's own account, joining, a new
/// workspace of their own, and what Stripe and Discord sign). An operation missing here fails.
fn attempt(method: &str, template: &str, ids: &Ids) -> Option<(String, Option<Value>)> {
    let task = format!("/api/agents/alpha/backlog/{}", ids.task);
    let schedule = format!("/api/agents/alpha/schedules/{}", ids.schedule);
    let trigger = format!("/api/triggers/{}", ids.trigger);
    let body = |value: Value| Some(value);
    Some(match (method, template) {
        ("POST", "/auth/login" | "/auth/register" | "/auth/logout")
        | ("POST", "/api/workspaces" | "/api/invites/{token}/accept")
        | ("POST", "/api/billing/webhook" | "/api/chat/interactions")
        | ("POST", "/api/chat/interactions/{connection_id}")
        | ("POST", "/hooks/{trigger_id}") => return None,
        ("POST", "/api/agents") => (
            "/api/agents".into(),
            body(json!({"id": "planted", "name": "P", "role_prompt": "Plant.", "channel": "c"})),
        ),
        ("PATCH", "/api/agents/{id}") => {
            ("/api/agents/alpha".into(), body(json!({"name": "Changed"})))
        }
        ("DELETE", "/api/agents/{id}") => ("/api/agents/alpha".into(), None),
        (
            "POST",
            "/api/agents/{id}/start" | "/api/agents/{id}/stop" | "/api/agents/{id}/vacation",
        ) => (template.replace("{id}", "alpha"), None),
        ("POST", "/api/agents/{id}/backlog") => {
            ("/api/agents/alpha/backlog".into(), body(json!({"title": "Planted"})))
        }
        ("PATCH", "/api/agents/{id}/backlog/{task_id}") => {
            (task, body(json!({"title": "Changed"})))
        }
        ("DELETE", "/api/agents/{id}/backlog/{task_id}") => (task, None),
        ("POST", t) if t.starts_with("/api/agents/{id}/backlog/{task_id}/") => {
            (format!("{task}/{}", t.rsplit('/').next().unwrap()), None)
        }
        ("PUT", "/api/agents/{id}/memory") => {
            ("/api/agents/alpha/memory".into(), body(json!({"memory": "Planted"})))
        }
        ("POST", "/api/agents/{id}/schedules") => (
            "/api/agents/alpha/schedules".into(),
            body(json!({"cron": "0 9 * * *", "title": "Planted"})),
        ),
        ("PATCH", "/api/agents/{id}/schedules/{schedule_id}") => {
            (schedule, body(json!({"title": "Changed", "enabled": true})))
        }
        ("DELETE", "/api/agents/{id}/schedules/{schedule_id}") => (schedule, None),
        ("POST", "/api/triggers") => {
            ("/api/triggers".into(), body(json!({"agent": "alpha", "title": "Planted {{x}}"})))
        }
        ("PATCH", "/api/triggers/{id}") => {
            (trigger, body(json!({"title": "Changed", "enabled": true})))
        }
        ("DELETE", "/api/triggers/{id}") => (trigger, None),
        ("POST", "/api/triggers/{id}/rotate") => (format!("{trigger}/rotate"), None),
        ("PUT", "/api/budget") => ("/api/budget".into(), body(json!({"monthly_usd": 1.0}))),
        ("POST", "/api/chat/callback") => {
            ("/api/chat/callback".into(), body(json!({"code": "c", "state": "s"})))
        }
        ("POST", "/api/chat/connect") => {
            ("/api/chat/connect".into(), body(json!({"bot_token": "bot-v.1", "guild_id": "5353"})))
        }
        ("DELETE", "/api/chat/connections/{guild_id}") | ("POST", "/api/chat/test/{guild_id}") => {
            (template.replace("{guild_id}", GUILD), None)
        }
        ("PUT", "/api/chat/connections/{guild_id}/roles") => (
            format!("/api/chat/connections/{GUILD}/roles"),
            body(json!({"allowed_role_ids": ["123456789"]})),
        ),
        ("POST", "/api/chat/mappings/{id}") => (
            format!("/api/chat/mappings/{GUILD}"),
            body(json!({"agent_id": "alpha", "channel_id": "42422"})),
        ),
        ("DELETE", "/api/chat/mappings/{id}") => ("/api/chat/mappings/alpha".into(), None),
        ("POST", "/api/chat/send/{guild_id}") => (
            format!("/api/chat/send/{GUILD}"),
            body(json!({"agent_id": "alpha", "content": "Planted"})),
        ),
        ("POST", "/api/mcp/servers") => (
            "/api/mcp/servers".into(),
            body(json!({"name": "planted", "url": "https://93.184.215.14/mcp"})),
        ),
        ("DELETE", "/api/mcp/servers/{name}") | ("POST", "/api/mcp/servers/{name}/test") => {
            (template.replace("{name}", "tools"), None)
        }
        ("POST", "/api/onboarding/setup") => (
            "/api/onboarding/setup".into(),
            body(json!({"company_name": "Planted", "role_template": "marketing"})),
        ),
        ("PATCH", "/api/workspace") => ("/api/workspace".into(), body(json!({"name": "Planted"}))),
        ("POST", "/api/webhooks") => (
            "/api/webhooks".into(),
            body(json!({"url": "https://93.184.215.14/hooks", "events": ["task.completed"]})),
        ),
        ("PATCH", "/api/webhooks/{id}") => {
            (format!("/api/webhooks/{}", ids.webhook), body(json!({"enabled": false})))
        }
        ("DELETE", "/api/webhooks/{id}")
        | ("POST", "/api/webhooks/{id}/rotate" | "/api/webhooks/{id}/test") => {
            (template.replace("{id}", &ids.webhook), None)
        }
        ("POST", "/api/webhooks/{id}/deliveries/{delivery_id}/redeliver") => {
            (template.replace("{id}", &ids.webhook).replace("{delivery_id}", &ids.webhook), None)
        }
        ("POST", "/api/workspace/invites") => {
            ("/api/workspace/invites".into(), body(json!({"role": "viewer"})))
        }
        ("DELETE", "/api/workspace/invites/{id}") => {
            (format!("/api/workspace/invites/{}", ids.invite), None)
        }
        ("POST", "/api/workspace/keys") => {
            ("/api/workspace/keys".into(), body(json!({"name": "k", "role": "viewer"})))
        }
        ("DELETE", "/api/workspace/keys/{id}") => {
            (format!("/api/workspace/keys/{}", ids.key), None)
        }
        ("PATCH", "/api/workspace/members/{user_id}") => {
            (format!("/api/workspace/members/{}", ids.owner), body(json!({"role": "viewer"})))
        }
        ("DELETE", "/api/workspace/members/{user_id}") => {
            (format!("/api/workspace/members/{}", ids.owner), None)
        }
        _ => panic!(
            "{method} {template} changes something: add a viewer's attempt to the roles test"
        ),
    })
}

struct Ids {
    task: String,
    schedule: String,
    trigger: String,
    invite: String,
    key: String,
    owner: String,
    webhook: String,
}

/// What the viewer may read, to compare before and after.
async fn snapshot(app: &TestApp, ops: &str, user: &crate::helpers::User) -> Value {
    let mut seen = serde_json::Map::new();
    for path in [
        "/api/workspace",
        "/api/workspace/members",
        "/api/agents",
        "/api/agents/alpha",
        "/api/agents/alpha/backlog",
        "/api/agents/alpha/memory",
        "/api/agents/alpha/schedules",
        "/api/triggers",
        "/api/chat/connections",
        "/api/chat/mappings",
        "/api/mcp/servers",
        "/api/webhooks",
        "/api/budget",
        "/api/billing",
    ] {
        let reply = in_ws(app, ops, user, Method::GET, path, None).await;
        seen.insert(path.into(), reply.assert_status(200).clone());
    }
    Value::Object(seen)
}

async fn a_viewer_reads_and_is_refused_every_change(app: TestApp) {
    app.discord.add_bot("bot-a.1", "Bot");
    app.discord.add_guild(GUILD, "Guild", &["bot-a.1"]);
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    let agent = json!({"id": "alpha", "name": "Alpha", "role_prompt": "Help.", "channel": "ops"});
    in_ws(&app, &ops, &ada, Method::POST, "/api/agents", Some(agent)).await.assert_status(201);
    let task = in_ws(
        &app,
        &ops,
        &ada,
        Method::POST,
        "/api/agents/alpha/backlog",
        Some(json!({"title": "Plan"})),
    )
    .await;
    let task = task.assert_status(201)["id"].as_str().unwrap().to_owned();
    let schedule = json!({"cron": "0 9 * * *", "title": "Daily", "enabled": false});
    let schedule =
        in_ws(&app, &ops, &ada, Method::POST, "/api/agents/alpha/schedules", Some(schedule)).await;
    let schedule = schedule.assert_status(201)["id"].as_str().unwrap().to_owned();
    let trigger = json!({"agent": "alpha", "title": "Alert {{name}}", "enabled": false});
    let trigger = in_ws(&app, &ops, &ada, Method::POST, "/api/triggers", Some(trigger)).await;
    let trigger = trigger.assert_status(201)["id"].as_str().unwrap().to_owned();
    let connect = json!({"bot_token": "bot-a.1", "guild_id": GUILD});
    in_ws(&app, &ops, &ada, Method::POST, "/api/chat/connect", Some(connect))
        .await
        .assert_status(200);
    let map = json!({"agent_id": "alpha", "channel_id": format!("{GUILD}1")});
    in_ws(&app, &ops, &ada, Method::POST, &format!("/api/chat/mappings/{GUILD}"), Some(map))
        .await
        .assert_status(200);
    let server = json!({"name": "tools", "url": "https://93.184.215.14/mcp"});
    in_ws(&app, &ops, &ada, Method::POST, "/api/mcp/servers", Some(server))
        .await
        .assert_status(201);
    let invite = in_ws(
        &app,
        &ops,
        &ada,
        Method::POST,
        "/api/workspace/invites",
        Some(json!({"role": "member"})),
    )
    .await;
    let invite = invite.assert_status(201)["id"].as_str().unwrap().to_owned();
    let key = in_ws(
        &app,
        &ops,
        &ada,
        Method::POST,
        "/api/workspace/keys",
        Some(json!({"name": "ci", "role": "member"})),
    )
    .await;
    let key = key.assert_status(201)["id"].as_str().unwrap().to_owned();
    // Asks for an event this test never makes: nothing is sent.
    let hook = json!({"url": "https://93.184.215.14/hooks", "events": ["schedule.missed"]});
    let webhook = in_ws(&app, &ops, &ada, Method::POST, "/api/webhooks", Some(hook)).await;
    let webhook = webhook.assert_status(201)["id"].as_str().unwrap().to_owned();
    let ids = Ids { task, schedule, trigger, invite, key, owner: ada.id.clone(), webhook };

    let viewer = app.register("viewer@example.com").await;
    join(&app, &ops, &ada, &viewer, "viewer").await;
    let before = snapshot(&app, &ops, &viewer).await;
    let posts = app.discord.messages().len();

    let document = crate::openapi::document(&app).await;
    let mut tried = 0;
    for (method, template, _) in crate::openapi::operations(&document) {
        if method == "GET" {
            continue;
        }
        let Some((path, body)) = attempt(&method, &template, &ids) else { continue };
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let reply = in_ws(&app, &ops, &viewer, method.clone(), &path, body).await;
        assert_eq!(reply.status.as_u16(), 403, "{method} {path}: {}", reply.body);
        assert_eq!(reply.body["error"]["code"], "forbidden", "{method} {path}");
        tried += 1;
    }
    assert!(tried >= 35, "only {tried} changing operations were tried");
    // Reading the OAuth link hands out an install for the workspace: an admin's.
    in_ws(&app, &ops, &viewer, Method::GET, "/api/chat/oauth-url", None)
        .await
        .assert_error(403, "forbidden");
    assert_eq!(snapshot(&app, &ops, &viewer).await, before, "nothing changed");
    assert_eq!(app.discord.messages().len(), posts, "nothing was posted");
}
