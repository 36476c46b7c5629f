//! The account and what its agents work with: the session, tools and MCP servers, usage,
//! onboarding, and the chat connections.

use agentcore::Session;
use agentcore::api::{
    ChannelList, ConnectionList, MappingList, McpServerList, TemplateList, ToolList,
};
use agentcore::domain::mcp::McpServerTools;
use agentcore::domain::onboarding::Onboarded;
use agentcore::domain::usage::{BudgetView, UsageReport, UsageRow};

use super::{Render, Screen, cell, dollars, fields, rows, short, usd};

/// Who is logged in (never the token).
impl Render for Session {
    fn render(&self, _screen: Screen) -> String {
        let user = &self.user;
        format!("Logged in as {} <{}> ({}).", user.name, user.email, cell(&user.id))
    }
}

/// The built-in tools, then each MCP server's; a description is cut to its first line.
impl Render for ToolList {
    fn render(&self, screen: Screen) -> String {
        let builtin = rows(screen, &self.tools, ["NAME", "EFFECT", "DESCRIPTION"], |tool| {
            [cell(&tool.name), tool.effect.to_string(), short(&tool.description)]
        });
        let mcp = self.mcp_servers.iter().map(|server| server.render(screen));
        [builtin].into_iter().chain(mcp).collect::<Vec<_>>().join("\n")
    }
}

impl Render for McpServerList {
    fn render(&self, screen: Screen) -> String {
        let own = rows(screen, &self.servers, ["NAME", "URL", "TOKEN", "ADDED"], |server| {
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
    fn render(&self, screen: Screen) -> String {
        let head = format!("MCP server {} ({})", cell(&self.server), cell(&self.origin));
        let warning = match &self.warning {
            Some(warning) => format!("\nWarning: {warning}"),
            None => String::new(),
        };
        match &self.error {
            Some(error) => format!("{head}: unreachable: {error}"),
            None => {
                let tools = rows(screen, &self.tools, ["NAME", "DESCRIPTION"], |tool| {
                    [tool.name.clone(), short(&tool.description)]
                });
                format!("{head}:\n{tools}{warning}")
            }
        }
    }
}

/// One row a group, then the total.
impl Render for UsageReport {
    fn render(&self, screen: Screen) -> String {
        let headers = [
            "GROUP",
            "INPUT TOKENS",
            "OUTPUT TOKENS",
            "CACHE READS",
            "CACHE WRITES",
            "COST",
            "TASKS",
            "CALLS",
            "UNPRICED CALLS",
        ];
        let total = UsageRow { key: Some("(total)".to_owned()), ..self.total.clone() };
        let listed: Vec<&UsageRow> = self.rows.iter().chain([&total]).collect();
        let table = rows(screen, &listed, headers, |row| {
            [
                cell(&row.key),
                row.input_tokens.to_string(),
                row.output_tokens.to_string(),
                row.cache_read_tokens.to_string(),
                row.cache_write_tokens.to_string(),
                usd(row.cost_micros),
                row.tasks.to_string(),
                row.steps.to_string(),
                row.unpriced_steps.to_string(),
            ]
        });
        format!("Usage from {} to {}\n{table}", cell(&self.from), cell(&self.to))
    }
}

/// The budget and the month's spend, as money.
impl Render for BudgetView {
    fn render(&self, screen: Screen) -> String {
        let BudgetView { monthly_usd, month, spent_micros, spent_usd: _ } = self;
        fields(
            screen,
            [
                ("month", month.clone()),
                ("monthly_usd", monthly_usd.map_or_else(|| "-".to_owned(), dollars)),
                ("spent", usd(*spent_micros)),
            ],
        )
    }
}

impl Render for TemplateList {
    fn render(&self, screen: Screen) -> String {
        rows(screen, &self.templates, ["ID", "NAME", "CHANNEL", "DESCRIPTION"], |template| {
            [
                template.id.to_string(),
                template.name.to_string(),
                template.channel.to_string(),
                short(&template.description),
            ]
        })
    }
}

/// The agent as it is now (`idle`, or `active` once started) and its first task. The agent's
/// `channel` is only the name its posts are filed under: where they go is said by a mapping
/// (`Mapped ... to #...`), so it is not claimed here.
impl Render for Onboarded {
    fn render(&self, _screen: Screen) -> String {
        let (agent, task) = (&self.agent, &self.task);
        format!(
            "Created agent {} ({}), {}, with its first task queued: {} ({}).",
            cell(&agent.id),
            agent.name,
            cell(&agent.status),
            task.title,
            cell(&task.id),
        )
    }
}

impl Render for ConnectionList {
    fn render(&self, screen: Screen) -> String {
        let headers = ["GUILD", "NAME", "KIND", "CHANNELS", "CONNECTED"];
        rows(screen, &self.connections, headers, |connection| {
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
    fn render(&self, screen: Screen) -> String {
        rows(screen, &self.channels, ["ID", "NAME", "POSITION"], |channel| {
            [channel.id.clone(), channel.name.clone(), channel.position.to_string()]
        })
    }
}

impl Render for MappingList {
    fn render(&self, screen: Screen) -> String {
        rows(screen, &self.mappings, ["AGENT", "GUILD", "CHANNEL", "NAME"], |mapping| {
            [
                cell(&mapping.agent_id),
                mapping.guild_id.clone(),
                mapping.channel_id.clone(),
                mapping.channel_name.clone(),
            ]
        })
    }
}
