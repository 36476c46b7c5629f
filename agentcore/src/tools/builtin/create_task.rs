//! `create_task`: a task in the agent's own backlog or, to delegate, another agent's of the
//! same owner (the effect is applied by the store, which checks the depth and the count per
//! run; see [`Effect::CreateTask`]).

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Prepared, object, parse};
use crate::domain::agent::AgentId;
use crate::domain::steps::{Effect, said};
use crate::domain::task::{NewTask, Priority, TaskDescription, TaskTitle};
use crate::domain::tool_result::ToolError;

pub(super) fn info() -> (String, Value) {
    let description = "Adds a task to your own backlog, or to another agent of your team's \
                       (`agent_id`) to delegate work. Higher `priority` runs first.";
    let parameters = object(
        json!({
            "title": {"type": "string", "minLength": 1, "maxLength": 200},
            "description": {"type": "string", "maxLength": 20000},
            "priority": {"type": "integer"},
            "agent_id": {"type": "string", "description": "Another agent's id; yours when left out."},
        }),
        &["title"],
    );
    (description.to_owned(), parameters)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    title: String,
    description: Option<String>,
    priority: Option<i64>,
    agent_id: Option<String>,
}

/// A call by `agent`: the task goes to it unless another agent is named.
pub(super) fn prepare(agent: &AgentId, arguments: &str) -> Result<Prepared, ToolError> {
    let args: Args = parse(arguments)?;
    let bad = |field: &str, e: String| ToolError::invalid_arguments(format!("{field} {e}"));
    let task = NewTask {
        title: TaskTitle::parse(&args.title).map_err(|e| bad("title", e))?,
        description: args
            .description
            .map(|d| TaskDescription::parse(&d).map_err(|e| bad("description", e)))
            .transpose()?,
        priority: Priority::parse(args.priority.unwrap_or(0)).map_err(|e| bad("priority", e))?,
    };
    let target = match args.agent_id {
        Some(id) => AgentId::parse(&id).map_err(|_| ToolError::failed(said::no_such_agent(&id)))?,
        None => agent.clone(),
    };
    Ok(Prepared::Effect(Effect::CreateTask { agent: target, task }))
}
