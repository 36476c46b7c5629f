//! `agentctl chat ...` and `agentctl mcp ...`: Discord connections, mappings and sends, and
//! the user's MCP servers.

use agentcore::api::{
    AddMcpServerRequest, CallbackRequest, ConnectRequest, MapRequest, RolesRequest, SendRequest,
};

use super::Context;
use crate::cli::{ChatCommand, McpCommand};
use crate::client::Client;
use crate::failure::Failure;
use crate::render::View;

pub(super) async fn chat(
    cx: &Context,
    client: &Client,
    command: ChatCommand,
) -> Result<(), Failure> {
    let (answer, view) = match command {
        ChatCommand::OauthUrl => (client.oauth_url().await?.answer, View::Fields),
        ChatCommand::Callback { code, state, guild_id } => {
            let request = CallbackRequest { code: Some(code), state: Some(state), guild_id };
            (client.callback(&request).await?.answer, View::Fields)
        }
        ChatCommand::Connect { guild_id, bot_token, guild_name, public_key } => {
            let request = ConnectRequest {
                guild_id: Some(guild_id),
                bot_token: Some(bot_token),
                guild_name,
                public_key,
            };
            (client.connect(&request).await?.answer, View::Fields)
        }
        ChatCommand::Roles { guild_id, role_ids } => {
            let request = RolesRequest { allowed_role_ids: Some(role_ids) };
            (client.set_allowed_roles(&guild_id, &request).await?.answer, View::Fields)
        }
        ChatCommand::Connections => (client.connections().await?.answer, View::Connections),
        ChatCommand::Test { guild_id } => {
            (client.test_connection(&guild_id).await?.answer, View::Fields)
        }
        ChatCommand::Disconnect { guild_id } => {
            cx.confirm(&format!(
                "Disconnect server {guild_id}? Its mappings and pending posts are removed."
            ))?;
            (client.disconnect(&guild_id).await?.answer, View::Fields)
        }
        ChatCommand::Channels { guild_id } => {
            (client.channels(&guild_id).await?.answer, View::Channels)
        }
        ChatCommand::Map { agent, guild_id, channel_id, channel_name } => {
            let request =
                MapRequest { agent_id: Some(agent), channel_id: Some(channel_id), channel_name };
            (client.map(&guild_id, &request).await?.answer, View::Fields)
        }
        ChatCommand::Unmap { agent } => (client.unmap(&agent).await?.answer, View::Fields),
        ChatCommand::Mappings => (client.mappings().await?.answer, View::Mappings),
        ChatCommand::Send {
            agent,
            guild_id,
            content,
            embed_title,
            embed_description,
            embed_color,
        } => {
            let request = SendRequest {
                agent_id: Some(agent),
                content,
                embed_title,
                embed_description,
                embed_color,
            };
            (client.send(&guild_id, &request).await?.answer, View::Fields)
        }
    };
    cx.emit(&answer, view)
}

pub(super) async fn mcp(cx: &Context, client: &Client, command: McpCommand) -> Result<(), Failure> {
    let (answer, view) = match command {
        McpCommand::Add { name, url, token } => {
            let request = AddMcpServerRequest { name: Some(name), url: Some(url), token };
            (client.add_mcp_server(&request).await?.answer, View::Fields)
        }
        McpCommand::List => (client.mcp_servers().await?.answer, View::McpServers),
        McpCommand::Test { name } => (client.test_mcp_server(&name).await?.answer, View::McpTools),
        McpCommand::Remove { name } => {
            cx.confirm(&format!("Remove MCP server {name}? Agents naming it lose its tools."))?;
            (client.delete_mcp_server(&name).await?.answer, View::Fields)
        }
    };
    cx.emit(&answer, view)
}
