//! The budget's worst case counts a request's tokens, not its bytes: a call near the end of a
//! budget is sent when its counted tokens fit. OpenAI's models are counted with OpenAI's
//! tokenizer before the call; Anthropic's are bounded by their bytes and, only when that bound
//! would cross a budget, counted by Anthropic (`count_tokens`) first.
//!
//! The task is 4,000 bytes of English, about 900 tokens. Answers are bound to 25 tokens.

use serde_json::json;

use super::tools::{acting_agent, calls_of, finished, start, steps};
use super::{WAIT, models};
use crate::helpers::{TestApp, TestDb, app_with, backend_tests, eventually};

backend_tests! { db;
    an_openai_call_whose_counted_tokens_fit_the_budget_is_sent_though_its_bytes_would_not,
    anthropic_counts_a_request_only_when_its_byte_bound_would_cross_a_budget,
}

const TASK_BYTES: usize = 4_000;

fn long_task() -> String {
    let sentence = "Summarise what customers said about the new export feature this week, \
                    group it by theme, and suggest one fix for each theme. ";
    let mut text = sentence.repeat(TASK_BYTES / sentence.len() + 1);
    text.truncate(TASK_BYTES);
    text
}

async fn counting_app(db: TestDb) -> TestApp {
    let app = app_with(db, |o| o.max_tokens = Some(25)).await;
    models(&app).count_tokens();
    app
}

/// `openai:gpt-4o-mini` at its example price ($0.15 and $0.60 per million tokens): the bytes
/// alone make a worst case of at least 4,000 × 0.15 = 600 micro-dollars, over a budget of
/// 400; counted (about 900 tokens), the worst case is under 200.
async fn an_openai_call_whose_counted_tokens_fit_the_budget_is_sent_though_its_bytes_would_not(
    db: TestDb,
) {
    let app = counting_app(db).await;
    let user =
        acting_agent(&app, "counted@example.com", "counted", "openai:gpt-4o-mini", &[]).await;
    app.patch("/api/agents/counted", &user, json!({"budget_monthly_usd": 0.0004}))
        .await
        .assert_status(200);
    let task = app
        .post(
            "/api/agents/counted/backlog",
            &user,
            json!({"title": "Feedback", "description": long_task()}),
        )
        .await
        .assert_status(201)
        .clone();
    start(&app, &user, "counted").await;

    let done = finished(&app, &user, "counted", &task["id"]).await;
    assert_eq!(done["status"], "complete", "{done}");
    let sent = calls_of(&app, "gpt-4o-mini");
    assert_eq!(sent.len(), 1);
    let steps = steps(&app, &user, "counted", &task["id"]).await;
    let reported = steps[0]["usage"]["input_tokens"].as_i64().unwrap();
    let expected = support::fake_tokens::openai_prompt_tokens(&sent[0].body);
    assert_eq!(reported, expected, "the fake reported OpenAI's count");
    assert!((600..2_000).contains(&reported), "about 900 tokens: {reported}");
    let cost = steps[0]["cost"]["cost_micros"].as_i64().unwrap();
    assert!(cost > 0 && cost < 400, "priced at the tokens reported: {cost}");
}

/// `anthropic:claude-haiku-4-5` at its example price ($1 and $5 per million tokens): the bytes
/// make a worst case of at least 4,000 micro-dollars, over a budget of 2,500; counted by the
/// provider (about 1,100 tokens at the fake), it is under 1,500.
async fn anthropic_counts_a_request_only_when_its_byte_bound_would_cross_a_budget(db: TestDb) {
    let app = counting_app(db).await;
    let user =
        acting_agent(&app, "claude@example.com", "near", "anthropic:claude-haiku-4-5", &[]).await;
    app.patch("/api/agents/near", &user, json!({"budget_monthly_usd": 0.0025}))
        .await
        .assert_status(200);
    app.create_agent(&user, "far").await;
    app.patch("/api/agents/far", &user, json!({"model": "anthropic:claude-haiku-4-5"}))
        .await
        .assert_status(200);

    // Without a budget near its end, nothing is counted before the call.
    let free = app
        .post(
            "/api/agents/far/backlog",
            &user,
            json!({"title": "Free", "description": long_task()}),
        )
        .await
        .assert_status(201)
        .clone();
    start(&app, &user, "far").await;
    assert_eq!(finished(&app, &user, "far", &free["id"]).await["status"], "complete");
    assert!(models(&app).counted().is_empty(), "no count asked for");

    let near = app
        .post(
            "/api/agents/near/backlog",
            &user,
            json!({"title": "Near", "description": long_task()}),
        )
        .await
        .assert_status(201)
        .clone();
    start(&app, &user, "near").await;
    let done = finished(&app, &user, "near", &near["id"]).await;
    assert_eq!(done["status"], "complete", "{done}");
    let counted = models(&app).counted();
    assert_eq!(counted.len(), 1, "counted once, before the call");
    assert!(counted[0].get("max_tokens").is_none());
    let sent = calls_of(&app, "claude-haiku-4-5");
    let call = sent.last().unwrap();
    assert_eq!(counted[0]["messages"], call.body["messages"], "the request as sent");
    assert_eq!(counted[0]["system"], call.body["system"]);
    let steps = steps(&app, &user, "near", &near["id"]).await;
    let reported = steps[0]["usage"]["input_tokens"].as_i64().unwrap();
    assert_eq!(reported, support::fake_tokens::anthropic_input_tokens(&call.body));
    eventually(WAIT, "the spend settled within the budget", || async {
        let usage = app.get("/api/usage?agent_id=near", &user).await;
        let spent = usage.body["total"]["cost_micros"].as_i64().unwrap_or(i64::MAX);
        spent > 0 && spent <= 2_500
    })
    .await;
}
