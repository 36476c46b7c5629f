//! `memory`: the agent's memory block, read by the runtime or written by the store with the
//! call's step (see [`Effect::Memory`]).

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Prepared, object, parse};
use crate::domain::steps::Effect;
use crate::domain::tool_result::ToolError;
use crate::domain::tools::MEMORY_CHARS;

pub(super) fn info() -> (String, Value) {
    let description = format!(
        "Your memory block, shown to you at the start of every task. `read` returns it; \
         `append` adds `text` on a new line; `replace` sets it to `text`. It holds at most \
         {MEMORY_CHARS} characters."
    );
    let parameters = object(
        json!({
            "action": {"type": "string", "enum": ["read", "append", "replace"]},
            "text": {"type": "string"},
        }),
        &["action"],
    );
    (description, parameters)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    action: String,
    text: Option<String>,
}

pub(super) fn prepare(arguments: &str) -> Result<Prepared, ToolError> {
    let args: Args = parse(arguments)?;
    match (args.action.as_str(), args.text) {
        ("read", _) => Ok(Prepared::ReadMemory),
        ("append" | "replace", Some(text)) => {
            Ok(Prepared::Effect(Effect::Memory { replace: args.action == "replace", text }))
        }
        ("append" | "replace", None) => {
            Err(ToolError::invalid_arguments(format!("`{}` needs `text`", args.action)))
        }
        (other, _) => Err(ToolError::invalid_arguments(format!(
            "action must be read, append or replace, not '{other}'"
        ))),
    }
}

/// What `read` answers with the block as stored.
pub(crate) fn read_answer(memory: String) -> String {
    if memory.is_empty() { "Your memory is empty.".to_owned() } else { memory }
}
