//! The account and what its agents work with: the session, tools and MCP servers, usage,
//! onboarding, and the chat connections.

use agentcore::Session;
use agentcore::api::{
    ChannelList, ConnectionList, MappingList, McpServerList, TemplateList, ToolList,
};
use agentcore::domain::mcp::McpServerTools;
use agentcore::domain::onboarding::Onboarded;
use agentcore::domain::usage::{UsageReport, UsageRow};

use super::{Render, cell, rows};

/// Who is logged in (never the token).
impl Render for Session {
    fn render(&self) -> String {
        let user = &self.user;
        format!("Logged in as {} <{}> ({}).", user.name, user.email, cell(&user.id))
    }
}

/// The built-in tools, then each MCP server's.
impl Render for ToolList {
    fn render(&self) -> String {
        let builtin = rows(&self.tools, ["NAME", "EFFECT", "DESCRIPTION"], |tool| {
            [cell(&tool.name), tool.effect.to_string(), tool.description.clone()]
        });
        let mcp = self.mcp_servers.iter().map(Render::render);
        [builtin].into_iter().chain(mcp).collect::<Vec<_>>().join("\n")
    }
}

impl Render for McpServerList {
    fn render(&self) -> String {
        let own = rows(&self.servers, ["NAME", "URL", "TOKEN", "ADDED"], |server| {
            [
                cell(&server.name),
                server.url.clone(),
                server.has_token.to_string(),
                cell(&server.created_at),
            ]
        });
        let names: Vec<String> = self.operator_servers.iter().map(cell).collect();
        let operator = if names.is_empty() { "(none)".to_owned() } else { names.join(", ") };
        format!("{own}\nThe operator's servers: {operator}")
    }
}

/// A server's tools, with the warning when the list was bounded; or why it is unreachable.
impl Render for McpServerTools {
    fn render(&self) -> String {
        let head = format!("MCP server {} ({})", cell(&self.server), cell(&self.origin));
        let warning = match &self.warning {
            Some(warning) => format!("\nWarning: {warning}"),
            None => String::new(),
        };
        match &self.error {
            Some(error) => format!("{head}: unreachable: {error}"),
            None => {
                let tools = rows(&self.tools, ["NAME", "DESCRIPTION"], |tool| {
                    [tool.name.clone(), tool.description.clone()]
                });
                format!("{head}:\n{tools}{warning}")
            }
        }
    }
}

/// One row a group, then the total.
impl Render for UsageReport {
    fn render(&self) -> String {
        let headers = [
            "GROUP",
            "INPUT TOKENS",
            "OUTPUT TOKENS",
            "COST (USD)",
            "TASKS",
            "CALLS",
            "UNPRICED CALLS",
        ];
        let total = UsageRow { key: Some("(total)".to_owned()), ..self.total.clone() };
        let listed: Vec<&UsageRow> = self.rows.iter().chain([&total]).collect();
        let table = rows(&listed, headers, |row| {
            [
                cell(&row.key),
                row.input_tokens.to_string(),
                row.output_tokens.to_string(),
                cell(&row.cost_usd),
                row.tasks.to_string(),
                row.steps.to_string(),
                row.unpriced_steps.to_string(),
            ]
        });
        format!("Usage from {} to {}\n{table}", cell(&self.from), cell(&self.to))
    }
}

impl Render for TemplateList {
    fn render(&self) -> String {
        rows(&self.templates, ["ID", "NAME", "CHANNEL", "DESCRIPTION"], |template| {
            [
                template.id.to_string(),
                template.name.to_string(),
                template.channel.to_string(),
                template.description.to_string(),
            ]
        })
    }
}

impl Render for Onboarded {
    fn render(&self) -> String {
        let (agent, task) = (&self.agent, &self.task);
        format!(
            "Created agent {} ({}, {}) posting to #{}, with its first task queued: {} ({}).",
            cell(&agent.id),
            agent.name,
            cell(&agent.status),
            agent.channel,
            task.title,
            cell(&task.id),
        )
    }
}

impl Render for ConnectionList {
    fn render(&self) -> String {
        let headers = ["GUILD", "NAME", "KIND", "CHANNELS", "CONNECTED"];
        rows(&self.connections, headers, |connection| {
            [
                connection.guild_id.clone(),
                connection.guild_name.clone(),
                cell(&connection.kind),
                connection.channel_count.to_string(),
                cell(&connection.connected_at),
            ]
        })
    }
}

impl Render for ChannelList {
    fn render(&self) -> String {
        rows(&self.channels, ["ID", "NAME", "POSITION"], |channel| {
            [channel.id.clone(), channel.name.clone(), channel.position.to_string()]
        })
    }
}

impl Render for MappingList {
    fn render(&self) -> String {
        rows(&self.mappings, ["AGENT", "GUILD", "CHANNEL", "NAME"], |mapping| {
            [
                cell(&mapping.agent_id),
                mapping.guild_id.clone(),
                mapping.channel_id.clone(),
                mapping.channel_name.clone(),
            ]
        })
    }
}
