//! The built-in tools as the model sees them (name, description, JSON Schema of the arguments)
//! and the reading of a call's arguments into what it does: one file per tool, registered by
//! its [`ToolName`] and the two `match`es below. Arguments that are not JSON, or do not match
//! the schema, are the tool's error, told to the model; nothing runs.
//!
//! What a call does happens elsewhere, by kind: an [`Effect`] is applied by the store in the
//! transaction that stores the call's step (so it happens exactly once); a read runs in the
//! runtime (`workers/runtime/tools.rs`) through the facade.

mod create_task;
pub(crate) mod memory;
mod post_message;
pub mod read_channel;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::http_fetch::{self, FetchArgs};
use crate::domain::agent::AgentId;
use crate::domain::steps::Effect;
use crate::domain::tool_result::ToolError;
use crate::domain::tools::{ToolInfo, ToolName};

/// A call whose arguments were read by its tool's schema.
#[derive(Debug, Clone)]
pub enum Prepared {
    /// Changes something: applied with its step, in one transaction.
    Effect(Effect),
    /// `memory` with `action: read`.
    ReadMemory,
    Fetch(FetchArgs),
    ReadChannel {
        limit: u8,
    },
}

/// Every built-in tool, as `GET /api/tools` lists them.
pub fn catalog() -> Vec<ToolInfo> {
    ToolName::ALL.into_iter().map(info).collect()
}

/// One tool as a model is offered it.
pub fn spec(tool: ToolName) -> crate::models::ToolSpec {
    let info = info(tool);
    crate::models::ToolSpec {
        name: tool.as_str().to_owned(),
        description: info.description,
        parameters: info.parameters,
    }
}

/// One tool's description and argument schema.
pub fn info(tool: ToolName) -> ToolInfo {
    let (description, parameters) = match tool {
        ToolName::HttpFetch => (http_fetch::DESCRIPTION.to_owned(), http_fetch::parameters()),
        ToolName::PostMessage => post_message::info(),
        ToolName::CreateTask => create_task::info(),
        ToolName::Memory => memory::info(),
        ToolName::ReadChannel => read_channel::info(),
    };
    ToolInfo { name: tool, description, parameters, effect: tool.has_effect() }
}

/// Reads a call of `tool` by `agent`: what it will do, or the error the model is told.
pub fn prepare(tool: ToolName, agent: &AgentId, arguments: &str) -> Result<Prepared, ToolError> {
    match tool {
        ToolName::HttpFetch => parse(arguments).map(Prepared::Fetch),
        ToolName::PostMessage => post_message::prepare(arguments),
        ToolName::CreateTask => create_task::prepare(agent, arguments),
        ToolName::Memory => memory::prepare(arguments),
        ToolName::ReadChannel => read_channel::prepare(arguments),
    }
}

/// An argument schema: an object of `properties`, nothing else allowed.
fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The arguments as `T`; an empty text counts as `{}` (some models send nothing for no
/// arguments).
fn parse<T: DeserializeOwned>(arguments: &str) -> Result<T, ToolError> {
    let arguments = if arguments.trim().is_empty() { "{}" } else { arguments };
    let value: Value = serde_json::from_str(arguments)
        .map_err(|e| ToolError::invalid_arguments(format!("not valid JSON ({e})")))?;
    serde_json::from_value(value).map_err(|e| ToolError::invalid_arguments(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> AgentId {
        AgentId::parse("writer").unwrap()
    }

    #[test]
    fn every_tool_has_an_object_schema() {
        for tool in catalog() {
            assert_eq!(tool.parameters["type"], "object", "{}", tool.name);
            assert!(!tool.description.is_empty());
        }
    }

    #[test]
    fn bad_arguments_are_errors_for_the_model() {
        let memory = ToolName::Memory;
        assert!(
            prepare(memory, &agent(), "{not json")
                .unwrap_err()
                .to_string()
                .contains("not valid JSON")
        );
        let unknown =
            prepare(memory, &agent(), r#"{"action":"read","x":1}"#).unwrap_err().to_string();
        assert!(unknown.contains("unknown field `x`"), "{unknown}");
        let missing = prepare(memory, &agent(), r#"{"action":"append"}"#).unwrap_err().to_string();
        assert!(missing.contains("needs `text`"), "{missing}");
        let typed =
            prepare(ToolName::CreateTask, &agent(), r#"{"title":5}"#).unwrap_err().to_string();
        assert!(typed.contains("invalid type"), "{typed}");
        let empty = prepare(ToolName::PostMessage, &agent(), "{}").unwrap_err().to_string();
        assert!(empty.contains("give content"), "{empty}");
        assert!(prepare(ToolName::ReadChannel, &agent(), r#"{"limit":51}"#).is_err());
    }

    #[test]
    fn a_task_goes_to_the_caller_unless_another_agent_is_named() {
        let Ok(Prepared::Effect(Effect::CreateTask { agent: target, task })) =
            prepare(ToolName::CreateTask, &agent(), r#"{"title":"Draft","priority":2}"#)
        else {
            panic!("not a task")
        };
        assert_eq!(
            (target.as_str(), task.title.as_str(), task.priority.get()),
            ("writer", "Draft", 2)
        );
        let Ok(Prepared::Effect(Effect::CreateTask { agent: target, .. })) =
            prepare(ToolName::CreateTask, &agent(), r#"{"title":"Draft","agent_id":"editor"}"#)
        else {
            panic!("not a task")
        };
        assert_eq!(target.as_str(), "editor");
    }
}
