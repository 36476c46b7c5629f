//! The model providers against the fake model server: both wire formats, usage, and how
//! each failure is sorted.

use std::time::Duration;

use agentcore::models::{CompletionRequest, ModelError, Models, ModelsConfig};

use crate::fake_models::{ANTHROPIC_KEY, FakeModels, OPENAI_KEY, Script};

fn config(fake: &FakeModels) -> ModelsConfig {
    let mut config =
        ModelsConfig { timeout: Duration::from_millis(500), ..ModelsConfig::default() };
    let openai = config.provider_mut("openai");
    openai.base_url = Some(fake.openai_base());
    openai.api_key = Some(OPENAI_KEY.into());
    let anthropic = config.provider_mut("anthropic");
    anthropic.base_url = Some(fake.base.clone());
    anthropic.api_key = Some(ANTHROPIC_KEY.into());
    config
}

async fn call(models: &Models, model: &str) -> Result<agentcore::models::Completion, ModelError> {
    let (provider, request): (_, CompletionRequest) =
        models.resolve(Some(model), "You are a writer.", "Write a haiku").unwrap();
    provider.complete(&request).await
}

#[tokio::test]
async fn openai_compatible_calls_send_roles_and_report_usage() {
    let fake = FakeModels::start().await;
    let models = Models::new(&config(&fake)).unwrap();
    let done = call(&models, "openai:gpt-4o-mini").await.unwrap();
    assert_eq!(done.text, "Answer to: Write a haiku");
    let usage = done.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (11, 22));
    let sent = &fake.calls()[0];
    assert_eq!(sent.format, "openai");
    assert_eq!(sent.body["model"], "gpt-4o-mini");
    assert_eq!(sent.body["max_tokens"], 1024);
    assert_eq!(
        sent.body["messages"][0],
        serde_json::json!({"role": "system", "content": "You are a writer."})
    );
    assert_eq!(
        sent.body["messages"][1],
        serde_json::json!({"role": "user", "content": "Write a haiku"})
    );
}

#[tokio::test]
async fn anthropic_calls_use_its_headers_and_system_field() {
    let fake = FakeModels::start().await;
    let models = Models::new(&config(&fake)).unwrap();
    fake.script([Script::Answer("Autumn moonlight".into())]);
    let done = call(&models, "anthropic:claude-sonnet-4-5").await.unwrap();
    assert_eq!(done.text, "Autumn moonlight");
    assert_eq!(done.usage.map(|u| (u.input_tokens, u.output_tokens)), Some((13, 24)));
    let sent = &fake.calls()[0];
    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
    assert_eq!(sent.body["system"], "You are a writer.");
    assert_eq!(
        sent.body["messages"],
        serde_json::json!([{"role": "user", "content": "Write a haiku"}])
    );
    assert_eq!(sent.body["max_tokens"], 1024);
}

#[tokio::test]
async fn bad_keys_and_unknown_models_are_permanent() {
    let fake = FakeModels::start().await;
    let mut wrong = config(&fake);
    wrong.provider_mut("openai").api_key = Some("sk-wrong".into());
    wrong.provider_mut("anthropic").api_key = None;
    let models = Models::new(&wrong).unwrap();
    assert!(matches!(call(&models, "openai:gpt-4o-mini").await, Err(ModelError::Permanent { .. })));
    let missing_key = call(&models, "anthropic:claude").await.unwrap_err();
    assert!(missing_key.to_string().contains("anthropic_api_key"), "{missing_key}");
    let models = Models::new(&config(&fake)).unwrap();
    assert!(matches!(call(&models, "openai:missing").await, Err(ModelError::Permanent { .. })));
}

#[tokio::test]
async fn rate_limits_server_errors_and_timeouts_are_transient() {
    let fake = FakeModels::start().await;
    let models = Models::new(&config(&fake)).unwrap();
    fake.script([
        Script::Status(429, Some(7)),
        Script::Status(500, None),
        Script::Status(529, None),
        Script::Hang(Duration::from_secs(2)),
    ]);
    assert_eq!(
        call(&models, "openai:m").await.unwrap_err(),
        ModelError::Transient {
            reason: "the OpenAI-compatible provider answered 429 Too Many Requests: scripted 429"
                .into(),
            retry_after: Some(Duration::from_secs(7)),
        }
    );
    assert!(matches!(
        call(&models, "openai:m").await,
        Err(ModelError::Transient { retry_after: None, .. })
    ));
    assert!(matches!(call(&models, "anthropic:m").await, Err(ModelError::Transient { .. })));
    let timed_out = call(&models, "openai:m").await.unwrap_err();
    assert!(
        matches!(&timed_out, ModelError::Transient { reason, .. } if reason.contains("timed out")),
        "{timed_out}"
    );
}

#[tokio::test]
async fn echo_needs_no_provider_at_all() {
    let models = Models::new(&ModelsConfig::default()).unwrap();
    let done = call(&models, "echo").await.unwrap();
    assert!(done.text.contains("No model was called"));
}
