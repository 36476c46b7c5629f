//! The commands of Discord (connections, mappings, messages) and of the user's MCP servers.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Add a streamable HTTP MCP server your agents may name in `--mcp-servers`
    Add {
        name: String,
        #[arg(long)]
        url: String,
        /// Sent as a bearer token; stored encrypted, never shown again [env: AGENTCTL_MCP_TOKEN]
        #[arg(long, env = "AGENTCTL_MCP_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Your MCP servers, and the operator's names
    List,
    /// Connect to a server and list its tools
    Test { name: String },
    /// Remove one of your servers
    Remove { name: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ChatCommand {
    /// The link that installs the service's bot in a Discord server
    OauthUrl,
    /// Finish an OAuth install with the code Discord's redirect brought
    Callback {
        #[arg(long)]
        code: String,
        /// The `state` that `chat oauth-url` gave (required: it ties the install to you)
        #[arg(long)]
        state: String,
        #[arg(long)]
        guild_id: Option<String>,
    },
    /// Connect a server with your own bot
    Connect {
        #[arg(long)]
        guild_id: String,
        /// [env: AGENTCTL_BOT_TOKEN]
        #[arg(long, env = "AGENTCTL_BOT_TOKEN", hide_env_values = true)]
        bot_token: String,
        #[arg(long)]
        guild_name: Option<String>,
        /// The bot's application public key, for slash commands and approval buttons [default:
        /// the one Discord reports]
        #[arg(long)]
        public_key: Option<String>,
    },
    /// Roles (ids) whose members may run commands that change something, besides members
    /// with Manage Server; none given clears them
    Roles { guild_id: String, role_ids: Vec<String> },
    /// Connected servers
    Connections,
    /// Check that the bot still reaches a server
    Test { guild_id: String },
    /// Disconnect a server (its mappings and pending posts go too)
    Disconnect { guild_id: String },
    /// A server's text channels
    Channels { guild_id: String },
    /// Post an agent's results and status changes to a channel
    Map {
        agent: String,
        #[arg(long)]
        guild_id: String,
        #[arg(long)]
        channel_id: String,
        #[arg(long)]
        channel_name: Option<String>,
    },
    /// Stop posting an agent's updates
    Unmap { agent: String },
    /// Agents and their channels
    Mappings,
    /// Send a message to an agent's channel
    Send {
        agent: String,
        #[arg(long)]
        guild_id: String,
        #[arg(long)]
        content: Option<String>,
        #[arg(long)]
        embed_title: Option<String>,
        #[arg(long)]
        embed_description: Option<String>,
        /// An RGB integer, e.g. 5763719
        #[arg(long)]
        embed_color: Option<i64>,
    },
}
