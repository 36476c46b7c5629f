//! Both wire formats' request bodies and answers, for a conversation with tool calls.

use serde_json::json;

use super::{CompletionRequest, Message, ModelError, ToolCall, ToolSpec, anthropic, openai};
use crate::domain::task::Usage;

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() }
}

/// A task, an answer that called two tools (the second with malformed arguments), and their
/// results, the second an error.
fn conversation() -> CompletionRequest {
    CompletionRequest {
        model: "m".into(),
        system: "Be brief.".into(),
        messages: vec![
            Message::User("Weather in Paris?".into()),
            Message::Assistant {
                text: "Looking it up.".into(),
                tool_calls: vec![
                    call("c1", "weather", r#"{"city":"Paris"}"#),
                    call("c2", "clock", "{not json"),
                ],
            },
            Message::ToolResult { call_id: "c1".into(), content: "12°C".into(), is_error: false },
            Message::ToolResult {
                call_id: "c2".into(),
                content: "error: bad arguments".into(),
                is_error: true,
            },
        ],
        tools: vec![ToolSpec {
            name: "weather".into(),
            description: "The weather in a city.".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }],
        tool_choice: Default::default(),
        max_tokens: 100,
    }
}

#[test]
fn openai_bodies_carry_tools_calls_and_results() {
    let body = openai::request_body(&conversation());
    assert_eq!(
        body,
        json!({
            "model": "m",
            "max_tokens": 100,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "Looking it up.", "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "c2", "type": "function",
                     "function": {"name": "clock", "arguments": "{not json"}},
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "12°C"},
                {"role": "tool", "tool_call_id": "c2", "content": "error: bad arguments"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "weather",
                "description": "The weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }}],
        })
    );
}

#[test]
fn openai_bodies_without_tools_or_text_leave_them_out() {
    let mut request = conversation();
    request.tools.clear();
    request.messages[1] =
        Message::Assistant { text: String::new(), tool_calls: vec![call("c1", "weather", "{}")] };
    let body = openai::request_body(&request);
    assert!(body.get("tools").is_none(), "{body}");
    assert_eq!(body["messages"][2]["content"], serde_json::Value::Null);
    request.messages[1] = Message::Assistant { text: "Hi".into(), tool_calls: vec![] };
    let body = openai::request_body(&request);
    assert_eq!(body["messages"][2], json!({"role": "assistant", "content": "Hi"}));
}

#[test]
fn openai_answers_give_calls_with_arguments_as_sent() {
    let answer = serde_json::from_value(json!({
        "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": "{\"city\":"}},
            // Older Ollama: the arguments as an object.
            {"id": "call_2", "type": "function",
             "function": {"name": "clock", "arguments": {"tz": "UTC"}}},
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7},
    }))
    .unwrap();
    let done = openai::read_answer(answer).unwrap();
    assert_eq!(done.text, "");
    assert_eq!(
        done.tool_calls,
        [call("call_1", "weather", r#"{"city":"#), call("call_2", "clock", r#"{"tz":"UTC"}"#)]
    );
    assert_eq!(done.usage.map(|u| (u.input_tokens, u.output_tokens)), Some((5, 7)));

    let answer = serde_json::from_value(json!({"choices": [{"message": {"content": "Sunny"}}]}));
    let done = openai::read_answer(answer.unwrap()).unwrap();
    assert_eq!((done.text.as_str(), done.tool_calls.len()), ("Sunny", 0));

    let empty = serde_json::from_value(json!({"choices": [{"message": {"content": null}}]}));
    assert!(matches!(openai::read_answer(empty.unwrap()), Err(ModelError::Transient { .. })));
    let none = serde_json::from_value(json!({"choices": []}));
    assert!(matches!(openai::read_answer(none.unwrap()), Err(ModelError::Transient { .. })));
}

#[test]
fn anthropic_bodies_carry_tools_calls_and_results_in_one_turn() {
    let body = anthropic::request_body(&conversation());
    let cache = json!({"type": "ephemeral"});
    assert_eq!(
        body,
        json!({
            "model": "m",
            "max_tokens": 100,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": cache}],
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking it up."},
                    {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "c2", "name": "clock", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "12°C"},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "error: bad arguments",
                     "is_error": true, "cache_control": cache},
                ]},
            ],
            "tools": [{
                "name": "weather",
                "description": "The weather in a city.",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
                "cache_control": cache,
            }],
        })
    );
}

#[test]
fn anthropic_bodies_without_tools_or_text_leave_them_out() {
    let mut request = conversation();
    request.tools.clear();
    request.messages[1] =
        Message::Assistant { text: String::new(), tool_calls: vec![call("c1", "weather", "[1]")] };
    request.messages.push(Message::User("And tomorrow?".into()));
    let body = anthropic::request_body(&request);
    assert!(body.get("tools").is_none(), "{body}");
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "tool_use", "id": "c1", "name": "weather", "input": {}}])
    );
    // A question after the results shares their turn: Anthropic's turns alternate.
    assert_eq!(body["messages"][2]["content"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        body["messages"][2]["content"][2],
        json!({"type": "text", "text": "And tomorrow?", "cache_control": {"type": "ephemeral"}})
    );
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));
}

#[test]
fn anthropic_answers_join_text_and_give_calls() {
    let answer = serde_json::from_value(json!({
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
            {"type": "text", "text": "And the time."},
            {"type": "tool_use", "id": "toolu_2", "name": "clock", "input": {}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }))
    .unwrap();
    let done = anthropic::read_answer(answer).unwrap();
    assert_eq!(done.usage, Some(Usage::new(3, 4)), "no cache reported: none counted");
    assert_eq!(done.text, "Let me check.\nAnd the time.");
    assert_eq!(
        done.tool_calls,
        [call("toolu_1", "weather", r#"{"city":"Paris"}"#), call("toolu_2", "clock", "{}")]
    );
    assert_eq!(done.usage.map(|u| (u.input_tokens, u.output_tokens)), Some((3, 4)));

    let thinking = serde_json::from_value(json!({"content": [{"type": "thinking"}]}));
    assert!(matches!(anthropic::read_answer(thinking.unwrap()), Err(ModelError::Transient { .. })));
}

/// Every block marked `cache_control` in a body, by where it is.
fn breakpoints(body: &serde_json::Value) -> Vec<String> {
    let mut marked = Vec::new();
    let mut look = |at: String, value: &serde_json::Value| {
        if value.get("cache_control").is_some() {
            marked.push(at);
        }
    };
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        look(format!("tools[{i}]"), tool);
    }
    for (i, block) in body["system"].as_array().into_iter().flatten().enumerate() {
        look(format!("system[{i}]"), block);
    }
    for (m, turn) in body["messages"].as_array().into_iter().flatten().enumerate() {
        for (i, block) in turn["content"].as_array().into_iter().flatten().enumerate() {
            look(format!("messages[{m}][{i}]"), block);
        }
    }
    marked
}

#[test]
fn anthropic_bodies_mark_the_last_tool_the_system_prompt_and_the_last_block() {
    let mut request = conversation();
    request.tools.push(ToolSpec {
        name: "clock".into(),
        description: "The time.".into(),
        parameters: json!({"type": "object"}),
    });
    let body = anthropic::request_body(&request);
    assert_eq!(breakpoints(&body), ["tools[1]", "system[0]", "messages[2][1]"]);
    // The task alone: its text becomes the one block that carries the mark.
    request.messages.truncate(1);
    let body = anthropic::request_body(&request);
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?",
            "cache_control": {"type": "ephemeral"}}]}])
    );
    // No tools, no system prompt: only the conversation is marked, and never more than 4.
    request.tools.clear();
    request.system.clear();
    let body = anthropic::request_body(&request);
    assert!(body.get("system").is_none(), "{body}");
    assert_eq!(breakpoints(&body), ["messages[0][0]"]);
}

/// The next step of a run: the model's calls and their results appended.
fn next_step(mut request: CompletionRequest) -> CompletionRequest {
    request.messages.push(Message::Assistant {
        text: String::new(),
        tool_calls: vec![call("c3", "weather", r#"{"city":"Lyon"}"#)],
    });
    request.messages.push(Message::ToolResult {
        call_id: "c3".into(),
        content: "14°C".into(),
        is_error: false,
    });
    request
}

/// A body without its cache marks, as a provider's cache compares it.
fn unmarked(mut body: serde_json::Value) -> serde_json::Value {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                map.remove("cache_control");
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut body);
    body
}

#[test]
fn consecutive_steps_of_a_run_send_byte_identical_prefixes() {
    let first = conversation();
    let second = next_step(first.clone());

    let (a, b) = (openai::request_body(&first), openai::request_body(&second));
    let sent = a["messages"].as_array().unwrap();
    let again = &b["messages"].as_array().unwrap()[..sent.len()];
    assert_eq!(serde_json::to_string(sent).unwrap(), serde_json::to_string(again).unwrap());
    assert_eq!(a["tools"].to_string(), b["tools"].to_string());

    let (a, b) =
        (unmarked(anthropic::request_body(&first)), unmarked(anthropic::request_body(&second)));
    assert_eq!(a["tools"].to_string(), b["tools"].to_string());
    assert_eq!(a["system"].to_string(), b["system"].to_string());
    let sent = a["messages"].as_array().unwrap();
    let again = &b["messages"].as_array().unwrap()[..sent.len()];
    assert_eq!(serde_json::to_string(sent).unwrap(), serde_json::to_string(again).unwrap());
}

#[test]
fn cache_tokens_are_read_apart_from_the_rest_of_the_prompt() {
    let answer = serde_json::from_value(json!({
        "content": [{"type": "text", "text": "Hi"}],
        "usage": {"input_tokens": 21, "output_tokens": 4, "cache_creation_input_tokens": 1800,
                  "cache_read_input_tokens": 2500},
    }))
    .unwrap();
    let usage = anthropic::read_answer(answer).unwrap().usage.unwrap();
    assert_eq!(
        usage,
        Usage {
            input_tokens: 21,
            output_tokens: 4,
            cache_read_tokens: 2500,
            cache_write_tokens: 1800
        }
    );

    // OpenAI counts the cached tokens inside `prompt_tokens`: they are taken out of it.
    let answer = serde_json::from_value(json!({
        "choices": [{"message": {"content": "Hi"}}],
        "usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                  "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0}},
    }))
    .unwrap();
    let usage = openai::read_answer(answer).unwrap().usage.unwrap();
    assert_eq!(
        usage,
        Usage {
            input_tokens: 86,
            output_tokens: 300,
            cache_read_tokens: 1920,
            cache_write_tokens: 0
        }
    );
    // A compatible server without the details, or with nonsense in them.
    for details in [json!(null), json!({}), json!({"cached_tokens": 5000})] {
        let answer = serde_json::from_value(json!({
            "choices": [{"message": {"content": "Hi"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": details},
        }))
        .unwrap();
        let usage = openai::read_answer(answer).unwrap().usage.unwrap();
        assert_eq!(usage.input_tokens + usage.cache_read_tokens, 10, "{details}");
        assert!(usage.input_tokens >= 0, "{details}");
    }
}
