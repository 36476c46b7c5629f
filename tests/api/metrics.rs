//! `GET /metrics` through the real server: well-formed Prometheus text, requests counted under
//! their route template, tasks, model calls, queue depth, outbox backlog and Discord 429s.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::fake_discord::Failure;
use crate::helpers::{
    TestApp, TestDb, app_with, backend_tests, eventually, metric_samples, sample,
};

/// The samples of a scrape, `name{labels}` → value, after checking every line's shape.
pub(crate) async fn scrape(app: &TestApp, token: Option<&str>) -> HashMap<String, f64> {
    let mut request = app.client.get(format!("{}/metrics", app.address));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    metric_samples(&response.text().await.unwrap())
}

backend_tests! { db;
    metrics_count_requests_tasks_models_queues_and_discord,
    a_metrics_token_keeps_the_numbers_private,
}

async fn metrics_count_requests_tasks_models_queues_and_discord(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let user = app.register("metrics@example.com").await;
    app.create_agent(&user, "counted").await;
    for _ in 0..3 {
        app.get("/api/agents/counted", &user).await.assert_status(200);
    }
    app.get("/api/agents/nobody", &user).await.assert_status(404);
    app.request(Method::GET, "/no/such/path/12345", None, None).await.assert_status(404);
    app.add_task(&user, "counted", "One", 1).await;
    app.add_task(&user, "counted", "Two", 1).await;

    let before = scrape(&app, None).await;
    assert_eq!(sample(&before, "agentd_tasks_queued"), 2.0);
    assert_eq!(
        sample(
            &before,
            r#"agentd_http_requests_total{route="/api/agents/{id}",method="GET",status="200"}"#
        ),
        3.0
    );
    assert_eq!(
        sample(
            &before,
            r#"agentd_http_requests_total{route="/api/agents/{id}",method="GET",status="404"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &before,
            r#"agentd_http_requests_total{route="unmatched",method="GET",status="404"}"#
        ),
        1.0
    );
    assert!(!before.keys().any(|k| k.contains("12345")), "raw paths are never labels");
    assert_eq!(
        sample(
            &before,
            r#"agentd_http_request_duration_seconds_count{route="/api/agents/{id}",method="GET"}"#
        ),
        4.0
    );
    assert_eq!(
        sample(
            &before,
            r#"agentd_http_request_duration_seconds_bucket{route="/api/agents/{id}",method="GET",le="+Inf"}"#
        ),
        4.0
    );

    app.post_empty("/api/agents/counted/start", &user).await.assert_status(200);
    eventually(Duration::from_secs(20), "both tasks complete", || async {
        sample(&scrape(&app, None).await, r#"agentd_tasks_total{outcome="completed"}"#) == 2.0
    })
    .await;
    let after = scrape(&app, None).await;
    assert_eq!(sample(&after, "agentd_tasks_queued"), 0.0);
    assert_eq!(sample(&after, r#"agentd_model_call_duration_seconds_count{provider="echo"}"#), 2.0);
    assert_eq!(
        sample(&after, r#"agentd_model_call_errors_total{provider="echo",kind="permanent"}"#),
        0.0
    );
    assert_eq!(sample(&after, "agentd_agents_running"), 1.0);
    for series in [
        r#"agentd_model_rate_limit_waits_total{provider="echo"}"#,
        r#"agentd_model_rate_limit_wait_seconds_total{provider="echo"}"#,
        r#"agentd_model_calls_skipped_total{provider="echo"}"#,
    ] {
        assert_eq!(sample(&after, series), 0.0, "{series}");
    }

    // Discord's 429s are counted, and posts waiting show as the outbox backlog.
    let (guild, bot) = ("6161", "metrics-bot.1");
    app.discord.add_bot(bot, "MetricsBot");
    app.discord.add_guild(guild, "Metrics", &[bot]);
    app.post("/api/chat/connect", &user, json!({"bot_token": bot, "guild_id": guild}))
        .await
        .assert_status(200);
    app.post(
        &format!("/api/chat/mappings/{guild}"),
        &user,
        json!({"agent_id": "counted", "channel_id": format!("{guild}1")}),
    )
    .await
    .assert_status(200);
    assert_eq!(sample(&scrape(&app, None).await, "agentd_discord_rate_limited_total"), 0.0);
    app.discord.fail_next(&[Failure::SharedRateLimit(Duration::from_millis(100))]);
    app.post(
        &format!("/api/chat/send/{guild}"),
        &user,
        json!({"agent_id": "counted", "content": "hello"}),
    )
    .await
    .assert_status(200);
    let later = scrape(&app, None).await;
    assert_eq!(
        sample(&later, "agentd_discord_rate_limited_total"),
        1.0,
        "the send met one 429, then went through"
    );
    // While Discord fails, the next result cannot be delivered and waits for its retry.
    app.discord.fail_next(&[Failure::ServerError; 50]);
    app.add_task(&user, "counted", "Three", 1).await;
    eventually(
        Duration::from_secs(20),
        "the undeliverable result is counted as pending",
        || async { sample(&scrape(&app, None).await, "agentd_outbox_pending") >= 1.0 },
    )
    .await;
}

async fn a_metrics_token_keeps_the_numbers_private(db: TestDb) {
    let app =
        app_with(db, |o| o.http.metrics_token = Some("scrape-secret".to_owned().into())).await;
    let anonymous = app.request(Method::GET, "/metrics", None, None).await;
    assert_eq!(anonymous.status.as_u16(), 401);
    assert_eq!(anonymous.code(), "unauthorized");
    let wrong = app
        .client
        .get(format!("{}/metrics", app.address))
        .bearer_auth("scrape-secreT")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let samples = scrape(&app, Some("scrape-secret")).await;
    assert!(samples.contains_key("agentd_tasks_queued"));
}
