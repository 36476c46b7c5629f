//! Both wire formats' request bodies and answers, for a conversation with tool calls.

use serde_json::json;

use super::{CompletionRequest, Message, ModelError, ToolCall, ToolSpec, anthropic, openai};

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
    assert_eq!(
        body,
        json!({
            "model": "m",
            "max_tokens": 100,
            "system": "Be brief.",
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
                     "is_error": true},
                ]},
            ],
            "tools": [{
                "name": "weather",
                "description": "The weather in a city.",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
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
    assert_eq!(body["messages"][2]["content"][2], json!({"type": "text", "text": "And tomorrow?"}));
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
    assert_eq!(done.text, "Let me check.\nAnd the time.");
    assert_eq!(
        done.tool_calls,
        [call("toolu_1", "weather", r#"{"city":"Paris"}"#), call("toolu_2", "clock", "{}")]
    );
    assert_eq!(done.usage.map(|u| (u.input_tokens, u.output_tokens)), Some((3, 4)));

    let thinking = serde_json::from_value(json!({"content": [{"type": "thinking"}]}));
    assert!(matches!(anthropic::read_answer(thinking.unwrap()), Err(ModelError::Transient { .. })));
}
