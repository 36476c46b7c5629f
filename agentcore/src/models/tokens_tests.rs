//! The bound against OpenAI's own accounting of a chat request, over a sample of realistic
//! requests: never below it, and within 1.5 times it.
//!
//! The reference is computed from the request as sent (the wire body), the way OpenAI's
//! cookbook counts a chat request ("How to count tokens with tiktoken"): 3 tokens per message
//! plus its fields' texts, 3 for the reply's priming, and the function definitions in the
//! format the models are shown them (7 per function, its `name:description`, 3 for its
//! properties, then per property 3 and its `key:type:description`, enum items at 3 each, 12
//! to close). Tool calls of earlier answers count their id, name and arguments.

use serde_json::{Value, json};

use super::openai::request_body;
use super::tokens::{Counter, Encoding};
use super::{CompletionRequest, Message, ToolCall, ToolSpec};
use crate::domain::onboarding::TEMPLATES;
use crate::domain::steps::system_prompt;
use crate::domain::tools::ToolName;
use crate::tools::builtin;

/// OpenAI's accounting of `body` in `encoding`.
fn reference(encoding: Encoding, body: &Value) -> usize {
    let counter = Counter::default();
    let count = |text: &str| counter.count(encoding, text);
    let text = |value: &Value| value.as_str().map_or(0, count);
    let mut tokens = 3;
    for message in body["messages"].as_array().unwrap() {
        tokens += 3 + text(&message["role"]) + text(&message["content"]);
        tokens += text(&message["tool_call_id"]);
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            tokens += text(&call["id"])
                + text(&call["function"]["name"])
                + text(&call["function"]["arguments"]);
        }
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        let function = &tool["function"];
        let name = function["name"].as_str().unwrap();
        let description = function["description"].as_str().unwrap_or_default();
        tokens += 7 + count(&format!("{name}:{description}"));
        let properties = function["parameters"]["properties"].as_object();
        if let Some(properties) = properties.filter(|p| !p.is_empty()) {
            tokens += 3;
            for (key, property) in properties {
                tokens += 3;
                let kind = property["type"].as_str().unwrap_or_default();
                let about = property["description"].as_str().unwrap_or_default();
                for item in property["enum"].as_array().into_iter().flatten() {
                    tokens += 3 + text(item);
                }
                if property["enum"].is_array() {
                    tokens -= 3;
                }
                tokens += count(&format!("{key}:{kind}:{about}"));
            }
        }
        tokens += 12;
    }
    tokens
}

fn builtin_tools() -> Vec<ToolSpec> {
    ToolName::ALL.iter().map(|tool| builtin::spec(*tool)).collect()
}

fn request(system: String, messages: Vec<Message>, tools: Vec<ToolSpec>) -> CompletionRequest {
    CompletionRequest {
        model: "gpt-4o-mini".into(),
        system,
        messages,
        tools,
        tool_choice: Default::default(),
        max_tokens: 1024,
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: arguments.to_string() }
}

fn result(id: &str, content: &str) -> Message {
    Message::ToolResult { call_id: id.into(), content: content.into(), is_error: false }
}

/// Realistic requests: each template's role prompt with the built-in tools and a task, and
/// runs with tool results of several kinds (a web page, JSON, code, other scripts, a table).
fn sample() -> Vec<CompletionRequest> {
    let tools = builtin_tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let mut requests = Vec::new();
    let tasks = [
        "Draft the launch announcement for our new invoicing feature. Keep it under 200 words, \
         mention the free trial and link to https://example.com/invoicing.",
        "Summarise yesterday's support tickets by theme and post the three biggest problems in \
         the team channel with one suggested fix each.",
        "Review the onboarding email sequence and list what is missing compared to our pricing \
         page.",
    ];
    for (template, task) in TEMPLATES.iter().zip(tasks.iter().cycle()) {
        let prompt = template.role_prompt.replace("{company}", "Acme Analytics");
        let memory = "- The newsletter goes out on Tuesdays.\n- Use British spelling.";
        let system = system_prompt(&prompt, memory, &names, &[], &[]);
        requests.push(request(system, vec![Message::User((*task).into())], tools.clone()));
    }
    let page = "<html><head><title>Pricing - Acme</title></head><body><h1>Plans</h1>\
        <p>Starter: $9 per month, 3 seats, email support.</p><p>Team: $49 per month, 25 seats, \
        priority support, SSO.</p><ul><li>Annual billing saves 20%</li><li>Cancel anytime</li>\
        </ul></body></html>"
        .repeat(6);
    let data = json!({"tickets": (0..25).map(|i| json!({
        "id": 4100 + i, "subject": format!("Export to CSV fails for report {i}"),
        "priority": if i % 3 == 0 { "high" } else { "normal" }, "created_at": "2026-11-27T09:12:44Z",
        "tags": ["export", "reports"]})).collect::<Vec<_>>()})
    .to_string();
    let code =
        "fn total(items: &[Item]) -> Money {\n    items.iter().map(|i| i.price * i.quantity)\
        .sum()\n}\n\n#[test]\nfn totals_add_up() {\n    assert_eq!(total(&[]), Money::ZERO);\n}\n"
            .repeat(8);
    let other_scripts = "Привет! Мы получили ваш запрос и ответим в течение дня. \
        ご連絡ありがとうございます。担当者より折り返しご連絡いたします。 \
        Vielen Dank für Ihre Nachricht – wir melden uns in Kürze. 🎉🚀"
        .repeat(5);
    let table = (1..=40)
        .map(|i| {
            format!(
                "| {i} | 2026-11-{:02} | {} | {:.2} |",
                i % 28 + 1,
                i * 37 % 101,
                i as f64 * 3.7
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let system =
        system_prompt(&TEMPLATES[0].role_prompt.replace("{company}", "Acme"), "", &names, &[], &[]);
    for (i, content) in [page, data, code, other_scripts, table].into_iter().enumerate() {
        let id = format!("call_{i}");
        let messages = vec![
            Message::User("Find what changed on the pricing page and tell the team.".into()),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call(
                    &id,
                    "http_fetch",
                    json!({"url": "https://example.com/pricing"}),
                )],
            },
            result(&id, &content),
            Message::Assistant {
                text: "I read the page; posting a summary now.".into(),
                tool_calls: vec![call(
                    &format!("{id}b"),
                    "post_message",
                    json!({"text": "Pricing changed: Team is now $49."}),
                )],
            },
            result(&format!("{id}b"), "posted"),
        ];
        requests.push(request(system.clone(), messages, tools.clone()));
    }
    requests.push(request("You are terse.".into(), vec![Message::User("Say hi.".into())], vec![]));
    requests
}

#[test]
fn the_bound_is_never_below_openais_count_and_within_one_and_a_half_times_it() {
    let counter = Counter::default();
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        for (i, request) in sample().iter().enumerate() {
            let reported = reference(encoding, &request_body(request));
            let bound = counter.request(encoding, request);
            let ratio = bound as f64 / reported as f64;
            assert!(bound >= reported, "{encoding:?} request {i}: {bound} < {reported}");
            assert!(ratio <= 1.5, "{encoding:?} request {i}: {bound} is {ratio:.2}× {reported}");
            let bytes = request.text_bytes();
            if i < 10 {
                assert!(bytes as f64 / reported as f64 > 2.5, "the bytes were far above: {bytes}");
            }
        }
    }
}
