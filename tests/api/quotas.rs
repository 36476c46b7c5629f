//! Quotas on a shared instance: each refused at its limit with `quota_exceeded` (429, naming
//! the quota and its value), and a self-hosted instance without billing is no free trial.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, User, app_with, backend_tests};
use agentcore::domain::quota::{PlanQuotas, Quotas};
use support::mcp_server::McpHttpServer;

backend_tests! { db;
    schedules_are_bounded_per_agent_per_user_and_in_how_often_they_enqueue,
    queued_tasks_are_bounded_per_agent_and_per_user,
    mcp_servers_are_bounded_per_user,
    without_billing_agents_are_unlimited_unless_the_operator_sets_a_quota,
    with_billing_a_plan_may_have_quotas_of_its_own,
}

fn small() -> Quotas {
    Quotas {
        agents_per_user: 0,
        schedules_per_agent: 2,
        schedules_per_user: 3,
        min_enqueue_period: Duration::from_secs(300),
        queued_tasks_per_agent: 3,
        queued_tasks_per_user: 4,
        mcp_servers_per_user: 2,
        streams_per_user: 16,
    }
}

/// Asserts a refusal by `quota` at `limit`, with a message that names the setting.
fn refused(reply: &crate::helpers::Reply, quota: &str, limit: u64) {
    reply.assert_error(429, "quota_exceeded");
    let details = &reply.body["error"]["details"];
    assert_eq!(
        (details["quota"].as_str(), details["limit"].as_str()),
        (Some(quota), Some(&*limit.to_string())),
        "{}",
        reply.body
    );
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(quota), "{message}");
}

fn schedule(cron: &str, overlap: &str) -> Value {
    json!({"cron": cron, "title": "Report", "overlap": overlap})
}

async fn user_with_agents(app: &TestApp, email: &str, agents: &[&str]) -> User {
    let user = app.register(email).await;
    for id in agents {
        app.create_agent(&user, id).await;
    }
    user
}

async fn schedules_are_bounded_per_agent_per_user_and_in_how_often_they_enqueue(db: TestDb) {
    let app = app_with(db, |o| o.quotas = small()).await;
    let user = user_with_agents(&app, "cron@example.com", &["a", "b"]).await;
    let add = |agent: &str, body: Value| {
        let path = format!("/api/agents/{agent}/schedules");
        let user = &user;
        let app = &app;
        async move { app.post(&path, user, body).await }
    };
    // Every minute is fine when a run waits for the last; queuing one every minute is not.
    refused(&add("a", schedule("* * * * *", "enqueue")).await, "min_enqueue_period_seconds", 300);
    refused(&add("a", schedule("*/4 * * * *", "enqueue")).await, "min_enqueue_period_seconds", 300);
    add("a", schedule("* * * * *", "skip_if_active")).await.assert_status(201);
    let hourly = add("a", schedule("0 * * * *", "enqueue")).await;
    let id = hourly.assert_status(201)["id"].as_str().unwrap().to_owned();
    let faster = json!({"cron": "*/2 * * * *"});
    let patched = app.patch(&format!("/api/agents/a/schedules/{id}"), &user, faster).await;
    refused(&patched, "min_enqueue_period_seconds", 300);

    refused(&add("a", schedule("0 9 * * *", "enqueue")).await, "schedules_per_agent", 2);
    add("b", schedule("0 9 * * *", "enqueue")).await.assert_status(201);
    refused(&add("b", schedule("0 10 * * *", "enqueue")).await, "schedules_per_user", 3);
    let count = app.db.count("SELECT COUNT(*) FROM schedules", &[]).await;
    assert_eq!(count, 3, "nothing over a quota was stored");

    // Another user has room of their own.
    let other = user_with_agents(&app, "other@example.com", &["c"]).await;
    app.post("/api/agents/c/schedules", &other, schedule("0 9 * * *", "enqueue"))
        .await
        .assert_status(201);
}

async fn queued_tasks_are_bounded_per_agent_and_per_user(db: TestDb) {
    let app = app_with(db, |o| o.quotas = small()).await;
    let user = user_with_agents(&app, "queue@example.com", &["a", "b"]).await;
    let mut first = Value::Null;
    for n in 0..3 {
        let task = app.add_task(&user, "a", &format!("Task {n}"), 0).await;
        if n == 0 {
            first = task["id"].clone();
        }
    }
    let body = json!({"title": "One more"});
    refused(
        &app.post("/api/agents/a/backlog", &user, body.clone()).await,
        "queued_tasks_per_agent",
        3,
    );
    app.post("/api/agents/b/backlog", &user, body.clone()).await.assert_status(201);
    refused(
        &app.post("/api/agents/b/backlog", &user, body.clone()).await,
        "queued_tasks_per_user",
        4,
    );

    // A task that leaves the queue makes room again.
    let path = format!("/api/agents/a/backlog/{}", first.as_str().unwrap());
    app.delete(&path, &user).await.assert_status(200);
    app.post("/api/agents/a/backlog", &user, body).await.assert_status(201);
    let queued = app.db.count("SELECT COUNT(*) FROM tasks WHERE status = 'queued'", &[]).await;
    assert_eq!(queued, 4);
}

async fn mcp_servers_are_bounded_per_user(db: TestDb) {
    let server = McpHttpServer::start().await;
    let app = app_with(db, |o| {
        o.quotas = small();
        o.tools.http.allow_private = true;
    })
    .await;
    let user = app.register("servers@example.com").await;
    for name in ["one", "two"] {
        let body = json!({"name": name, "url": server.url});
        app.post("/api/mcp/servers", &user, body).await.assert_status(201);
    }
    let third =
        app.post("/api/mcp/servers", &user, json!({"name": "three", "url": server.url})).await;
    refused(&third, "mcp_servers_per_user", 2);
    app.delete("/api/mcp/servers/one", &user).await.assert_status(200);
    let again =
        app.post("/api/mcp/servers", &user, json!({"name": "three", "url": server.url})).await;
    again.assert_status(201);
}

async fn without_billing_agents_are_unlimited_unless_the_operator_sets_a_quota(db: TestDb) {
    let app = app_with(db, |o| o.webhook_secrets.clear()).await;
    let user = user_with_agents(&app, "self@example.com", &["a1", "a2", "a3", "a4", "a5"]).await;
    let billing = app.get("/api/billing", &user).await.assert_status(200).clone();
    assert_eq!(
        (billing["agent_limit"].clone(), billing["agents_used"].clone()),
        (Value::Null, json!(5))
    );

    let (db, mut options) = app.stop().await;
    options.quotas.agents_per_user = 6;
    let app = TestApp::start(db, options).await;
    app.create_agent(&user, "a6").await;
    let seventh = json!({"id": "a7", "name": "A7", "role_prompt": "Work.", "channel": "general"});
    refused(&app.post("/api/agents", &user, seventh).await, "agents_per_user", 6);
    let billing = app.get("/api/billing", &user).await.assert_status(200).clone();
    assert_eq!(billing["agent_limit"], 6);
}

async fn with_billing_a_plan_may_have_quotas_of_its_own(db: TestDb) {
    use crate::stripe_events::{Sub, checkout, now, subscription};
    let app = app_with(db, |o| {
        o.quotas = small();
        let team = PlanQuotas { schedules_per_agent: Some(3), ..PlanQuotas::default() };
        let free = PlanQuotas { schedules_per_agent: Some(1), ..PlanQuotas::default() };
        o.plan_quotas = [("team".to_owned(), team), ("free".to_owned(), free)].into();
    })
    .await;
    let user = user_with_agents(&app, "plan@example.com", &["a"]).await;
    let add = |cron: &'static str| {
        let (app, user) = (&app, &user);
        async move { app.post("/api/agents/a/schedules", user, schedule(cron, "enqueue")).await }
    };
    add("0 9 * * *").await.assert_status(201);
    refused(&add("0 10 * * *").await, "schedules_per_agent", 1);

    // The user buys the team plan: its own quota applies from the next request.
    app.deliver(&checkout("evt_q1", "cus_q", Some(&user.id), None, None)).await;
    let sub = Sub {
        id: "sub_q",
        customer: "cus_q",
        status: "active",
        price: "lookup:team_monthly",
        user_id: None,
    };
    app.deliver(&subscription("created", "evt_q2", now(), &sub)).await;
    add("0 10 * * *").await.assert_status(201);
    add("0 11 * * *").await.assert_status(201);
    refused(&add("0 12 * * *").await, "schedules_per_agent", 3);
}
