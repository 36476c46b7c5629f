//! What a run offers the model: the agent's built-in tools and its MCP servers' tools, listed
//! from the connections' caches (a server is listed again when the model names a tool of it
//! that the cache lacks).

use std::collections::HashMap;

use super::Node;
use crate::domain::runtime::{AgentKey, ClaimedTask};
use crate::mcp::ServerRef;
use crate::models::ModelKind;
use crate::models::ToolSpec;
use crate::tools::builtin;

/// What the model is offered: the agent's built-in tools, then its MCP servers' tools (the
/// connections' cached lists: nothing is fetched per step), and the servers it cannot use now.
pub(super) struct Offer {
    pub(super) tools: Vec<ToolSpec>,
    /// `<server>__<tool>` → the server and its own name for the tool.
    pub(super) mcp: HashMap<String, (ServerRef, String)>,
    pub(super) unavailable: Vec<String>,
}

/// The tools offered to this agent's model (of `provider`, the server's default when the agent
/// names none); none for `echo`, which calls no model.
pub(super) async fn offered(
    node: &Node,
    agent: &AgentKey,
    claimed: &ClaimedTask,
    kind: ModelKind<'_>,
    list_again: Option<&str>,
) -> Offer {
    let mut offer = Offer { tools: Vec::new(), mcp: HashMap::new(), unavailable: Vec::new() };
    if kind == ModelKind::Echo {
        return offer;
    }
    offer.tools = claimed.agent.tools.iter().map(|tool| builtin::spec(*tool)).collect();
    if claimed.agent.mcp_servers.is_empty() {
        return offer;
    }
    let owner = crate::domain::workspace::WorkspaceId::from_trusted(agent.owner_id.clone());
    let servers = node.core.agent_servers(&owner, &claimed.agent.mcp_servers).await;
    for server in servers {
        let listed = match server {
            Ok(server) => {
                let mcp = node.core.mcp();
                let tools = if list_again == Some(server.name().as_str()) {
                    mcp.tools_listed_again(&server).await
                } else {
                    mcp.tools(&server).await
                };
                tools.map(|tools| (server, tools))
            }
            Err(error) => Err(error),
        };
        match listed {
            Ok((server, tools)) => {
                for tool in &tools.tools {
                    let info = &tool.info;
                    offer.tools.push(ToolSpec {
                        name: info.name.clone(),
                        description: info.description.clone(),
                        parameters: info.parameters.clone(),
                    });
                    offer.mcp.insert(info.name.clone(), (server.clone(), info.tool.clone()));
                }
            }
            Err(error) => {
                tracing::warn!(task = %claimed.task.id, %error, "MCP server unavailable for a run");
                offer.unavailable.push(error);
            }
        }
    }
    offer
}
