//! One tool call of a run: what the name the model called stands for (a tool of one of the
//! agent's MCP servers, a built-in tool, or nothing it may call) and running it. An effect is
//! not run here: the store applies it with the call's step (see `run/calling.rs`).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::{Node, ReadFailed};
use crate::domain::agent::AgentId;
use crate::domain::runtime::AgentRun;
use crate::domain::steps::{Effect, StepCall};
use crate::domain::task::TaskId;
use crate::domain::tool_result::{ToolError, ToolResult};
use crate::domain::tools::ToolName;
use crate::domain::workspace::WorkspaceId;
use crate::mcp::ServerRef;
use crate::tools::builtin::{self, Prepared, memory};
use crate::tools::http_fetch::FetchArgs;

/// The MCP tools offered to the model in this run.
pub(super) struct McpTools {
    /// `<server>__<tool>` → the server and its own name for the tool.
    pub(super) by_name: HashMap<String, (ServerRef, String)>,
    /// The servers listed again in this run for a tool name they lacked.
    listed_again: HashSet<String>,
}

impl McpTools {
    pub(super) fn new(by_name: HashMap<String, (ServerRef, String)>) -> Self {
        Self { by_name, listed_again: HashSet::new() }
    }

    /// The tools as listed again; the servers listed again so far stay counted.
    pub(super) fn relisted(&mut self, by_name: HashMap<String, (ServerRef, String)>) {
        self.by_name = by_name;
    }

    /// The agent's server whose tool `name` would be (`<server>__<tool>`) when no offered tool
    /// has that name, to be listed again: the server may have added the tool and said so in a
    /// `tools/list_changed` not handled yet. Once per server and run, so a model inventing
    /// names does not make each call list again.
    pub(super) fn server_to_list_again(&mut self, name: &str, agent: &AgentRun) -> Option<String> {
        if self.by_name.contains_key(name) {
            return None;
        }
        let (server, _) = name.split_once("__")?;
        let mine = agent.mcp_servers.iter().any(|s| s.as_str() == server);
        (mine && self.listed_again.insert(server.to_owned())).then(|| server.to_owned())
    }
}

/// What a call is, once its tool is known and its arguments read.
pub(super) enum Work {
    /// Nothing runs: this is the call's result (an unknown or refused tool, bad arguments).
    Refused(ToolError),
    /// A change, applied by the store with the call's step, in one transaction.
    Effect(Effect),
    /// A read of the node's own database: quick, so the model step that asked for the call is
    /// stored with the call's step.
    ReadMemory,
    /// Waits on the outside world: the model step that asked for the call is stored first.
    Remote(Remote),
}

pub(super) enum Remote {
    Mcp { server: ServerRef, tool: String },
    Fetch(FetchArgs),
    ReadChannel { limit: u8 },
}

/// What `call` by the agent `own` (whose settings are `agent`) is.
pub(super) fn work(call: &StepCall, own: &AgentId, agent: &AgentRun, mcp: &McpTools) -> Work {
    if let Some((server, tool)) = mcp.by_name.get(&call.name) {
        return Work::Remote(Remote::Mcp { server: server.clone(), tool: tool.clone() });
    }
    let tool = match call.name.parse::<ToolName>() {
        Ok(tool) if agent.tools.contains(&tool) => tool,
        Ok(tool) => {
            let why = format!("the tool '{tool}' is not enabled for this agent");
            return Work::Refused(ToolError::refused(why));
        }
        Err(_) => return Work::Refused(ToolError::Unknown(call.name.clone())),
    };
    match builtin::prepare(tool, own, &call.arguments) {
        Err(error) => Work::Refused(error),
        Ok(Prepared::Effect(effect)) => Work::Effect(effect),
        Ok(Prepared::ReadMemory) => Work::ReadMemory,
        Ok(Prepared::Fetch(args)) => Work::Remote(Remote::Fetch(args)),
        Ok(Prepared::ReadChannel { limit }) => Work::Remote(Remote::ReadChannel { limit }),
    }
}

/// `memory` with `action: read`, for the run of `task`: its result, or `None` when the
/// database stayed out of reach (the run is interrupted rather than told its memory failed:
/// see [`super::read_for_run`]).
pub(super) async fn read_memory(
    node: &Node,
    task: &TaskId,
    owner: &WorkspaceId,
    own: &AgentId,
) -> Option<ToolResult> {
    let read = || node.core.run_store().memory(owner, own);
    match super::read_for_run(node, task, "read the agent's memory", read).await {
        Ok(memory) => Some(Ok(memory::read_answer(memory))),
        Err(ReadFailed::Failed(error)) => Some(Err(ToolError::failed(error))),
        Err(ReadFailed::Interrupted) => None,
    }
}

/// Runs a call that waits on the outside world, until `deadline` at the latest.
pub(super) async fn run_remote(
    node: &Node,
    owner: &WorkspaceId,
    own: &AgentId,
    remote: Remote,
    arguments: &str,
    deadline: Instant,
) -> ToolResult {
    let remaining = deadline.saturating_duration_since(Instant::now());
    let ran = async {
        match remote {
            Remote::Mcp { server, tool } => node.core.mcp().call(&server, &tool, arguments).await,
            Remote::Fetch(args) => node.core.http_fetch().fetch(&args).await,
            Remote::ReadChannel { limit } => node.core.read_channel(owner, own, limit).await,
        }
    };
    tokio::time::timeout(remaining, ran).await.unwrap_or(Err(ToolError::TimedOut))
}
