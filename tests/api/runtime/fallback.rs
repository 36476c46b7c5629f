//! Fallback chains and shared model health through the HTTP API, with the fake model server: an
//! overloaded or unavailable model hands the step to the next model of the chain (priced as
//! that one), a bad request does not, and a model that keeps failing cools down for every agent
//! on two nodes until one probe finds it back.

use std::time::Duration;

use serde_json::{Value, json};

use super::tools::{calls_of, finished, start, steps};
use super::{WAIT, mapped_agent, models};
use crate::fake_models::Script;
use crate::helpers::{
    PRICED_CALL_MICROS, PRICED_MODEL, TestApp, TestDb, User, app_with, backend_tests, eventually,
};

backend_tests! { db;
    an_overloaded_model_hands_the_step_to_the_servers_fallback_priced_at_its_own_rate,
    an_unavailable_model_hands_the_step_to_the_agents_own_fallback,
    a_bad_request_is_not_sent_to_the_fallback,
    a_failing_model_cools_down_for_every_agent_on_two_nodes_until_a_probe_finds_it_back,
    fallback_models_are_bounded_checked_and_kept_from_viewers,
}

/// The model step that ended the task, as stored.
async fn answer_step(app: &TestApp, user: &User, agent: &str, task: &Value) -> Value {
    let steps = steps(app, user, agent, &task["id"]).await;
    steps.last().expect("a model step").clone()
}

/// A started agent of a new user on `model`, with `fallbacks` of its own when given.
async fn agent_on(
    app: &TestApp,
    email: &str,
    id: &str,
    model: &str,
    fallbacks: Option<&[&str]>,
) -> User {
    let user = mapped_agent(app, email, id, Some(model)).await;
    if let Some(fallbacks) = fallbacks {
        app.patch(&format!("/api/agents/{id}"), &user, json!({"fallback_models": fallbacks}))
            .await
            .assert_status(200);
    }
    start(app, &user, id).await;
    user
}

async fn an_overloaded_model_hands_the_step_to_the_servers_fallback_priced_at_its_own_rate(
    db: TestDb,
) {
    let app = app_with(db, |o| {
        o.model_fallbacks.insert("anthropic:claude-busy".into(), vec![PRICED_MODEL.into()]);
    })
    .await;
    models(&app).repeat_for("claude-busy", Script::Status(529, None));
    let user = agent_on(&app, "busy@example.com", "busy", "anthropic:claude-busy", None).await;
    let added = app.add_task(&user, "busy", "Draft the notes", 0).await;

    let task = finished(&app, &user, "busy", &added["id"]).await;
    assert_eq!(task["status"], "complete", "{task}");
    assert_eq!(task["result"], "Answer to: Draft the notes");
    let step = answer_step(&app, &user, "busy", &task).await;
    assert_eq!(step["cost"]["model"], PRICED_MODEL, "the model that answered: {step}");
    assert_eq!(step["cost"]["cost_micros"], PRICED_CALL_MICROS, "at the fallback's price");
    let tried = step["tried"].as_array().expect("what was tried");
    assert_eq!(tried.len(), 1, "{step}");
    assert_eq!(tried[0]["model"], "anthropic:claude-busy");
    let error = tried[0]["error"].as_str().unwrap();
    assert!(error.contains("529") && error.contains("Overloaded"), "{error}");
    assert_eq!(calls_of(&app, "claude-busy").len(), 2, "one retry, then the fallback");
    assert_eq!(calls_of(&app, "priced").len(), 1);
    let usage = app.get("/api/usage", &user).await.assert_status(200).clone();
    assert_eq!(usage["total"]["cost_micros"], PRICED_CALL_MICROS, "{usage}");
}

async fn an_unavailable_model_hands_the_step_to_the_agents_own_fallback(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    models(&app).repeat_for("down", Script::Status(503, None));
    let fallbacks: &[&str] = &["anthropic:claude-standby"];
    let user = agent_on(&app, "down@example.com", "down", "openai:down", Some(fallbacks)).await;
    let added = app.add_task(&user, "down", "Summarise the week", 0).await;

    let task = finished(&app, &user, "down", &added["id"]).await;
    assert_eq!(task["status"], "complete", "{task}");
    let step = answer_step(&app, &user, "down", &task).await;
    assert_eq!(step["cost"]["model"], "anthropic:claude-standby", "{step}");
    assert_eq!(step["tried"][0]["model"], "openai:down");
    assert!(step["tried"][0]["error"].as_str().unwrap().contains("503"), "{step}");
    let standby = calls_of(&app, "claude-standby");
    assert_eq!(standby.len(), 1);
    assert_eq!(standby[0].format, "anthropic", "the request speaks the fallback's format");
    assert_eq!(calls_of(&app, "down").len(), 2);
}

async fn a_bad_request_is_not_sent_to_the_fallback(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    models(&app).repeat_for("strict", Script::Status(400, None));
    let fallbacks: &[&str] = &[PRICED_MODEL];
    let user =
        agent_on(&app, "strict@example.com", "strict", "openai:strict", Some(fallbacks)).await;
    let added = app.add_task(&user, "strict", "Say something odd", 0).await;

    let task = finished(&app, &user, "strict", &added["id"]).await;
    assert_eq!(task["status"], "failed", "{task}");
    assert!(task["error"].as_str().unwrap().contains("400"), "{task}");
    assert_eq!(calls_of(&app, "strict").len(), 1, "a refusal is not retried");
    assert!(calls_of(&app, "priced").is_empty(), "nor sent to the fallback");
}

/// Agents `a1` to `a3` of one user (the free plan's three), each on `openai:shaky` with `openai:backup` as fallback,
/// started; waits until each of the two nodes runs some of them.
async fn three_agents_on_two_nodes(a: &TestApp, b: &TestApp) -> User {
    let user = mapped_agent(a, "shaky@example.com", "a1", Some("openai:shaky")).await;
    for id in ["a2", "a3"] {
        let agent = json!({"id": id, "name": id, "role_prompt": "Answer.", "channel": "general",
                           "model": "openai:shaky"});
        a.post("/api/agents", &user, agent).await.assert_status(201);
    }
    for id in ["a1", "a2", "a3"] {
        let fallbacks = json!({"fallback_models": ["openai:backup"]});
        a.patch(&format!("/api/agents/{id}"), &user, fallbacks).await.assert_status(200);
        start(a, &user, id).await;
    }
    eventually(WAIT, "both nodes run agents", || async {
        let (on_a, on_b) = (a.core.runtime_stats(), b.core.runtime_stats());
        on_a.agents_running > 0 && on_b.agents_running > 0
    })
    .await;
    user
}

/// Adds a task to each agent and waits until every one is complete: the answering models.
async fn one_task_each(app: &TestApp, user: &User, agents: &[&str], title: &str) -> Vec<Value> {
    let mut added = Vec::new();
    for agent in agents {
        added.push((*agent, app.add_task(user, agent, title, 0).await));
    }
    let mut answers = Vec::new();
    for (agent, task) in added {
        let task = finished(app, user, agent, &task["id"]).await;
        assert_eq!(task["status"], "complete", "{task}");
        answers.push(answer_step(app, user, agent, &task).await);
    }
    answers
}

async fn health_of(app: &TestApp, user: &User) -> Vec<Value> {
    let list = app.get("/api/models", user).await.assert_status(200).clone();
    list["health"].as_array().unwrap().clone()
}

async fn a_failing_model_cools_down_for_every_agent_on_two_nodes_until_a_probe_finds_it_back(
    db: TestDb,
) {
    let a = app_with(db, |o| {
        o.model_health = agentcore::domain::fallback::HealthPolicy {
            failures_to_cool_down: 2,
            cooldown: Duration::from_secs(6),
            max_cooldown: Duration::from_secs(6),
        };
    })
    .await;
    let b = TestApp::start(a.db.stand_in(), a.options.clone()).await;
    models(&a).repeat_for("shaky", Script::Status(500, None));
    let user = three_agents_on_two_nodes(&a, &b).await;

    // Two calls fail (three attempts each) and go to the backup: the model cools down.
    for round in ["First", "Second"] {
        let answers = one_task_each(&a, &user, &["a1"], round).await;
        assert_eq!(answers[0]["cost"]["model"], "openai:backup");
        assert!(answers[0]["tried"][0]["error"].as_str().unwrap().contains("500"));
    }
    assert_eq!(calls_of(&a, "shaky").len(), 6);
    let health = health_of(&b, &user).await;
    assert_eq!(health.len(), 1, "{health:?}");
    assert_eq!(
        (&health[0]["model"], &health[0]["state"]),
        (&json!("openai:shaky"), &json!("cooling_down"))
    );

    // Every agent, on either node, skips it: not one more call reaches it.
    let answers = one_task_each(&a, &user, &["a1", "a2", "a3"], "During").await;
    for answer in &answers {
        assert_eq!(answer["cost"]["model"], "openai:backup", "{answer}");
        assert_eq!(answer["tried"][0]["model"], "openai:shaky");
        assert!(answer["tried"][0]["error"].as_str().unwrap().starts_with("cooling down until"));
    }
    assert_eq!(calls_of(&a, "shaky").len(), 6, "no call during the cool-down");
    for node in [&a, &b] {
        let metrics = node.core.metrics().await.unwrap();
        let skipped: u64 = metrics.model_calls.iter().map(|m| m.cooldown_skips).sum();
        assert!(skipped > 0, "each node skipped the model");
        assert_eq!(metrics.model_cooldowns, [("openai:shaky".to_owned(), 1)]);
    }
    // Another workspace, whose agents do not call it, is not shown the tenant's model name.
    let stranger = b.register("stranger@example.com").await;
    assert_eq!(health_of(&b, &stranger).await, Vec::<Value>::new());

    // Once the cool-down is over, one probe finds the model back, and calls go to it again.
    models(&a).repeat_for("shaky", Script::Answer("Back.".into()));
    eventually(WAIT, "the cool-down ends", || async {
        health_of(&a, &user).await.first().is_some_and(|h| h["state"] == "probing")
    })
    .await;
    let probed = one_task_each(&a, &user, &["a2"], "Probe").await;
    assert_eq!(probed[0]["cost"]["model"], "openai:shaky", "{}", probed[0]);
    assert!(probed[0].get("tried").is_none(), "{}", probed[0]);
    assert!(health_of(&b, &user).await.is_empty(), "the probe cleared the record");
    let answers = one_task_each(&a, &user, &["a1", "a2", "a3"], "After").await;
    for answer in &answers {
        assert_eq!(answer["cost"]["model"], "openai:shaky", "{answer}");
    }
    assert_eq!(calls_of(&a, "shaky").len(), 6 + 1 + 3);
    b.stop().await;
}

async fn fallback_models_are_bounded_checked_and_kept_from_viewers(db: TestDb) {
    let app = app_with(db, |o| o.keyless = vec!["anthropic".into()]).await;
    let ada = app.register("ada@example.com").await;
    let agent = json!({"id": "w", "name": "Writer", "role_prompt": "Write.", "channel": "general",
                       "model": "openai:gpt-4o", "fallback_models": ["openai:gpt-4o-mini"]});
    let created = app.post("/api/agents", &ada, agent).await;
    assert_eq!(created.assert_status(201)["fallback_models"], json!(["openai:gpt-4o-mini"]));

    let refused = |reply: crate::helpers::Reply, why: &str| {
        reply.assert_error(400, "validation_failed");
        let detail = reply.body["error"]["details"]["fallback_models"].as_str().unwrap_or_default();
        assert!(detail.contains(why), "{why}: {}", reply.body);
    };
    let four = json!({"fallback_models": ["openai:a", "openai:b", "openai:c", "openai:d"]});
    refused(app.patch("/api/agents/w", &ada, four).await, "at most 3");
    let unknown = json!({"fallback_models": ["mistral:large"]});
    refused(app.patch("/api/agents/w", &ada, unknown).await, "provider 'mistral'");
    let keyless = json!({"fallback_models": ["anthropic:claude"]});
    refused(app.patch("/api/agents/w", &ada, keyless).await, "no API key");
    refused(app.patch("/api/agents/w", &ada, json!({"fallback_models": ["echo"]})).await, "echo");
    let twice = json!({"fallback_models": ["openai:a", "openai:a"]});
    refused(app.patch("/api/agents/w", &ada, twice).await, "twice");

    let none = app.patch("/api/agents/w", &ada, json!({"fallback_models": []})).await;
    assert_eq!(none.assert_status(200)["fallback_models"], json!([]));
    let server = app.patch("/api/agents/w", &ada, json!({"fallback_models": null})).await;
    assert_eq!(server.assert_status(200)["fallback_models"], Value::Null);
    let listed = app.get("/api/agents", &ada).await;
    assert_eq!(listed.assert_status(200)["agents"][0]["fallback_models"], Value::Null);

    // The audit log shows the change, before and after.
    let chain = json!({"fallback_models": ["openai:gpt-4o-mini"]});
    app.patch("/api/agents/w", &ada, chain).await.assert_status(200);
    let audit = app.get("/api/audit?action=agent.updated", &ada).await;
    let entries = audit.assert_status(200)["entries"].as_array().unwrap().clone();
    let last = entries.first().expect("an agent.updated entry");
    assert_eq!(last["before"]["fallback_models"], Value::Null, "{last}");
    assert_eq!(last["after"]["fallback_models"], json!(["openai:gpt-4o-mini"]), "{last}");

    // A viewer of a team's workspace cannot change an agent's chain.
    let team = crate::teams::team(&app, &ada, "Ops").await;
    let bob = app.register("bob@example.com").await;
    crate::teams::join(&app, &team, &ada, &bob, "viewer").await;
    let agent = json!({"id": "t", "name": "Team", "role_prompt": "Write.", "channel": "general"});
    crate::teams::in_ws(&app, &team, &ada, reqwest::Method::POST, "/api/agents", Some(agent))
        .await
        .assert_status(201);
    let set = json!({"fallback_models": ["openai:gpt-4o-mini"]});
    let reply =
        crate::teams::in_ws(&app, &team, &bob, reqwest::Method::PATCH, "/api/agents/t", Some(set))
            .await;
    reply.assert_error(403, "forbidden");
}
