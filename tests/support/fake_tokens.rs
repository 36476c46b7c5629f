//! Token counts as the fake model server reports them, when asked to count
//! ([`FakeModels::count_tokens`](crate::fake_models::FakeModels::count_tokens)).
//!
//! - OpenAI's format: OpenAI's accounting of a chat request (its cookbook's, "How to count
//!   tokens with tiktoken"), over the request as received, in `o200k_base`: 3 tokens per
//!   message plus its texts, 3 for the reply's priming, and each function as the models are
//!   shown them.
//! - Anthropic's, whose tokenizer is not published: every text of the request in
//!   `cl100k_base`, times 1.2, plus 4 per message and 10 per tool: a stand-in with the shape of
//!   Claude's counts (a smaller vocabulary than OpenAI's newer one). It is what the fake's
//!   `count_tokens` answers and what its answers report as `input_tokens`, so the two agree as
//!   Anthropic's do.

use serde_json::Value;

fn count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len()
}

fn text(value: &Value) -> usize {
    value.as_str().map_or(0, count)
}

/// OpenAI's count of a chat completions request body.
pub fn openai_prompt_tokens(body: &Value) -> i64 {
    let mut tokens = 3;
    for message in body["messages"].as_array().into_iter().flatten() {
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
        let name = function["name"].as_str().unwrap_or_default();
        let description = function["description"].as_str().unwrap_or_default();
        tokens += 7 + count(&format!("{name}:{description}"));
        if let Some(properties) = function["parameters"]["properties"].as_object() {
            tokens += 3;
            for (key, property) in properties {
                let kind = property["type"].as_str().unwrap_or_default();
                let about = property["description"].as_str().unwrap_or_default();
                tokens += 3 + count(&format!("{key}:{kind}:{about}"));
            }
        }
        tokens += 12;
    }
    i64::try_from(tokens).unwrap_or(i64::MAX)
}

/// The fake Anthropic's count of a Messages request body (see the module's note).
pub fn anthropic_input_tokens(body: &Value) -> i64 {
    fn all_text(value: &Value) -> usize {
        match value {
            Value::String(s) => cl100k(s),
            Value::Array(items) => items.iter().map(all_text).sum(),
            Value::Object(fields) => fields.values().map(all_text).sum(),
            _ => 0,
        }
    }
    fn cl100k(text: &str) -> usize {
        tiktoken_rs::cl100k_base_singleton().encode_ordinary(text).len()
    }
    let texts = all_text(&body["system"]) + all_text(&body["messages"]) + all_text(&body["tools"]);
    let messages = body["messages"].as_array().map_or(0, Vec::len);
    let tools = body["tools"].as_array().map_or(0, Vec::len);
    let tokens = texts + texts / 5 + 4 * messages + 10 * tools;
    i64::try_from(tokens).unwrap_or(i64::MAX)
}
