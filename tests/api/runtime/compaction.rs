//! Long runs: a run whose conversation nears its model's context window has its older steps
//! compacted into a summary step, keeps its task in every request, never sends more than the
//! window holds, and still completes.

use serde_json::{Value, json};

use super::models;
use super::tools::{acting_agent, call, calls_of, finished, kinds, start, steps};
use crate::fake_models::Script;
use crate::helpers::{TestApp, TestDb, app_with, backend_tests};

backend_tests! { db;
    forty_tool_calls_on_a_small_window_are_compacted_and_the_run_completes,
    an_anthropic_run_is_counted_by_the_provider_before_it_is_compacted,
}

/// The model with a small window, as the fake sees it, and its window in tokens.
const SMALL: &str = "small-window";
const WINDOW: u32 = 4_000;
/// The answer's bound of every call.
const ANSWER: u32 = 256;
const CALLS: usize = 40;
const TASK: &str = "Read your notes forty times";

/// The `n`th call: a memory read whose (ignored) text makes each call distinct and long.
pub(crate) fn note(n: usize) -> Script {
    let text =
        format!("Note {n}: {}", "the quarterly figures still need a careful check. ".repeat(5));
    call("memory", json!({"action": "read", "text": text}))
}

async fn small_window_app(db: TestDb) -> TestApp {
    app_with(db, |o| {
        o.max_tokens = Some(ANSWER);
        o.context_windows = vec![(format!("openai:{SMALL}"), WINDOW)];
    })
    .await
}

async fn forty_tool_calls_on_a_small_window_are_compacted_and_the_run_completes(db: TestDb) {
    let app = small_window_app(db).await;
    let model = format!("openai:{SMALL}");
    let user = acting_agent(&app, "long@example.com", "long", &model, &["memory"]).await;
    app.patch("/api/agents/long", &user, json!({"max_steps": 50})).await.assert_status(200);
    let answers = (1..=CALLS).map(note).chain([Script::Answer("All forty read.".into())]);
    models(&app).script_for(SMALL, answers);
    let task = app.post("/api/agents/long/backlog", &user, json!({"title": TASK})).await;
    let id = task.assert_status(201)["id"].clone();
    start(&app, &user, "long").await;
    let done = finished(&app, &user, "long", &id).await;
    assert_eq!(
        (done["status"].as_str(), done["result"].as_str()),
        (Some("complete"), Some("All forty read.")),
        "{done}"
    );

    let steps = steps(&app, &user, "long", &id).await;
    let kinds = kinds(&steps);
    assert_eq!(kinds.iter().filter(|k| **k == "tool").count(), CALLS, "{kinds:?}");
    let compactions: Vec<&Value> = steps.iter().filter(|s| s["kind"] == "compaction").collect();
    assert!(!compactions.is_empty(), "no compaction in {kinds:?}");
    for step in &compactions {
        let through = step["compacted_through"].as_i64().expect("the steps it covers");
        assert!(through < step["seq"].as_i64().unwrap(), "{step}");
        assert!(step["output"].as_str().is_some_and(|s| !s.is_empty()), "{step}");
        assert!(step["cost"]["model"] == model.as_str(), "priced as a call: {step}");
    }

    let calls = calls_of(&app, SMALL);
    let asked = calls.iter().filter(|c| c.forbids_tools()).count();
    assert_eq!(asked, compactions.len(), "one call for each compaction");
    assert_eq!(calls.len(), CALLS + 1 + asked, "each call once");
    for (n, call) in calls.iter().enumerate() {
        assert_eq!(call.user(), TASK, "call {n} lost the task");
        assert_eq!(call.body["max_tokens"], ANSWER);
        let needed = call.text_bytes() + ANSWER as usize;
        assert!(needed <= WINDOW as usize, "call {n} needs {needed} tokens: {}", call.body);
    }
    // Every tool result a request carries answers a call the same request carries.
    for call in &calls {
        let asked: Vec<String> = call.assistant_calls().into_iter().map(|(id, _)| id).collect();
        for (id, _) in call.tool_results() {
            assert!(asked.contains(&id), "result {id} without its call: {}", call.body);
        }
    }
}

/// Anthropic publishes no tokenizer: its requests are bounded by their bytes, several times
/// their real count. A run whose byte bound crowds the window is counted by the provider
/// (`count_tokens`) first, and compacted only if the count crowds it too.
///
/// The window is 8,000 tokens (crowded above 6,000 with the answer). The run sends a task of
/// 4,000 bytes and twelve notes of about 300 bytes: its last requests are well over 6,000 bytes
/// but about 3,000 tokens as the fake counts them.
async fn an_anthropic_run_is_counted_by_the_provider_before_it_is_compacted(db: TestDb) {
    const CLAUDE: &str = "claude-haiku-4-5";
    const NOTES: usize = 12;
    let app = app_with(db, |o| {
        o.max_tokens = Some(ANSWER);
        o.context_windows = vec![(format!("anthropic:{CLAUDE}"), 8_000)];
    })
    .await;
    models(&app).count_tokens();
    let model = format!("anthropic:{CLAUDE}");
    let user = acting_agent(&app, "counted@example.com", "counted", &model, &["memory"]).await;
    app.patch("/api/agents/counted", &user, json!({"max_steps": 20})).await.assert_status(200);
    let answers = (1..=NOTES).map(note).chain([Script::Answer("Twelve read.".into())]);
    models(&app).script_for(CLAUDE, answers);
    let description = "Read each note and keep the figures in mind for the report. ".repeat(66);
    let task = app
        .post(
            "/api/agents/counted/backlog",
            &user,
            json!({"title": TASK, "description": description}),
        )
        .await;
    let id = task.assert_status(201)["id"].clone();
    start(&app, &user, "counted").await;
    let done = finished(&app, &user, "counted", &id).await;
    assert_eq!(done["status"], "complete", "{done}");

    let calls = calls_of(&app, CLAUDE);
    let biggest = calls.iter().map(|c| c.text_bytes()).max().unwrap();
    assert!(biggest > 6_000, "the byte bound crowds the window: {biggest} bytes");
    let counted = models(&app).counted();
    assert!(!counted.is_empty(), "the provider counted the crowded requests");
    for body in &counted {
        let tokens = support::fake_tokens::anthropic_input_tokens(body);
        assert!(tokens < 5_000, "counted far below the window: {tokens}");
    }
    let steps = steps(&app, &user, "counted", &id).await;
    let kinds = kinds(&steps);
    assert!(!kinds.contains(&"compaction"), "compacted although it fits: {kinds:?}");
    assert!(calls.iter().all(|c| !c.forbids_tools()), "no summary asked for");
    assert_eq!(calls.len(), NOTES + 1, "each call once");
}
