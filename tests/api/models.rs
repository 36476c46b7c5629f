//! The model providers against the fake model server: both wire formats, tool calls, usage,
//! and how each failure is sorted.

use std::sync::Arc;
use std::time::Duration;

use agentcore::models::{
    Completion, CompletionRequest, Message, ModelError, ModelProvider, Models, ModelsConfig,
    ToolCall, ToolSpec,
};
use serde_json::json;

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

async fn call(models: &Models, model: &str) -> Result<Completion, ModelError> {
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
    // Text blocks, so each can carry a cache breakpoint (see `runtime::caching`).
    let cache = serde_json::json!({"type": "ephemeral"});
    assert_eq!(
        sent.body["system"],
        serde_json::json!([{"type": "text", "text": "You are a writer.", "cache_control": cache}])
    );
    assert_eq!(
        sent.body["messages"],
        serde_json::json!([{"role": "user", "content": [
            {"type": "text", "text": "Write a haiku", "cache_control": cache}
        ]}])
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
            status: Some(429),
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

/// The weather tool, offered to `model`; the task asks for Paris.
fn weather_request(models: &Models, model: &str) -> (Arc<dyn ModelProvider>, CompletionRequest) {
    let (provider, mut request) =
        models.resolve(Some(model), "You are a forecaster.", "Weather in Paris?").unwrap();
    request.tools = vec![ToolSpec {
        name: "weather".into(),
        description: "Today's weather in a city.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }];
    (provider, request)
}

/// The answer's calls and their results appended to the conversation.
fn answered(request: &mut CompletionRequest, done: Completion, results: &[&str]) {
    let ids: Vec<String> = done.tool_calls.iter().map(|c| c.id.clone()).collect();
    request.messages.push(Message::Assistant { text: done.text, tool_calls: done.tool_calls });
    for (call_id, content) in ids.into_iter().zip(results) {
        request.messages.push(Message::ToolResult {
            call_id,
            content: (*content).to_owned(),
            is_error: false,
        });
    }
}

#[tokio::test]
async fn openai_tool_calls_round_trip_through_their_results() {
    let fake = FakeModels::start().await;
    let models = Models::new(&config(&fake)).unwrap();
    fake.script_for(
        "tooluser",
        [
            Script::Call { name: "weather".into(), arguments: json!({"city": "Paris"}) },
            Script::AnswerFromToolResult,
        ],
    );
    let (provider, mut request) = weather_request(&models, "openai:tooluser");
    let done = provider.complete(&request).await.unwrap();
    assert_eq!(done.text, "");
    assert_eq!(
        done.tool_calls,
        [ToolCall {
            id: "call_1".into(),
            name: "weather".into(),
            arguments: r#"{"city":"Paris"}"#.into()
        }]
    );
    let sent = &fake.calls()[0];
    assert_eq!(sent.tools(), ["weather"]);
    assert_eq!(
        sent.body["tools"],
        json!([{"type": "function", "function": {
            "name": "weather",
            "description": "Today's weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }}])
    );

    answered(&mut request, done, &["12°C, light rain"]);
    let done = provider.complete(&request).await.unwrap();
    assert_eq!(done.text, "Done: 12°C, light rain");
    assert!(done.tool_calls.is_empty());
    let sent = &fake.calls()[1];
    assert_eq!(sent.user(), "Weather in Paris?");
    assert_eq!(sent.assistant_calls(), [("call_1".to_owned(), "weather".to_owned())]);
    assert_eq!(sent.tool_results(), [("call_1".to_owned(), "12°C, light rain".to_owned())]);
    assert_eq!(
        sent.body["messages"][2],
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1",
            "type": "function",
            "function": {"name": "weather", "arguments": r#"{"city":"Paris"}"#},
        }]})
    );
}

#[tokio::test]
async fn anthropic_tool_calls_round_trip_through_their_results() {
    let fake = FakeModels::start().await;
    let models = Models::new(&config(&fake)).unwrap();
    fake.script_for(
        "tooluser",
        [
            Script::Calls(vec![
                ("weather".into(), json!({"city": "Paris"})),
                ("weather".into(), json!({"city": "Lyon"})),
            ]),
            Script::AnswerFromToolResult,
        ],
    );
    let (provider, mut request) = weather_request(&models, "anthropic:tooluser");
    let done = provider.complete(&request).await.unwrap();
    let calls: Vec<(&str, &str)> =
        done.tool_calls.iter().map(|c| (c.id.as_str(), c.arguments.as_str())).collect();
    assert_eq!(calls, [("toolu_1", r#"{"city":"Paris"}"#), ("toolu_2", r#"{"city":"Lyon"}"#)]);
    let sent = &fake.calls()[0];
    assert_eq!(sent.tools(), ["weather"]);
    assert_eq!(
        sent.body["tools"],
        json!([{
            "name": "weather",
            "description": "Today's weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            "cache_control": {"type": "ephemeral"},
        }])
    );

    answered(&mut request, done, &["12°C", "15°C"]);
    let done = provider.complete(&request).await.unwrap();
    assert_eq!(done.text, "Done: 15°C");
    let sent = &fake.calls()[1];
    assert_eq!(sent.user(), "Weather in Paris?");
    let ids =
        |pairs: Vec<(String, String)>| pairs.into_iter().map(|(id, _)| id).collect::<Vec<_>>();
    assert_eq!(ids(sent.assistant_calls()), ["toolu_1", "toolu_2"]);
    assert_eq!(
        sent.tool_results(),
        [("toolu_1".to_owned(), "12°C".to_owned()), ("toolu_2".to_owned(), "15°C".to_owned())]
    );
    // Both results travel in one user turn, right after the answer that called for them.
    assert_eq!(sent.body["messages"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn no_tools_field_is_sent_when_none_are_offered() {
    let fake = FakeModels::start().await;
    let models = Models::new(&config(&fake)).unwrap();
    call(&models, "openai:m").await.unwrap();
    call(&models, "anthropic:m").await.unwrap();
    for sent in fake.calls() {
        assert!(!sent.has_tools(), "{}: {}", sent.format, sent.body);
        assert!(sent.tools().is_empty());
    }
}

#[tokio::test]
async fn malformed_arguments_come_back_verbatim_from_the_openai_format() {
    let fake = FakeModels::start().await;
    let models = Models::new(&config(&fake)).unwrap();
    let raw = Script::RawCall { name: "weather".into(), arguments: r#"{"city": "Par"#.into() };
    fake.script([raw.clone(), raw]);
    let (provider, request) = weather_request(&models, "openai:m");
    let done = provider.complete(&request).await.unwrap();
    assert_eq!(done.tool_calls[0].arguments, r#"{"city": "Par"#);
    // Anthropic's arguments are an object: the fake sends the text as a JSON string instead,
    // and it comes back as that string's JSON text.
    let (provider, request) = weather_request(&models, "anthropic:m");
    let done = provider.complete(&request).await.unwrap();
    assert_eq!(done.tool_calls[0].arguments, r#""{\"city\": \"Par""#);
}

#[tokio::test]
async fn a_model_with_its_own_script_leaves_the_shared_one_to_the_others() {
    let fake = FakeModels::start().await;
    let models = Models::new(&config(&fake)).unwrap();
    fake.repeat_for("looper", Script::Call { name: "weather".into(), arguments: json!({}) });
    fake.script([Script::Answer("shared".into())]);
    let (provider, request) = weather_request(&models, "openai:looper");
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(provider.complete(&request).await.unwrap().tool_calls[0].id.clone());
    }
    assert_eq!(ids, ["call_1", "call_2", "call_3"]);
    assert_eq!(call(&models, "openai:other").await.unwrap().text, "shared");
    assert_eq!(call(&models, "openai:other").await.unwrap().text, "Answer to: Write a haiku");
}

crate::helpers::backend_tests! { db;
    the_model_list_names_each_provider_and_whether_it_has_a_key_never_the_key,
    a_provider_without_its_key_is_refused_naming_the_usable_ones,
}

/// `GET /api/models`, for any member, with `anthropic` configured without its key.
async fn the_model_list_names_each_provider_and_whether_it_has_a_key_never_the_key(
    db: crate::helpers::TestDb,
) {
    let app = crate::helpers::app_with(db, |o| o.keyless = vec!["anthropic".into()]).await;
    app.request(reqwest::Method::GET, "/api/models", None, None)
        .await
        .assert_error(401, "unauthorized");
    let user = app.register("models@example.com").await;
    let reply = app.get("/api/models", &user).await;
    let list = reply.assert_status(200);
    assert!(!list.to_string().contains(OPENAI_KEY), "no key in {list}");
    assert!(!list.to_string().contains(ANTHROPIC_KEY), "no key in {list}");
    assert_eq!(list["default_model"], "echo");
    assert_eq!(list["usable_providers"], json!(["echo", "openai"]));
    let models: Vec<&str> =
        list["models"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(models[0], "echo");
    assert!(models.contains(&crate::helpers::PRICED_MODEL), "{models:?}");
    assert!(!models.iter().any(|m| m.starts_with("anthropic:")), "{models:?}");
    let provider = |name: &str| {
        list["providers"].as_array().unwrap().iter().find(|p| p["name"] == name).cloned().unwrap()
    };
    let anthropic = provider("anthropic");
    assert_eq!(anthropic["kind"], "anthropic");
    assert_eq!(
        (&anthropic["has_key"], &anthropic["needs_key"], &anthropic["usable"]),
        (&json!(false), &json!(true), &json!(false))
    );
    let openai = provider("openai");
    assert_eq!((&openai["has_key"], &openai["usable"]), (&json!(true), &json!(true)));
    assert_eq!(openai["base_url"], app.options.models.openai_base());
}

async fn a_provider_without_its_key_is_refused_naming_the_usable_ones(db: crate::helpers::TestDb) {
    let app = crate::helpers::app_with(db, |o| o.keyless = vec!["anthropic".into()]).await;
    let user = app.register("keyless@example.com").await;
    let agent = json!({"id": "a", "name": "A", "role_prompt": "Answer.", "channel": "a",
                       "model": "anthropic:claude-sonnet-4-5"});
    let refused = app.post("/api/agents", &user, agent).await;
    refused.assert_error(400, "validation_failed");
    let problem = refused.body["error"]["details"]["model"].as_str().unwrap();
    assert_eq!(
        problem,
        "names provider 'anthropic', which has no API key on this server (usable: echo, openai)"
    );
    let listed = app.get("/api/agents", &user).await;
    assert_eq!(listed.assert_status(200)["agents"], json!([]), "nothing was created");
    let agent = json!({"id": "b", "name": "B", "role_prompt": "Answer.", "channel": "b",
                       "model": crate::helpers::PRICED_MODEL});
    app.post("/api/agents", &user, agent).await.assert_status(201);
}
