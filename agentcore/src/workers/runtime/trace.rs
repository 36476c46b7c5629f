//! A run's spans, in OpenTelemetry's GenAI semantic conventions: `invoke_agent {agent}` for
//! the run (a child of the span that added the task, stored with it, so every run of a task is
//! in one trace), `chat {model}` for each attempt at a model call, `execute_tool {tool}` for
//! each tool call. Retries are failed `chat` spans with a `gen_ai.retry` event; a call parked
//! for approval ends its run with a `agentd.approval.requested` event, and the next run (the
//! gap between the two is the wait) starts with the decision.
//!
//! They are plain `tracing` spans (`otel.name` names them, fields are their attributes): agentd
//! exports them when it is told where to. Prompt and completion text are attributes only when
//! the operator turns it on ([`RuntimeConfig::trace_content`](crate::core::RuntimeConfig)):
//! they may hold personal data.

use opentelemetry::{Array, KeyValue, StringValue, Value};
use serde_json::json;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::run::Ran;
use crate::domain::runtime::{AgentKey, ClaimedTask, Outcome};
use crate::domain::steps::StepCall;
use crate::domain::tool_result::{ToolError, ToolResult};
use crate::models::{Completion, CompletionRequest, Message, ModelError};

/// The most bytes of text one content attribute carries (a conversation grows with its run).
pub(super) const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// The run's span, continuing the task's stored trace.
pub(super) fn run_span(agent: &AgentKey, claimed: &ClaimedTask) -> Span {
    let span = tracing::info_span!(
        target: crate::otel::TARGET,
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {}", agent.agent_id),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = %agent.agent_id,
        gen_ai.agent.name = %claimed.agent.name,
        gen_ai.conversation.id = %claimed.task.id,
        gen_ai.provider.name = Empty,
        gen_ai.request.model = Empty,
        gen_ai.response.model = Empty,
        agentd.workspace.id = %agent.owner_id,
        agentd.task.id = %claimed.task.id,
        agentd.task.attempt = claimed.task.attempts,
        agentd.run.end = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    );
    if let Some(trace) = &claimed.task.trace {
        crate::otel::continue_trace(&span, trace);
    }
    span
}

/// How the run ended, on its span.
pub(super) fn run_ended(span: &Span, ran: &Ran) {
    let end = match ran {
        Ran::Finished(Outcome::Complete { .. }, ..) => "complete",
        Ran::Finished(Outcome::Failed { .. }, ..) => "failed",
        Ran::Finished(Outcome::Stopped { .. }, ..) => "stopped",
        Ran::Finished(Outcome::BudgetExhausted { .. }, ..) => "budget_exhausted",
        Ran::Parked => "awaiting_approval",
        Ran::Lost => "lease_lost",
        Ran::Interrupted => "interrupted",
    };
    span.record("agentd.run.end", end);
    if let Ran::Finished(Outcome::Failed { .. } | Outcome::BudgetExhausted { .. }, ..) = ran {
        span.record("error.type", end);
        span.record("otel.status_code", "ERROR");
    }
}

/// One attempt at a model call, of `provider` (its configured name).
pub(super) fn chat_span(provider: &str, request: &CompletionRequest, attempt: i32) -> Span {
    tracing::info_span!(
        target: crate::otel::TARGET,
        "chat",
        otel.name = %format_args!("chat {}", request.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = %provider,
        gen_ai.request.model = %request.model,
        gen_ai.request.max_tokens = i64::from(request.max_tokens),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        agentd.attempt = attempt,
        agentd.cost_usd = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// What the model answered (or why not), on its `chat` span; with the conversation when
/// `content` is on.
pub(super) fn chat_answered(
    span: &Span,
    request: &CompletionRequest,
    answer: &Result<Completion, ModelError>,
    content: bool,
) {
    if content {
        span.set_attribute("gen_ai.system_instructions", bounded(text_parts(&request.system)));
        span.set_attribute("gen_ai.input.messages", bounded(input_messages(request)));
    }
    match answer {
        Ok(completion) => {
            if let Some(usage) = completion.usage {
                span.record("gen_ai.usage.input_tokens", usage.input_tokens);
                span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            }
            let reason = finish_reason(completion);
            let reasons = Array::String(vec![StringValue::from(reason)]);
            span.set_attribute("gen_ai.response.finish_reasons", Value::Array(reasons));
            if content {
                span.set_attribute("gen_ai.output.messages", bounded(output(completion)));
            }
        }
        Err(error) => {
            let kind = match error {
                ModelError::Transient { status: Some(status), .. } => status.to_string(),
                ModelError::Transient { .. } => "transient".to_owned(),
                ModelError::Permanent { .. } => "permanent".to_owned(),
            };
            span.record("error.type", kind.as_str());
            span.record("otel.status_code", "ERROR");
        }
    }
}

/// A failed attempt that will be tried again after `delay`.
pub(super) fn retrying(span: &Span, attempt: i32, delay: std::time::Duration) {
    let delay_ms = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
    let attributes = vec![
        KeyValue::new("agentd.attempt", i64::from(attempt)),
        KeyValue::new("agentd.delay_ms", delay_ms),
    ];
    span.add_event("gen_ai.retry", attributes);
}

/// A model of the fallback chain failed after its retries: an event on the run's span, naming
/// it and whether the call goes on to the next model.
pub(super) fn fell_back(model: &str, error: &str, next: bool) {
    let attributes = vec![
        KeyValue::new("gen_ai.request.model", model.to_owned()),
        KeyValue::new("error.message", error.to_owned()),
        KeyValue::new("agentd.fallback.next", next),
    ];
    Span::current().add_event("agentd.fallback", attributes);
}

/// The call's settled cost, on the `chat` span that answered.
pub(super) fn chat_cost(span: &Span, cost_micros: i64) {
    // Micro-dollars to dollars: a float is what tracing backends sum and show.
    #[allow(clippy::cast_precision_loss, reason = "a cost far below 2^53 micro-dollars")]
    span.record("agentd.cost_usd", cost_micros as f64 / 1_000_000.0);
}

/// One tool call's span.
pub(super) fn tool_span(call: &StepCall, content: bool) -> Span {
    let span = tracing::info_span!(
        target: crate::otel::TARGET,
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        error.type = Empty,
        otel.status_code = Empty,
    );
    if content {
        span.set_attribute("gen_ai.tool.call.arguments", bounded(call.arguments.clone()));
    }
    span
}

/// The call's result (or its error) on its span.
pub(super) fn tool_done(span: &Span, result: &ToolResult, content: bool) {
    match result {
        Ok(output) => {
            if content {
                span.set_attribute("gen_ai.tool.call.result", bounded(output.clone()));
            }
        }
        Err(error) => {
            span.record("error.type", tool_error_type(error));
            span.record("otel.status_code", "ERROR");
            if content {
                span.set_attribute("gen_ai.tool.call.result", bounded(error.to_string()));
            }
        }
    }
}

/// An event on the current span (the tool call's): `agentd.approval.requested` when the run
/// parks, `agentd.approval.decided` when a later run finds the decision.
pub(super) fn approval_event(name: &'static str, attributes: Vec<KeyValue>) {
    Span::current().add_event(name, attributes);
}

/// `error.type` of a tool call that did not give a result.
fn tool_error_type(error: &ToolError) -> &'static str {
    match error {
        ToolError::InvalidArguments(_) => "invalid_arguments",
        ToolError::Refused(_) => "refused",
        ToolError::Unknown(_) => "unknown_tool",
        ToolError::Denied { .. } => "denied",
        ToolError::NotRun(_) => "not_run",
        ToolError::TimedOut => "timeout",
        ToolError::Failed(_) => "failed",
    }
}

/// `tool_calls` when the model asked for calls, else `stop` (the providers' other reasons,
/// such as a length cut, are not carried by [`Completion`]).
fn finish_reason(completion: &Completion) -> &'static str {
    if completion.tool_calls.is_empty() { "stop" } else { "tool_calls" }
}

fn text_parts(text: &str) -> String {
    json!([{"type": "text", "content": text}]).to_string()
}

/// The conversation sent, in the conventions' message form.
fn input_messages(request: &CompletionRequest) -> String {
    let messages: Vec<serde_json::Value> = request
        .messages
        .iter()
        .map(|message| match message {
            Message::User(text) => json!({"role": "user", "parts": [{"type": "text", "content": text}]}),
            Message::Assistant { text, tool_calls } => {
                let mut parts = vec![json!({"type": "text", "content": text})];
                parts.extend(tool_calls.iter().map(|c| {
                    json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments})
                }));
                json!({"role": "assistant", "parts": parts})
            }
            Message::ToolResult { call_id, content, .. } => json!({
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": call_id, "response": content}]
            }),
        })
        .collect();
    serde_json::Value::Array(messages).to_string()
}

fn output(completion: &Completion) -> String {
    let mut parts = vec![json!({"type": "text", "content": completion.text})];
    parts.extend(completion.tool_calls.iter().map(
        |c| json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}),
    ));
    json!([{"role": "assistant", "parts": parts, "finish_reason": finish_reason(completion)}])
        .to_string()
}

/// At most [`MAX_CONTENT_BYTES`], cut at a character's boundary.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_CONTENT_BYTES {
        let mut end = MAX_CONTENT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_cut_at_its_bound_on_a_character_boundary() {
        let long = "é".repeat(MAX_CONTENT_BYTES);
        let cut = bounded(long);
        assert!(cut.len() <= MAX_CONTENT_BYTES && cut.len() > MAX_CONTENT_BYTES - 2);
        assert_eq!(bounded("short".into()), "short");
    }

    #[test]
    fn tool_calls_are_the_finish_reason_of_an_answer_that_asks_for_them() {
        let call = crate::models::ToolCall {
            id: "c1".into(),
            name: "memory".into(),
            arguments: "{}".into(),
        };
        let asked = Completion {
            text: String::new(),
            tool_calls: vec![call],
            usage: None,
            spent_for: None,
        };
        let answered =
            Completion { text: "done".into(), tool_calls: vec![], usage: None, spent_for: None };
        assert_eq!((finish_reason(&asked), finish_reason(&answered)), ("tool_calls", "stop"));
    }
}
