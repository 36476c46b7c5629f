//! Prompt caching through the HTTP API, against the fake model server's simulated prompt
//! caches: Anthropic's requests carry `cache_control` on the last tool, the system prompt and
//! the last block, so a run's second call reads its first from the cache; OpenAI's requests
//! repeat the same prefix byte for byte, so its cache finds it. The cache tokens each answer
//! reports are stored per step, summed on the task, priced at the model's cache rates (the
//! example prices the server starts with), shown by `GET /api/usage` and counted by budgets.

use serde_json::{Value, json};

use super::models;
use super::tools::{acting_agent, call, calls_of, finished, start, steps};
use crate::fake_models::{Call, Script};
use crate::helpers::{TestApp, User, backend_tests};

backend_tests! { app;
    anthropic_calls_mark_the_stable_prefix_and_its_cache_tokens_are_priced_at_the_cache_rates,
    openai_calls_repeat_the_same_prefix_and_cached_tokens_are_priced_at_the_cached_rate,
}

/// A role prompt long enough to be cached (over 1,024 tokens as the fake counts them).
fn long_role() -> String {
    let rules = (1..=120).map(|n| format!("Rule {n}: keep release notes short, plain, exact."));
    format!("You are Acme's release writer.\n{}", rules.collect::<Vec<_>>().join("\n"))
}

/// The example price of `model` (micro-dollars per million input, output, cache-read and
/// cache-write tokens), as the server is configured with it.
fn example_price(model: &str) -> [i128; 4] {
    let (_, input, output, read, write) =
        agentcore::models::EXAMPLE_PRICES.into_iter().find(|(name, ..)| *name == model).unwrap();
    [input, output, read, write].map(|usd| (usd * 1e6).round() as i128)
}

/// The tokens of a stored usage: input, output, cache read, cache write.
fn tokens(usage: &Value) -> [i64; 4] {
    ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
        .map(|field| usage[field].as_i64().unwrap_or_else(|| panic!("{field} in {usage}")))
}

/// What `usage` costs at `price`, rounded up to the micro-dollar, as the docs say.
fn priced(usage: [i64; 4], price: [i128; 4]) -> i64 {
    let total: i128 =
        usage.iter().zip(price).map(|(tokens, rate)| i128::from(*tokens) * rate).sum();
    i64::try_from((total + 999_999) / 1_000_000).unwrap()
}

/// An agent on `model` with the long role prompt, the `memory` tool and a budget; a task in
/// which it calls `memory` once and then answers; the task's model steps once it is complete.
async fn one_tool_call_run(app: &TestApp, model: &str, id: &str) -> (User, Value, Vec<Value>) {
    let user = acting_agent(app, &format!("{id}@example.com"), id, model, &["memory"]).await;
    let patch = json!({"role_prompt": long_role(), "budget_monthly_usd": 10.0});
    app.patch(&format!("/api/agents/{id}"), &user, patch).await.assert_status(200);
    let name = model.split_once(':').unwrap().1;
    models(app).script_for(
        name,
        [
            call("memory", json!({"action": "append", "text": "Ship on Thursday."})),
            Script::Answer("Noted.".into()),
        ],
    );
    let task = app.add_task(&user, id, "Note the release day", 0).await;
    start(app, &user, id).await;
    let done = finished(app, &user, id, &task["id"]).await;
    assert_eq!(done["status"], "complete", "{done}");
    let model_steps = steps(app, &user, id, &task["id"])
        .await
        .into_iter()
        .filter(|s| s["kind"] == "model")
        .collect::<Vec<_>>();
    assert_eq!(model_steps.len(), 2, "{model_steps:?}");
    (user, done, model_steps)
}

/// Where the blocks marked `cache_control` are in an Anthropic request.
fn breakpoints(call: &Call) -> Vec<String> {
    let marked = |v: &Value| v.get("cache_control") == Some(&json!({"type": "ephemeral"}));
    let mut found = Vec::new();
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    for (i, tool) in list(&call.body["tools"]).iter().enumerate() {
        if marked(tool) {
            found.push(format!("tools[{i}]"));
        }
    }
    for (i, block) in list(&call.body["system"]).iter().enumerate() {
        if marked(block) {
            found.push(format!("system[{i}]"));
        }
    }
    for (m, turn) in list(&call.body["messages"]).iter().enumerate() {
        for (i, block) in list(&turn["content"]).iter().enumerate() {
            if marked(block) {
                found.push(format!("messages[{m}][{i}]"));
            }
        }
    }
    found
}

/// The fake's usage of a call, as it answered it.
fn answered(call: &Call) -> &Value {
    call.usage.as_ref().expect("an answered call")
}

/// Checks the report's and the budget's sums against the steps'.
async fn usage_and_budget_count(app: &TestApp, user: &User, model: &str, steps: &[Value]) {
    let sum = |field: &str| steps.iter().map(|s| s["usage"][field].as_i64().unwrap()).sum::<i64>();
    let cost: i64 = steps.iter().map(|s| s["cost"]["cost_micros"].as_i64().unwrap()).sum();
    let report = app.get("/api/usage?group_by=model", user).await.assert_status(200).clone();
    let row = report["rows"].as_array().unwrap().iter().find(|r| r["key"] == model).unwrap();
    for field in ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"] {
        assert_eq!(row[field].as_i64(), Some(sum(field)), "{field}: {row}");
        assert_eq!(report["total"][field].as_i64(), Some(sum(field)), "{field}: {report}");
    }
    assert_eq!(row["cost_micros"].as_i64(), Some(cost), "{row}");
    let budget = app.get("/api/budget", user).await.assert_status(200).clone();
    assert_eq!(budget["spent_micros"].as_i64(), Some(cost), "the budget counts them: {budget}");
}

async fn anthropic_calls_mark_the_stable_prefix_and_its_cache_tokens_are_priced_at_the_cache_rates(
    app: TestApp,
) {
    let model = "anthropic:claude-sonnet-4-5";
    let (user, done, model_steps) = one_tool_call_run(&app, model, "cacher").await;
    let calls = calls_of(&app, "claude-sonnet-4-5");
    assert_eq!(calls.len(), 2);
    // The last tool, the system prompt, the last block: the task, then the tool's result.
    assert_eq!(breakpoints(&calls[0]), ["tools[0]", "system[0]", "messages[0][0]"]);
    assert_eq!(breakpoints(&calls[1]), ["tools[0]", "system[0]", "messages[2][0]"]);
    assert_eq!(calls[1].body["messages"][2]["content"][0]["type"], "tool_result");

    // The first call wrote the prefix into the cache; the second read all of it back.
    let (first, second) = (answered(&calls[0]), answered(&calls[1]));
    let written = first["cache_creation_input_tokens"].as_i64().unwrap();
    assert!(written >= 1024, "{first}");
    assert_eq!(first["cache_read_input_tokens"], 0, "{first}");
    assert_eq!(second["cache_read_input_tokens"].as_i64(), Some(written), "{second}");
    assert!(second["cache_creation_input_tokens"].as_i64().unwrap() > 0, "{second}");

    let price = example_price(model);
    for (step, call) in model_steps.iter().zip(&calls) {
        let reported = answered(call);
        let stored = tokens(&step["usage"]);
        let expected = [
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ]
        .map(|field| reported[field].as_i64().unwrap());
        assert_eq!(stored, expected, "the step keeps the four counts apart: {step}");
        assert_eq!(step["cost"]["cost_micros"].as_i64(), Some(priced(stored, price)), "{step}");
        assert_eq!(step["cost"]["model"], model);
    }
    // Priced as plain input, the cache's tokens would cost something else.
    let [input, output, _, _] = price;
    let plain = priced(tokens(&model_steps[1]["usage"]), [input, output, input, input]);
    assert_ne!(model_steps[1]["cost"]["cost_micros"].as_i64(), Some(plain));

    let summed = tokens(&done["usage"]);
    let each: Vec<[i64; 4]> = model_steps.iter().map(|s| tokens(&s["usage"])).collect();
    assert_eq!(summed, [0, 1, 2, 3].map(|i| each[0][i] + each[1][i]), "the task sums its steps");
    usage_and_budget_count(&app, &user, model, &model_steps).await;
}

async fn openai_calls_repeat_the_same_prefix_and_cached_tokens_are_priced_at_the_cached_rate(
    app: TestApp,
) {
    let model = "openai:gpt-4o-mini";
    let (user, done, model_steps) = one_tool_call_run(&app, model, "prefixer").await;
    let calls = calls_of(&app, "gpt-4o-mini");
    assert_eq!(calls.len(), 2);
    // Byte for byte: the tools and every message of the first call open the second.
    let (first, second) = (&calls[0].body, &calls[1].body);
    assert_eq!(first["tools"].to_string(), second["tools"].to_string());
    let sent = first["messages"].as_array().unwrap();
    let again = &second["messages"].as_array().unwrap()[..sent.len()];
    assert_eq!(serde_json::to_string(sent).unwrap(), serde_json::to_string(again).unwrap());
    assert_eq!(second["messages"].as_array().unwrap().len(), sent.len() + 2);

    let cached = answered(&calls[1])["prompt_tokens_details"]["cached_tokens"].as_i64().unwrap();
    assert!(cached >= 1024, "the second call's prefix was found: {:?}", answered(&calls[1]));
    assert_eq!(answered(&calls[0])["prompt_tokens_details"]["cached_tokens"], 0);

    let price = example_price(model);
    for (step, call) in model_steps.iter().zip(&calls) {
        let reported = answered(call);
        let prompt = reported["prompt_tokens"].as_i64().unwrap();
        let hit = reported["prompt_tokens_details"]["cached_tokens"].as_i64().unwrap();
        let completion = reported["completion_tokens"].as_i64().unwrap();
        let stored = tokens(&step["usage"]);
        // `prompt_tokens` includes the cached ones: stored apart, they never overlap.
        assert_eq!(stored, [prompt - hit, completion, hit, 0], "{step}");
        assert_eq!(step["cost"]["cost_micros"].as_i64(), Some(priced(stored, price)), "{step}");
    }
    assert_eq!(tokens(&done["usage"])[2], cached, "the task sums its steps");
    usage_and_budget_count(&app, &user, model, &model_steps).await;
}
