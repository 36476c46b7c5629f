//! `agentctl chat ...` and `agentctl mcp ...`: Discord connections, mappings and sends, and
//! the user's MCP servers.

use agentcore::api::{
    AddMcpServerRequest, CallbackRequest, ConnectRequest, MapRequest, RolesRequest, SendRequest,
};

use super::Context;
use crate::cli::{ChatCommand, McpCommand};
use crate::client::Client;
use crate::failure::Failure;

pub(super) async fn chat(
    cx: &Context,
    client: &Client,
    command: ChatCommand,
) -> Result<(), Failure> {
    match command {
        ChatCommand::OauthUrl => cx.emit(&client.oauth_url().await?),
        ChatCommand::Callback { code, state, guild_id } => {
            let request = CallbackRequest { code: Some(code), state: Some(state), guild_id };
            cx.emit(&client.callback(&request).await?)
        }
        ChatCommand::Connect { guild_id, bot_token, guild_name, public_key } => {
            let request = ConnectRequest {
                guild_id: Some(guild_id),
                bot_token: Some(bot_token),
                guild_name,
                public_key,
            };
            cx.emit(&client.connect(&request).await?)
        }
        ChatCommand::Roles { guild_id, role_ids } => {
            let request = RolesRequest { allowed_role_ids: Some(role_ids) };
            cx.emit(&client.set_allowed_roles(&guild_id, &request).await?)
        }
        ChatCommand::Connections => cx.emit(&client.connections().await?),
        ChatCommand::Test { guild_id } => cx.emit(&client.test_connection(&guild_id).await?),
        ChatCommand::Disconnect { guild_id } => {
            cx.confirm(&format!(
                "Disconnect server {guild_id}? Its mappings and pending posts are removed."
            ))?;
            cx.emit(&client.disconnect(&guild_id).await?)
        }
        ChatCommand::Channels { guild_id } => cx.emit(&client.channels(&guild_id).await?),
        ChatCommand::Map { agent, guild_id, channel_id, channel_name } => {
            let request =
                MapRequest { agent_id: Some(agent), channel_id: Some(channel_id), channel_name };
            cx.emit(&client.map(&guild_id, &request).await?)
        }
        ChatCommand::Unmap { agent } => cx.emit(&client.unmap(&agent).await?),
        ChatCommand::Mappings => cx.emit(&client.mappings().await?),
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
            cx.emit(&client.send(&guild_id, &request).await?)
        }
    }
}

pub(super) async fn mcp(cx: &Context, client: &Client, command: McpCommand) -> Result<(), Failure> {
    match command {
        McpCommand::Add { name, url, token } => {
            let request = AddMcpServerRequest { name: Some(name), url: Some(url), token };
            cx.emit(&client.add_mcp_server(&request).await?)
        }
        McpCommand::List => cx.emit(&client.mcp_servers().await?),
        McpCommand::Test { name } => cx.emit(&client.test_mcp_server(&name).await?),
        McpCommand::Remove { name } => {
            cx.confirm(&format!("Remove MCP server {name}? Agents naming it lose its tools."))?;
            cx.emit(&client.delete_mcp_server(&name).await?)
        }
    }
}
