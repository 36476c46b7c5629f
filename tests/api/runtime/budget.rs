//! Costs and budgets through the HTTP API: a model call that could cross a budget is never sent
//! (the fake model's request log proves it), in the middle of a run too; two agents racing
//! against one user budget do not cross it together; the usage report sums the steps' costs.
//!
//! The priced model costs nothing per input token and $200 per million output tokens, and the
//! answers are bound to 25 tokens: the worst case of a call is 5,000 micro-dollars, and each
//! answer of the fake (22 output tokens) costs 4,400. Under a budget of $0.01 (10,000): the
//! first call reserves 5,000 of it; the second 4,400 + 5,000; the third could reach 13,800 and
//! is not sent.

use std::time::Duration;

use serde_json::{Value, json};

use super::tools::{acting_agent, call, calls_of, finished, start, steps};
use super::{WAIT, agent_status, count_in, entries, models, posts};
use crate::fake_models::Script;
use crate::helpers::{
    PRICED_CALL_MICROS, PRICED_MODEL, PRICED_TOO, TestApp, TestDb, User, app_with, backend_tests,
    eventually, sample,
};
use crate::metrics::scrape;

/// Asserts a 400 `validation_failed` naming `field`.
#[track_caller]
fn refused(reply: &crate::helpers::Reply, field: &str) {
    reply.assert_error(400, "validation_failed");
    assert!(reply.body["error"]["details"][field].is_string(), "{}", reply.body);
}

backend_tests! { db;
    the_call_that_could_cross_an_agents_budget_is_never_sent_even_mid_task,
    two_agents_racing_against_one_user_budget_do_not_cross_it_together,
    the_usage_report_sums_the_steps_costs_and_flags_unpriced_models,
}

async fn priced_app(db: TestDb) -> TestApp {
    app_with(db, |o| o.max_tokens = Some(25)).await
}

/// The model costs of the task's steps, in micro-dollars, as recorded.
fn step_costs(steps: &[Value]) -> Vec<i64> {
    steps.iter().filter_map(|s| s["cost"]["cost_micros"].as_i64()).collect()
}

async fn usage(app: &TestApp, user: &User, query: &str) -> Value {
    app.get(&format!("/api/usage{query}"), user).await.assert_status(200).clone()
}

async fn the_call_that_could_cross_an_agents_budget_is_never_sent_even_mid_task(db: TestDb) {
    let app = priced_app(db).await;
    let user =
        acting_agent(&app, "spender@example.com", "spender", PRICED_MODEL, &["memory"]).await;
    let agent = app
        .patch("/api/agents/spender", &user, json!({"budget_monthly_usd": 0.01}))
        .await
        .assert_status(200)
        .clone();
    assert_eq!(agent["budget_monthly_usd"], 0.01);
    models(&app).script_for(
        "priced",
        [
            call("memory", json!({"action": "append", "text": "one"})),
            call("memory", json!({"action": "append", "text": "two"})),
            Script::Answer("All written down.".into()),
        ],
    );
    let first = app.add_task(&user, "spender", "Write two notes", 0).await;
    let second = app.add_task(&user, "spender", "Then this", 0).await;
    start(&app, &user, "spender").await;

    let failed = finished(&app, &user, "spender", &first["id"]).await;
    assert_eq!(failed["status"], "failed");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.starts_with("budget_exhausted: the monthly budget of agent 'Writer' is $0.01"),
        "{error}"
    );
    assert!(error.contains("$0.0088 of it is spent"), "{error}");
    assert_eq!(calls_of(&app, "priced").len(), 2, "the third call was never sent");
    let recorded = steps(&app, &user, "spender", &first["id"]).await;
    assert_eq!(step_costs(&recorded), [PRICED_CALL_MICROS, PRICED_CALL_MICROS]);
    assert_eq!(recorded[0]["cost"]["model"], PRICED_MODEL);
    assert_eq!(recorded[0]["cost"]["unpriced"], false);

    eventually(WAIT, "the agent is in error", || async {
        agent_status(&app, &user, "spender").await == "error"
    })
    .await;
    assert_eq!(count_in(&app, &user, "spender", "queued").await, 1, "the next task waits");
    let activity =
        app.get("/api/agents/spender/activity?limit=100", &user).await.assert_status(200).clone();
    let entries = entries(&activity);
    let warnings: Vec<_> = entries.iter().filter(|(a, _)| a == "budget_warning").collect();
    assert_eq!(warnings.len(), 1, "{entries:?}");
    assert!(warnings[0].1.starts_with("$0.0088 of the monthly budget of agent 'Writer' ($0.01)"));
    assert!(entries.iter().any(|(a, d)| a == "agent_error" && d.contains("budget_exhausted")));
    let stopped: Vec<_> = entries.iter().filter(|(a, _)| a == "budget_exhausted").collect();
    assert_eq!(stopped.len(), 1, "one entry for the run stopped at the budget: {entries:?}");
    assert!(stopped[0].1.contains("stopped at a budget: budget_exhausted:"), "{stopped:?}");
    eventually(WAIT, "the warning and the error are posted", || async {
        let posts = posts(&app);
        posts.iter().any(|(title, _)| title == "Budget warning")
            && posts.iter().any(|(_, text)| text.contains("could cross a budget"))
    })
    .await;

    let report = usage(&app, &user, "?group_by=agent").await;
    assert_eq!(report["total"]["cost_micros"], 2 * PRICED_CALL_MICROS);
    assert_eq!(report["total"]["steps"], 2);
    assert_eq!(report["total"]["tasks"], 1);
    assert_eq!(report["rows"][0]["key"], "spender");
    let budget = app.get("/api/budget", &user).await.assert_status(200).clone();
    assert_eq!(budget["spent_micros"], 2 * PRICED_CALL_MICROS);
    assert_eq!(budget["monthly_usd"], Value::Null);

    // A higher budget and a start: the queued task runs.
    app.patch("/api/agents/spender", &user, json!({"budget_monthly_usd": 0.02}))
        .await
        .assert_status(200);
    models(&app).script_for("priced", [Script::Answer("Done.".into())]);
    start(&app, &user, "spender").await;
    let done = finished(&app, &user, "spender", &second["id"]).await;
    assert_eq!(done["status"], "complete");
    assert_eq!(calls_of(&app, "priced").len(), 3);
}

async fn two_agents_racing_against_one_user_budget_do_not_cross_it_together(db: TestDb) {
    let app = priced_app(db).await;
    let user = acting_agent(&app, "racers@example.com", "quick", PRICED_MODEL, &[]).await;
    let slow = json!({"id": "slow", "name": "Slow", "role_prompt": "Be brief.",
        "channel": "general", "model": PRICED_TOO, "tools": []});
    app.post("/api/agents", &user, slow).await.assert_status(201);
    let set = app.put("/api/budget", &user, json!({"monthly_usd": 0.01})).await;
    assert_eq!(set.assert_status(200)["monthly_usd"], 0.01);
    // Slow's first call is still out when quick's second would go: with both worst cases held
    // (5,000 each) and quick's first settled (4,400), it could reach 14,400, so it is not sent;
    // counting only what is settled, it would go, and the two would spend 13,200.
    for model in ["priced", "priced-too"] {
        models(&app).repeat_for(model, Script::Answer("ok".into()));
    }
    models(&app).set_latency_for("priced", Duration::from_millis(200));
    models(&app).set_latency_for("priced-too", Duration::from_millis(1500));
    for agent in ["quick", "slow"] {
        for n in 0..3 {
            app.add_task(&user, agent, &format!("Task {n}"), 0).await;
        }
    }
    start(&app, &user, "slow").await;
    eventually(WAIT, "slow's first call is sent", || async {
        calls_of(&app, "priced-too").len() == 1
    })
    .await;
    start(&app, &user, "quick").await;

    eventually(WAIT, "both agents stop at the budget", || async {
        agent_status(&app, &user, "quick").await == "error"
            && agent_status(&app, &user, "slow").await == "error"
    })
    .await;
    let sent = (calls_of(&app, "priced").len() + calls_of(&app, "priced-too").len()) as i64;
    let budget = app.get("/api/budget", &user).await.assert_status(200).clone();
    let spent = budget["spent_micros"].as_i64().unwrap();
    assert_eq!(spent, sent * PRICED_CALL_MICROS, "every call sent is counted");
    assert!(
        spent <= 10_000,
        "the agents crossed the budget together: {spent} spent in {sent} calls"
    );
    assert_eq!(sent, 2, "each agent's first call fits (5,000 reserved each), no third does");
    let report = usage(&app, &user, "").await;
    assert_eq!(report["total"]["cost_micros"], spent);
    for agent in ["quick", "slow"] {
        let failed = app.get(&format!("/api/agents/{agent}/backlog?status=failed"), &user).await;
        let failed = failed.assert_status(200)["tasks"].as_array().unwrap().clone();
        assert_eq!(failed.len(), 1, "{agent}: {failed:?}");
        let error = failed[0]["error"].as_str().unwrap();
        assert!(error.starts_with("budget_exhausted: the monthly budget of your account is $0.01"));
    }
}

async fn the_usage_report_sums_the_steps_costs_and_flags_unpriced_models(db: TestDb) {
    let app = priced_app(db).await;
    let user = acting_agent(&app, "usage@example.com", "paid", PRICED_MODEL, &["memory"]).await;
    let free = json!({"id": "free", "name": "Free", "role_prompt": "Be brief.",
        "channel": "general", "model": "openai:free", "tools": ["memory"]});
    app.post("/api/agents", &user, free).await.assert_status(201);
    for model in ["priced", "free"] {
        models(&app).plan_for(
            model,
            vec![call("memory", json!({"action": "read"})), Script::Answer("Read it.".into())],
        );
    }
    let mut tasks = Vec::new();
    for agent in ["paid", "free"] {
        for n in 0..2 {
            tasks.push((
                agent,
                app.add_task(&user, agent, &format!("Task {n}"), 0).await["id"].clone(),
            ));
        }
        start(&app, &user, agent).await;
    }
    let mut recorded = Vec::new();
    for (agent, id) in &tasks {
        assert_eq!(finished(&app, &user, agent, id).await["status"], "complete");
        recorded.extend(steps(&app, &user, agent, id).await.into_iter().map(|s| (*agent, s)));
    }
    let model_steps: Vec<&(&str, Value)> =
        recorded.iter().filter(|(_, s)| s["kind"] == "model").collect();
    assert_eq!(model_steps.len(), 8);
    let sum = |agent: Option<&str>| -> i64 {
        model_steps
            .iter()
            .filter(|(a, _)| agent.is_none_or(|agent| agent == *a))
            .map(|(_, s)| s["cost"]["cost_micros"].as_i64().unwrap())
            .sum()
    };
    assert_eq!(sum(Some("paid")), 4 * PRICED_CALL_MICROS);
    assert_eq!(sum(Some("free")), 0);

    let by_agent = usage(&app, &user, "?group_by=agent").await;
    let rows = by_agent["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        let agent = row["key"].as_str().unwrap();
        assert_eq!(row["cost_micros"], sum(Some(agent)), "{row}");
        assert_eq!(row["steps"], 4);
        assert_eq!(row["tasks"], 2);
        assert_eq!(row["unpriced_steps"], if agent == "free" { 4 } else { 0 });
        assert_eq!(row["output_tokens"], 4 * 22);
    }
    assert_eq!(by_agent["total"]["cost_micros"], sum(None));
    assert_eq!(by_agent["total"]["cost_usd"], sum(None) as f64 / 1e6);
    let by_model = usage(&app, &user, "?group_by=model").await;
    let keys: Vec<&str> =
        by_model["rows"].as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["openai:free", PRICED_MODEL]);
    let by_day = usage(&app, &user, "?group_by=day&agent_id=paid").await;
    let days = by_day["rows"].as_array().unwrap();
    assert_eq!(days.len(), 1, "{by_day}");
    assert_eq!(days[0]["key"].as_str().unwrap().len(), 10);
    assert_eq!(days[0]["cost_micros"], sum(Some("paid")));
    let past = usage(&app, &user, "?from=2020-01-01&to=2020-02-01").await;
    assert_eq!(past["total"]["steps"], 0);
    assert!(past["rows"].as_array().unwrap().is_empty());

    let samples = scrape(&app, None).await;
    let cost =
        sample(&samples, &format!("agentd_model_cost_usd_total{{model=\"{PRICED_MODEL}\"}}"));
    assert!((cost - sum(None) as f64 / 1e6).abs() < 1e-9, "{cost}");
    assert_eq!(sample(&samples, "agentd_model_priced_calls_total{model=\"unpriced\"}"), 4.0);

    // Bad input is 400 naming the field, and changes nothing.
    for (query, field) in [
        ("?group_by=week", "group_by"),
        ("?from=yesterday", "from"),
        ("?from=2026-02-01&to=2026-01-01", "to"),
        ("?agent_id=Not%20An%20Id", "agent_id"),
    ] {
        refused(&app.get(&format!("/api/usage{query}"), &user).await, field);
    }
    app.get("/api/usage?agent_id=ghost", &user).await.assert_error(404, "agent_not_found");
    for body in [json!({}), json!({"monthly_usd": -1}), json!({"monthly_usd": "ten"})] {
        let refused = app.put("/api/budget", &user, body).await;
        assert_eq!(refused.status, 400, "{}", refused.body);
    }
    let negative = json!({"budget_monthly_usd": -0.5});
    refused(&app.patch("/api/agents/paid", &user, negative).await, "budget_monthly_usd");
    let budget = app.get("/api/budget", &user).await.assert_status(200).clone();
    assert_eq!(budget["monthly_usd"], Value::Null);
    let cleared = app.put("/api/budget", &user, json!({"monthly_usd": null})).await;
    assert_eq!(cleared.assert_status(200)["monthly_usd"], Value::Null);
}
