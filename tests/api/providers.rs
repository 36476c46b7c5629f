//! The provider registry through the HTTP API: providers configured by name serve agents side
//! by side, calls are counted under the provider's name, and a model naming a provider that is
//! not configured is refused when an agent is created or changed.

use std::time::Duration;

use serde_json::json;

use crate::fake_models::FakeModels;
use crate::helpers::{Options, TestApp, TestDb, app_with, backend_tests, eventually, sample};
use crate::metrics::scrape;

backend_tests! { db;
    two_openai_compatible_providers_serve_agents_side_by_side,
    a_model_naming_no_configured_provider_is_refused,
}

async fn two_openai_compatible_providers_serve_agents_side_by_side(db: TestDb) {
    let local = FakeModels::start().await;
    let app = app_with(db, |options| {
        options.more_providers.push(("local_llm".into(), local.clone()));
    })
    .await;
    let user = app.register("providers@example.com").await;
    for (id, model) in [("cloud", "openai:gpt-cloud"), ("local", "local_llm:llama3.1:8b")] {
        let agent =
            json!({"id": id, "name": id, "role_prompt": "Answer.", "channel": id, "model": model});
        app.post("/api/agents", &user, agent).await.assert_status(201);
        app.add_task(&user, id, &format!("Task for {id}"), 0).await;
        app.post_empty(&format!("/api/agents/{id}/start"), &user).await.assert_status(200);
    }
    eventually(Duration::from_secs(20), "both tasks complete", || async {
        let done = |id: &'static str| {
            let app = &app;
            let user = &user;
            async move {
                let reply =
                    app.get(&format!("/api/agents/{id}/backlog?status=complete"), user).await;
                reply.assert_status(200)["tasks"].as_array().unwrap().len()
            }
        };
        done("cloud").await == 1 && done("local").await == 1
    })
    .await;

    let cloud: Vec<_> = app.options.models.calls();
    let local_calls = local.calls();
    assert_eq!(cloud.len(), 1, "the default openai provider got the cloud agent's call");
    assert_eq!(
        (cloud[0].body["model"].as_str(), cloud[0].user()),
        (Some("gpt-cloud"), "Task for cloud")
    );
    assert_eq!(local_calls.len(), 1, "the local provider got the local agent's call");
    assert_eq!(
        (local_calls[0].body["model"].as_str(), local_calls[0].user()),
        (Some("llama3.1:8b"), "Task for local")
    );
    let metrics = scrape(&app, None).await;
    for provider in ["openai", "local_llm"] {
        let series = format!("agentd_model_call_duration_seconds_count{{provider=\"{provider}\"}}");
        assert_eq!(sample(&metrics, &series), 1.0, "{series}");
    }
    let unused = r#"agentd_model_call_duration_seconds_count{provider="anthropic"}"#;
    assert_eq!(sample(&metrics, unused), 0.0, "every configured provider is reported");
}

async fn a_model_naming_no_configured_provider_is_refused(db: TestDb) {
    let app = TestApp::start(db, Options::new().await).await;
    let user = app.register("unconfigured@example.com").await;
    let agent = json!({"id": "a", "name": "A", "role_prompt": "Answer.", "channel": "a", "model": "mistral:large"});
    let refused = app.post("/api/agents", &user, agent).await;
    refused.assert_error(400, "validation_failed");
    let problem = refused.body["error"]["details"]["model"].as_str().unwrap().to_owned();
    assert!(problem.contains("'mistral', which is not configured"), "{problem}");
    assert!(problem.contains("anthropic, openai"), "{problem}");
    let listed = app.get("/api/agents", &user).await;
    assert_eq!(listed.assert_status(200)["agents"], json!([]), "nothing was created");

    app.create_agent(&user, "b").await;
    let change = json!({"model": "mistral:large"});
    app.patch("/api/agents/b", &user, change).await.assert_error(400, "validation_failed");
    let kept = app.get("/api/agents/b", &user).await;
    assert_eq!(kept.assert_status(200)["model"], json!(null), "the agent is unchanged");
    let change = json!({"model": "anthropic:claude-sonnet-4-5"});
    app.patch("/api/agents/b", &user, change).await.assert_status(200);
}
