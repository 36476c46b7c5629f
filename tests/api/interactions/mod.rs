//! Discord HTTP interactions against the fake Discord, which signs them with a test key pair
//! and records command registrations, follow-ups and edits: signatures, slash commands, who
//! may run them, deferral; tool approvals (`approvals.rs`); and a task's Cancel button
//! (`cancel.rs`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_discord::{
    self, Member, SignedInteraction, autocomplete, option, public_key_hex, slash, subcommand,
};
use crate::helpers::{TestApp, TestDb, User, app_with, backend_tests, eventually};

pub(crate) mod approvals;
pub(crate) mod cancel;

const BOT: &str = "interactions-bot.1";
const APP_ID: &str = "910000000000000001";
const SEED: [u8; 32] = [42; 32];
pub(crate) const GUILD: &str = "555";
const CHANNEL: &str = "5551";
const WAIT: Duration = Duration::from_secs(20);

/// A user whose own bot (application APP_ID, key SEED) is connected to GUILD, with agent `id`
/// on `model` mapped to CHANNEL; returns the user and the connection's interactions path.
async fn connected(app: &TestApp, email: &str, id: &str, model: &str) -> (User, String) {
    let user = app.register(email).await;
    let path = connect(app, &user, id, model).await;
    (user, path)
}

/// [`connected`] for an existing user; the connection's interactions path.
pub(crate) async fn connect(app: &TestApp, user: &User, id: &str, model: &str) -> String {
    let user = user.clone();
    app.discord.add_bot(BOT, "OpsBot");
    app.discord.add_application(BOT, APP_ID, SEED);
    app.discord.add_guild(GUILD, "Ops", &[BOT]);
    app.post("/api/chat/connect", &user, json!({"bot_token": BOT, "guild_id": GUILD}))
        .await
        .assert_status(200);
    let agent = json!({"id": id, "name": "Ops", "role_prompt": "You run operations.",
        "channel": "general", "model": model});
    app.post("/api/agents", &user, agent).await.assert_status(201);
    let mapping = json!({"agent_id": id, "channel_id": CHANNEL});
    app.post(&format!("/api/chat/mappings/{GUILD}"), &user, mapping).await.assert_status(200);
    path_of(app, &user).await
}

/// The interactions path of the user's (first) connection.
async fn path_of(app: &TestApp, user: &User) -> String {
    let connections = app.get("/api/chat/connections", user).await;
    let connection = connections.assert_status(200)["connections"][0]["id"].clone();
    format!("/api/chat/interactions/{}", connection.as_str().unwrap())
}

/// Sends a signed interaction; the status and the JSON answer.
async fn send(app: &TestApp, path: &str, signed: &SignedInteraction) -> (u16, Value) {
    let response = signed.post(&format!("{}{path}", app.address)).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A command in the guild's channel by `member`, answered.
async fn command(app: &TestApp, path: &str, member: &Member, payload: Value) -> Value {
    let signed = app.discord.interaction(APP_ID, GUILD, CHANNEL, member, payload);
    let (status, answer) = send(app, path, &signed).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

fn task_add(agent: &str, title: &str) -> Value {
    subcommand("task", "add", json!([option("agent", json!(agent)), option("title", json!(title))]))
}

async fn backlog(app: &TestApp, user: &User, agent: &str) -> Vec<Value> {
    let reply = app.get(&format!("/api/agents/{agent}/backlog"), user).await;
    reply.assert_status(200)["tasks"].as_array().unwrap().clone()
}

backend_tests! { app;
    a_ping_is_answered_and_a_bad_signature_changed_byte_or_old_timestamp_is_refused,
    connecting_registers_the_commands_and_disconnecting_removes_them,
    task_add_creates_the_task_once_when_discord_delivers_it_twice,
    a_member_without_manage_server_is_refused_until_their_role_is_allowed,
    agents_lists_the_servers_agents_and_autocomplete_offers_them,
    agent_start_and_stop_change_the_agent,
    the_services_endpoint_answers_for_servers_installed_through_oauth,
}

backend_tests! { db;
    ask_with_a_slow_model_is_deferred_then_finished_by_the_follow_up,
}

async fn a_ping_is_answered_and_a_bad_signature_changed_byte_or_old_timestamp_is_refused(
    app: TestApp,
) {
    let (_, path) = connected(&app, "ping@example.com", "ops", "echo").await;
    let ping = app.discord.ping(APP_ID);
    assert_eq!(send(&app, &path, &ping).await, (200, json!({"type": 1})));
    let service = app.discord.ping(fake_discord::CLIENT_ID);
    assert_eq!(send(&app, "/api/chat/interactions", &service).await, (200, json!({"type": 1})));

    // Signed by another key: the service's application, not the connection's bot.
    let (status, answer) = send(&app, &path, &service).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (401, Some("invalid_interaction_signature"))
    );
    let mut changed = app.discord.ping(APP_ID);
    changed.body = changed.body.replacen("\"type\":1", "\"type\":2", 1);
    assert_ne!(changed.body, ping.body, "the byte was changed");
    assert_eq!(send(&app, &path, &changed).await.0, 401);
    let old = (chrono::Utc::now().timestamp() - 301).to_string();
    let member = Member::manager("ana");
    let stale = app.discord.interaction_with(
        APP_ID,
        "1300",
        &old,
        GUILD,
        CHANNEL,
        &member,
        task_add("ops", "Old"),
    );
    assert_eq!(send(&app, &path, &stale).await.0, 401);
    let mut unsigned = app.discord.ping(APP_ID);
    unsigned.signature = String::new();
    assert_eq!(send(&app, &path, &unsigned).await.0, 401);
    assert_eq!(send(&app, "/api/chat/interactions/no-such-connection", &ping).await.0, 401);
    assert_eq!(send(&app, &path, &stale).await.0, 401);
}

async fn connecting_registers_the_commands_and_disconnecting_removes_them(app: TestApp) {
    let (user, _) = connected(&app, "register@example.com", "ops", "echo").await;
    let commands = app.discord.guild_commands(APP_ID, GUILD).expect("commands registered");
    let names: Vec<&str> = commands.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["agents", "task", "agent", "ask"]);
    let connection = &app.get("/api/chat/connections", &user).await.body["connections"][0];
    assert_eq!(connection["application_id"], APP_ID);
    assert_eq!(connection["public_key"], public_key_hex(&SEED), "read from the application");
    assert_eq!(connection["allowed_role_ids"], json!([]));

    app.delete(&format!("/api/chat/connections/{GUILD}"), &user).await.assert_status(200);
    assert_eq!(app.discord.guild_commands(APP_ID, GUILD), Some(Vec::new()), "removed");
}

async fn task_add_creates_the_task_once_when_discord_delivers_it_twice(app: TestApp) {
    let (user, path) = connected(&app, "twice@example.com", "ops", "echo").await;
    let member = Member::manager("ana");
    let now = chrono::Utc::now().timestamp().to_string();
    let payload = subcommand(
        "task",
        "add",
        json!([
            option("agent", json!("ops")),
            option("title", json!("Rotate the keys")),
            option("description", json!("Both regions.")),
            option("priority", json!(3))
        ]),
    );
    let first =
        app.discord.interaction_with(APP_ID, "1301", &now, GUILD, CHANNEL, &member, payload);
    let (status, answer) = send(&app, &path, &first).await;
    assert_eq!(status, 200);
    assert_eq!(answer["type"], 4, "{answer}");
    let content = answer["data"]["content"].as_str().unwrap();
    assert!(content.contains("Rotate the keys") && content.contains("ops"), "{content}");
    let (_, again) = send(&app, &path, &first).await;
    assert!(again["data"]["content"].as_str().unwrap().contains("handled already"), "{again}");

    let tasks = backlog(&app, &user, "ops").await;
    assert_eq!(tasks.len(), 1, "one task for two deliveries");
    assert_eq!(
        (&tasks[0]["title"], &tasks[0]["description"], &tasks[0]["priority"]),
        (&json!("Rotate the keys"), &json!("Both regions."), &json!(3))
    );
    let activity = app.get("/api/agents/ops/activity", &user).await;
    let used: Vec<&str> = activity.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "command_used")
        .map(|e| e["details"].as_str().unwrap())
        .collect();
    assert_eq!(used, ["/task add by ana in Discord."]);

    let bad = command(&app, &path, &member, task_add("nobody", "Lost")).await;
    assert!(bad["data"]["content"].as_str().unwrap().contains("nobody"), "{bad}");
    assert_eq!(backlog(&app, &user, "ops").await.len(), 1);
}

async fn a_member_without_manage_server_is_refused_until_their_role_is_allowed(app: TestApp) {
    let (user, path) = connected(&app, "roles@example.com", "ops", "echo").await;
    let member = Member::plain("bo", &["777000000000000001"]);
    let refused = command(&app, &path, &member, task_add("ops", "Not allowed")).await;
    assert_eq!((refused["type"].as_i64(), refused["data"]["flags"].as_i64()), (Some(4), Some(64)));
    assert!(refused["data"]["content"].as_str().unwrap().contains("Manage Server"), "{refused}");
    assert!(backlog(&app, &user, "ops").await.is_empty());
    let listed = command(&app, &path, &member, slash("agents", json!([]))).await;
    assert!(listed["data"]["content"].as_str().unwrap().contains("**ops**"), "reading is open");

    let roles = json!({"allowed_role_ids": ["777000000000000001"]});
    let connection = app.put(&format!("/api/chat/connections/{GUILD}/roles"), &user, roles).await;
    assert_eq!(connection.assert_status(200)["allowed_role_ids"], json!(["777000000000000001"]));
    app.put(
        &format!("/api/chat/connections/{GUILD}/roles"),
        &user,
        json!({"allowed_role_ids": ["x"]}),
    )
    .await
    .assert_error(400, "validation_failed");
    let allowed = command(&app, &path, &member, task_add("ops", "Allowed now")).await;
    assert!(allowed["data"]["content"].as_str().unwrap().contains("Allowed now"), "{allowed}");
    assert_eq!(backlog(&app, &user, "ops").await.len(), 1);
}

async fn agents_lists_the_servers_agents_and_autocomplete_offers_them(app: TestApp) {
    let (user, path) = connected(&app, "list@example.com", "ops", "echo").await;
    app.create_agent(&user, "unmapped").await;
    app.add_task(&user, "ops", "Queued one", 0).await;
    let member = Member::plain("cy", &[]);
    let listed = command(&app, &path, &member, slash("agents", json!([]))).await;
    let content = listed["data"]["content"].as_str().unwrap();
    assert!(content.contains("**ops** (Ops): idle, 1 queued"), "{content}");
    assert!(!content.contains("unmapped"), "only the server's agents: {content}");

    let typing =
        command(&app, &path, &member, autocomplete("task", Some("add"), "agent", "o")).await;
    assert_eq!(typing["type"], 8);
    assert_eq!(typing["data"]["choices"], json!([{"name": "ops (idle)", "value": "ops"}]));
    let none = command(&app, &path, &member, autocomplete("ask", None, "agent", "zz")).await;
    assert_eq!(none["data"]["choices"], json!([]));
}

async fn agent_start_and_stop_change_the_agent(app: TestApp) {
    let (user, path) = connected(&app, "start@example.com", "ops", "echo").await;
    let member = Member::manager("di");
    let on_agent = |sub: &str| subcommand("agent", sub, json!([option("agent", json!("ops"))]));
    let started = command(&app, &path, &member, on_agent("start")).await;
    assert!(started["data"]["content"].as_str().unwrap().contains("ops is active"), "{started}");
    assert_eq!(app.get("/api/agents/ops", &user).await.body["status"], "active");
    command(&app, &path, &member, on_agent("vacation")).await;
    assert_eq!(app.get("/api/agents/ops", &user).await.body["status"], "vacation");
    command(&app, &path, &member, on_agent("stop")).await;
    assert_eq!(app.get("/api/agents/ops", &user).await.body["status"], "idle");
}

async fn the_services_endpoint_answers_for_servers_installed_through_oauth(app: TestApp) {
    app.discord.add_guild("666", "Installed", &[]);
    let user = app.register("oauth-commands@example.com").await;
    let state = app.get("/api/chat/oauth-url", &user).await.body["state"].clone();
    app.discord.issue_code("code-7", "666");
    app.post("/api/chat/callback", &user, json!({"code": "code-7", "state": state}))
        .await
        .assert_status(200);
    let registered = app.discord.guild_commands(fake_discord::CLIENT_ID, "666");
    assert_eq!(registered.map(|c| c.len()), Some(4), "the service's application's commands");
    app.create_agent(&user, "helper").await;
    let mapping = json!({"agent_id": "helper", "channel_id": "6661"});
    app.post("/api/chat/mappings/666", &user, mapping).await.assert_status(200);

    let member = Member::manager("eve");
    let signed = app.discord.interaction(
        fake_discord::CLIENT_ID,
        "666",
        "6661",
        &member,
        task_add("helper", "From the shared endpoint"),
    );
    let (status, answer) = send(&app, "/api/chat/interactions", &signed).await;
    assert_eq!(status, 200);
    assert!(answer["data"]["content"].as_str().unwrap().contains("helper"), "{answer}");
    assert_eq!(backlog(&app, &user, "helper").await.len(), 1);
    let elsewhere = app.discord.interaction(
        fake_discord::CLIENT_ID,
        "999",
        "9991",
        &member,
        task_add("helper", "Unknown server"),
    );
    let (_, answer) = send(&app, "/api/chat/interactions", &elsewhere).await;
    assert!(answer["data"]["content"].as_str().unwrap().contains("not connected"), "{answer}");
}

async fn ask_with_a_slow_model_is_deferred_then_finished_by_the_follow_up(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let (user, path) = connected(&app, "ask@example.com", "ops", "openai:slow").await;
    app.options.models.set_latency_for("slow", Duration::from_millis(3500));
    app.post_empty("/api/agents/ops/start", &user).await.assert_status(200);
    let member = Member::plain("fay", &[]);
    let ask =
        slash("ask", json!([option("agent", json!("ops")), option("prompt", json!("Status?"))]));
    let signed = app.discord.interaction(APP_ID, GUILD, CHANNEL, &member, ask);
    let (status, answer) = send(&app, &path, &signed).await;
    // Asking changes something (a task): a plain member may not.
    assert!(answer["data"]["content"].as_str().unwrap().contains("Manage Server"), "{answer}");
    assert_eq!(status, 200);

    let member = Member::manager("fay");
    let ask =
        slash("ask", json!([option("agent", json!("ops")), option("prompt", json!("Status?"))]));
    let signed = app.discord.interaction(APP_ID, GUILD, CHANNEL, &member, ask);
    let (status, answer) = send(&app, &path, &signed).await;
    assert_eq!((status, answer), (200, json!({"type": 5})), "deferred");
    eventually(WAIT, "the follow-up arrives", || async { !app.discord.followups().is_empty() })
        .await;
    let followup = app.discord.followups().remove(0);
    assert_eq!(
        (followup.application_id.as_str(), followup.token.as_str()),
        (APP_ID, signed.token.as_str())
    );
    let content = followup.body["content"].as_str().unwrap();
    assert!(content.starts_with("**ops:**") && content.contains("Status?"), "{content}");
    let tasks = backlog(&app, &user, "ops").await;
    assert_eq!((tasks.len(), &tasks[0]["priority"]), (1, &json!(i32::MAX)));
}
