//! The built-in tools as the model sees them (name, description, JSON Schema of the arguments)
//! and the parsing of a call's arguments into what it does. Arguments that are not JSON, or do
//! not match the schema, are the tool's error, told to the model; nothing runs.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::http_fetch::{self, FetchArgs};
use crate::domain::agent::AgentId;
use crate::domain::chat::{NewPost, OutgoingMessage};
use crate::domain::steps::Effect;
use crate::domain::task::{NewTask, Priority, TaskDescription, TaskTitle};
use crate::domain::tools::{MEMORY_CHARS, ToolInfo, ToolName};

/// Messages `read_channel` returns unless asked for another number, and at most.
pub const READ_CHANNEL_DEFAULT: u8 = 20;
pub const READ_CHANNEL_MAX: u8 = 50;

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

/// One tool's description and argument schema.
pub fn info(tool: ToolName) -> ToolInfo {
    let (description, parameters) = match tool {
        ToolName::HttpFetch => (http_fetch::DESCRIPTION.to_owned(), http_fetch::parameters()),
        ToolName::PostMessage => (
            format!(
                "Posts a message to your team's Discord channel. Give `content` (up to {} \
                 characters), or an embed with `embed_title` and `embed_description`, or both.",
                OutgoingMessage::MAX_CONTENT
            ),
            object(
                json!({
                    "content": {"type": "string", "maxLength": OutgoingMessage::MAX_CONTENT},
                    "embed_title": {"type": "string", "maxLength": OutgoingMessage::MAX_TITLE},
                    "embed_description": {"type": "string", "maxLength": OutgoingMessage::MAX_DESCRIPTION},
                }),
                &[],
            ),
        ),
        ToolName::CreateTask => (
            "Adds a task to your own backlog, or to another agent of your team's (`agent_id`) \
             to delegate work. Higher `priority` runs first."
                .to_owned(),
            object(
                json!({
                    "title": {"type": "string", "minLength": 1, "maxLength": 200},
                    "description": {"type": "string", "maxLength": 20000},
                    "priority": {"type": "integer"},
                    "agent_id": {"type": "string", "description": "Another agent's id; yours when left out."},
                }),
                &["title"],
            ),
        ),
        ToolName::Memory => (
            format!(
                "Your memory block, shown to you at the start of every task. `read` returns \
                 it; `append` adds `text` on a new line; `replace` sets it to `text`. It holds \
                 at most {MEMORY_CHARS} characters."
            ),
            object(
                json!({
                    "action": {"type": "string", "enum": ["read", "append", "replace"]},
                    "text": {"type": "string"},
                }),
                &["action"],
            ),
        ),
        ToolName::ReadChannel => (
            "Reads the latest messages of your team's Discord channel: author and text, newest \
             first."
                .to_owned(),
            object(
                json!({
                    "limit": {"type": "integer", "minimum": 1, "maximum": READ_CHANNEL_MAX,
                              "description": format!("{READ_CHANNEL_DEFAULT} when left out")},
                }),
                &[],
            ),
        ),
    };
    ToolInfo { name: tool, description, parameters, effect: tool.has_effect() }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostArgs {
    content: Option<String>,
    embed_title: Option<String>,
    embed_description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskArgs {
    title: String,
    description: Option<String>,
    priority: Option<i64>,
    agent_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryArgs {
    action: String,
    text: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelArgs {
    limit: Option<i64>,
}

/// Reads a call of `tool` by `agent`: what it will do, or the error the model is told.
pub fn prepare(tool: ToolName, agent: &AgentId, arguments: &str) -> Result<Prepared, String> {
    match tool {
        ToolName::HttpFetch => parse(arguments).map(Prepared::Fetch),
        ToolName::PostMessage => {
            let args: PostArgs = parse(arguments)?;
            let field =
                |name: &str, value: Option<String>, check: fn(&str) -> Result<String, String>| {
                    value
                        .map(|v| check(&v).map_err(|e| format!("invalid arguments: {name} {e}")))
                        .transpose()
                };
            let content = field("content", args.content, OutgoingMessage::content)?;
            let title = field("embed_title", args.embed_title, OutgoingMessage::embed_title)?;
            let description = field(
                "embed_description",
                args.embed_description,
                OutgoingMessage::embed_description,
            )?;
            let message = OutgoingMessage::new(content, title, description, None)
                .ok_or("invalid arguments: give content, or an embed_title or embed_description")?;
            Ok(Prepared::Effect(Effect::Post(NewPost::new(message.body()))))
        }
        ToolName::CreateTask => {
            let args: TaskArgs = parse(arguments)?;
            let bad = |field: &str, e: String| format!("invalid arguments: {field} {e}");
            let task = NewTask {
                title: TaskTitle::parse(&args.title).map_err(|e| bad("title", e))?,
                description: args
                    .description
                    .map(|d| TaskDescription::parse(&d).map_err(|e| bad("description", e)))
                    .transpose()?,
                priority: Priority::parse(args.priority.unwrap_or(0))
                    .map_err(|e| bad("priority", e))?,
            };
            let target = match args.agent_id {
                Some(id) => AgentId::parse(&id)
                    .map_err(|_| format!("404 agent_not_found: you have no agent '{id}'"))?,
                None => agent.clone(),
            };
            Ok(Prepared::Effect(Effect::CreateTask { agent: target, task }))
        }
        ToolName::Memory => {
            let args: MemoryArgs = parse(arguments)?;
            match (args.action.as_str(), args.text) {
                ("read", _) => Ok(Prepared::ReadMemory),
                ("append" | "replace", Some(text)) => {
                    Ok(Prepared::Effect(Effect::Memory { replace: args.action == "replace", text }))
                }
                ("append" | "replace", None) => {
                    Err(format!("invalid arguments: `{}` needs `text`", args.action))
                }
                (other, _) => Err(format!(
                    "invalid arguments: action must be read, append or replace, not '{other}'"
                )),
            }
        }
        ToolName::ReadChannel => {
            let args: ChannelArgs = parse(arguments)?;
            let limit = args.limit.unwrap_or(i64::from(READ_CHANNEL_DEFAULT));
            u8::try_from(limit)
                .ok()
                .filter(|l| (1..=READ_CHANNEL_MAX).contains(l))
                .map(|limit| Prepared::ReadChannel { limit })
                .ok_or_else(|| {
                    format!("invalid arguments: limit must be from 1 to {READ_CHANNEL_MAX}")
                })
        }
    }
}

/// The arguments as `T`; an empty text counts as `{}` (some models send nothing for no
/// arguments).
fn parse<T: DeserializeOwned>(arguments: &str) -> Result<T, String> {
    let arguments = if arguments.trim().is_empty() { "{}" } else { arguments };
    let value: Value = serde_json::from_str(arguments)
        .map_err(|e| format!("invalid arguments: not valid JSON ({e})"))?;
    serde_json::from_value(value).map_err(|e| format!("invalid arguments: {e}"))
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
        assert!(prepare(memory, &agent(), "{not json").unwrap_err().contains("not valid JSON"));
        let unknown = prepare(memory, &agent(), r#"{"action":"read","x":1}"#).unwrap_err();
        assert!(unknown.contains("unknown field `x`"), "{unknown}");
        let missing = prepare(memory, &agent(), r#"{"action":"append"}"#).unwrap_err();
        assert!(missing.contains("needs `text`"), "{missing}");
        let typed = prepare(ToolName::CreateTask, &agent(), r#"{"title":5}"#).unwrap_err();
        assert!(typed.contains("invalid type"), "{typed}");
        let empty = prepare(ToolName::PostMessage, &agent(), "{}").unwrap_err();
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
