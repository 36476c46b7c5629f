//! The command line: every operation of the service, grouped the way people think of them.

use clap::{Args, Parser, Subcommand, ValueEnum};

mod chat;
mod integrations;
mod teams;

pub(crate) use chat::{ChatCommand, McpCommand};
pub(crate) use integrations::{TriggersCommand, WebhooksCommand};
pub(crate) use teams::{
    AuditCommand, InvitesCommand, KeysCommand, MembersCommand, WorkspaceCommand, WorkspacesCommand,
};

/// How tables read and who the requests are from, said once below every command's options.
const AFTER_HELP: &str = "\
Tables fit the terminal (or COLUMNS; piped, they are not wrapped); lists cut long texts with \
`…`, which `show` and `-o json` print whole. Lists read as on the dashboard: agents and \
schedules oldest first, activity and tasks newest first. Money reads as on the dashboard: \
$0.00, four decimals below a cent.

Credentials: when AGENTD_API_KEY is set, its key (agk_...) is sent instead of the profile's \
login, and acts in the key's own workspace (the profile's `workspace use` choice is not \
applied; --workspace may only name that one); `logout` still ends the profile's login. \
Otherwise the profile's login is sent, in the workspace chosen by --workspace, else by \
`agentctl workspace use`, else the personal one.";

/// Manage agents from the terminal, remotely over HTTP or locally against the database.
#[derive(Debug, Parser)]
#[command(name = "agentctl", version, about, propagate_version = true, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct Global {
    /// The agentd server [default: the profile's, else http://127.0.0.1:8080]
    #[arg(long, global = true, env = "AGENTCTL_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// Work on the database directly, with no server
    #[arg(long, global = true)]
    pub local: bool,
    /// The database of --local [default: the profile's, else agentd's: AGENTD_DATABASE_URL or agentd.db in its data directory]
    #[arg(long, global = true, value_name = "URL")]
    pub database_url: Option<String>,
    /// The workspace to act in, by id or name (`agentctl workspaces` lists them) [default:
    /// the profile's, from `agentctl workspace use`, else your personal one]. Give it before
    /// the command: after `agents list|create|update`, --workspace is an agent's grouping
    #[arg(long, env = "AGENTCTL_WORKSPACE", value_name = "ID|NAME")]
    pub workspace: Option<String>,
    /// Which saved login to use
    #[arg(
        long,
        global = true,
        env = "AGENTCTL_PROFILE",
        default_value = "default",
        value_name = "NAME"
    )]
    pub profile: String,
    /// Tables for people, or the service's JSON for scripts
    #[arg(long, short, global = true, env = "AGENTCTL_OUTPUT", value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Answer yes to confirmations
    #[arg(long, short, global = true)]
    pub yes: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create an account and log in
    Register {
        #[arg(long)]
        email: String,
        /// [env: AGENTCTL_PASSWORD] [default: asked on a terminal]
        #[arg(long)]
        password: Option<String>,
        #[arg(long)]
        name: String,
    },
    /// Log in and keep the token in the profile
    Login {
        #[arg(long)]
        email: String,
        /// [env: AGENTCTL_PASSWORD] [default: asked on a terminal]
        #[arg(long)]
        password: Option<String>,
    },
    /// End every session of this user and forget the profile's token
    Logout,
    /// Who the profile is logged in as
    Whoami,
    /// Your workspaces and your role in each (`list`, the default); `create` a team one
    Workspaces {
        #[command(subcommand)]
        command: Option<WorkspacesCommand>,
    },
    /// Which workspace commands act in: `use` one (kept in the profile), show the `current` one
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// The workspace's members and their roles (`list`, the default): change, remove, leave
    Members {
        #[command(subcommand)]
        command: Option<MembersCommand>,
    },
    /// The workspace's invites (`list`, the default): create, withdraw, or accept one
    Invites {
        #[command(subcommand)]
        command: Option<InvitesCommand>,
    },
    /// The workspace's API keys for scripts (`list`, the default): create and revoke them
    Keys {
        #[command(subcommand)]
        command: Option<KeysCommand>,
    },
    /// The workspace's audit log: list, export, and verify its chain of hashes
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Agents: create, inspect, change, start and stop them
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// An agent's backlog of tasks
    #[command(subcommand)]
    Tasks(TasksCommand),
    /// An agent's schedules: recurring tasks on a cron expression in a time zone
    #[command(subcommand)]
    Schedules(SchedulesCommand),
    /// Outbound webhooks: the workspace's endpoints, their secrets and deliveries
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
    /// Inbound triggers: signed URLs that queue a task on an agent
    #[command(subcommand)]
    Triggers(TriggersCommand),
    /// Discord: connect servers, map agents to channels, send messages
    #[command(subcommand)]
    Chat(ChatCommand),
    /// The plan, its agent limit and how much of it is used
    Billing,
    /// Your monthly budget for all your agents and this month's spend; --set or --clear it
    Budget {
        /// Dollars per calendar month (UTC)
        #[arg(long, conflicts_with = "clear")]
        set: Option<f64>,
        #[arg(long)]
        clear: bool,
    },
    /// What model calls cost: tokens, dollars, tasks and calls (this month unless given)
    Usage {
        /// Start, included: 2026-11-01 or an RFC 3339 time [default: start of this month, UTC]
        #[arg(long)]
        from: Option<String>,
        /// End, excluded [default: start of next month, UTC]
        #[arg(long)]
        to: Option<String>,
        /// Only this agent's calls
        #[arg(long)]
        agent: Option<String>,
        /// One row per agent, model or day
        #[arg(long, value_name = "agent|model|day", default_value = "agent")]
        group_by: String,
    },
    /// The tools agents may call: built-in ones and those of MCP servers
    Tools,
    /// MCP servers: add your own (streamable HTTP), list, test and remove them
    #[command(subcommand)]
    Mcp(McpCommand),
    /// The onboarding templates
    Templates,
    /// A ready agent from a template: asks for what is missing on a terminal, and creates the
    /// agent only after the last answer (Ctrl-C, or Esc at a choice, quits without one)
    Onboard(OnboardArgs),
    /// Print shell completions
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Run the agents and deliver their posts here, until Ctrl-C (local mode, no server)
    Run,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AgentsCommand {
    /// Your agents, oldest first
    List {
        #[arg(long)]
        workspace: Option<String>,
        #[arg(long)]
        status: Option<String>,
    },
    /// One agent with its backlog
    Show { id: String },
    /// Create an agent (it starts idle)
    Create {
        #[arg(long)]
        id: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        role_prompt: String,
        #[arg(long)]
        channel: String,
        #[command(flatten)]
        settings: AgentSettings,
    },
    /// Change the given fields
    Update {
        id: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        role_prompt: Option<String>,
        #[arg(long)]
        channel: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[command(flatten)]
        settings: AgentSettings,
    },
    /// The agent's memory block; --set replaces it, --clear empties it
    Memory {
        id: String,
        #[arg(long, conflicts_with = "clear")]
        set: Option<String>,
        #[arg(long)]
        clear: bool,
    },
    /// Delete an agent with its backlog and activity
    Delete { id: String },
    /// Start working through the backlog
    Start { id: String },
    /// Stop taking tasks (the one in progress finishes)
    Stop { id: String },
    /// Toggle vacation, or set it with --on / --off
    Vacation {
        id: String,
        #[arg(long, conflicts_with = "off")]
        on: bool,
        #[arg(long)]
        off: bool,
    },
    /// Print the events of one agent, or all of yours, as they happen, until Ctrl-C
    Watch { id: Option<String> },
    /// What the agent did, newest first
    Activity {
        id: String,
        /// 1 to 1000 [default: 30]
        #[arg(long)]
        limit: Option<u32>,
        /// Only entries before this time (RFC 3339)
        #[arg(long)]
        before: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum TasksCommand {
    /// Queue a task
    Add {
        agent: String,
        title: String,
        #[arg(long)]
        description: Option<String>,
        /// Higher runs first [default: 0]
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i64>,
        /// Then follow it as `tasks watch` does, exiting with its outcome
        #[arg(long)]
        watch: bool,
    },
    /// The agent's tasks, newest first, as the dashboard and `agents show` list them
    List {
        agent: String,
        /// queued, in_progress, awaiting_approval, complete, failed or cancelled
        #[arg(long)]
        status: Option<String>,
    },
    Show {
        agent: String,
        task: String,
    },
    /// Change a queued task
    Update {
        agent: String,
        task: String,
        #[arg(long)]
        title: Option<String>,
        /// An empty value clears it
        #[arg(long)]
        description: Option<String>,
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i64>,
    },
    /// Delete a task that is not in progress
    Delete {
        agent: String,
        task: String,
    },
    /// Queue a failed task again
    Retry {
        agent: String,
        task: String,
    },
    /// Approve the tool call a task waits on (status awaiting_approval); its run goes on
    Approve {
        agent: String,
        task: String,
    },
    /// Deny the tool call a task waits on; its model is told it was denied
    Deny {
        agent: String,
        task: String,
    },
    /// The task's run: each model call and tool call
    Steps {
        agent: String,
        task: String,
    },
    /// Stop a task: a queued one never runs, a running one stops where it is
    Cancel {
        agent: String,
        task: String,
    },
    /// Print the agent's events as they happen; with a task, its events until it ends (exit
    /// 0 complete, 7 failed, 8 cancelled)
    Watch {
        agent: String,
        task: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SchedulesCommand {
    /// Queue a task on a schedule, e.g. `add brief "0 9 * * MON-FRI" "Daily brief" --timezone Europe/Berlin`
    Add {
        agent: String,
        /// Five fields: minute hour day-of-month month day-of-week
        cron: String,
        /// The title of each task it queues
        title: String,
        /// An IANA zone name [default: UTC]
        #[arg(long)]
        timezone: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i64>,
        /// Runs missed while no node was running: skip or run_once [default: skip]
        #[arg(long)]
        catch_up: Option<String>,
        /// While its last task is unfinished: skip_if_active or enqueue [default: skip_if_active]
        #[arg(long)]
        overlap: Option<String>,
        /// Add it switched off
        #[arg(long)]
        disabled: bool,
    },
    /// The agent's schedules with their next run
    List { agent: String },
    /// One schedule with its next five runs
    Show { agent: String, schedule: String },
    /// Change a schedule
    Update {
        agent: String,
        schedule: String,
        #[arg(long)]
        cron: Option<String>,
        #[arg(long)]
        timezone: Option<String>,
        #[arg(long)]
        title: Option<String>,
        /// An empty value clears it
        #[arg(long)]
        description: Option<String>,
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i64>,
        #[arg(long)]
        catch_up: Option<String>,
        #[arg(long)]
        overlap: Option<String>,
        /// Switch it on (its next run is the first from now)
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        /// Switch it off
        #[arg(long)]
        disable: bool,
    },
    /// Delete a schedule (tasks it queued stay)
    Delete { agent: String, schedule: String },
}

/// Every question of the wizard has a flag; without a terminal, missing answers are an error.
/// The settings `agents create` and `agents update` share, named as the API names them (see
/// `CreateAgentRequest`); `commands::agents_request` turns them into a request.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct AgentSettings {
    /// On update, an empty value clears it
    #[arg(long)]
    pub workspace: Option<String>,
    #[arg(long)]
    pub throttle_seconds: Option<f64>,
    /// echo or <provider>:<model>, such as openai:gpt-4o-mini; on update, an empty value clears
    /// it (the server's default model is used)
    #[arg(long)]
    pub model: Option<String>,
    /// The built-in tools it may call, comma-separated (`agentctl tools`); an empty value allows
    /// none [default on create: post_message,create_task,memory]
    #[arg(long)]
    pub tools: Option<String>,
    /// Model calls one task may take, 1 to 50 [default on create: 8]
    #[arg(long)]
    pub max_steps: Option<i64>,
    /// MCP servers whose tools it may call, comma-separated (`agentctl mcp list`); an empty
    /// value allows none
    #[arg(long)]
    pub mcp_servers: Option<String>,
    /// Its own monthly budget in dollars; `none`: no budget of its own
    #[arg(long)]
    pub budget_monthly_usd: Option<String>,
    /// Tools whose calls wait for a person's approval, comma-separated; an empty value: none
    #[arg(long)]
    pub approval_tools: Option<String>,
    /// Models tried in order when its model is overloaded or keeps failing, comma-separated
    /// (at most 3); an empty value: none; `default`: the server's chain for its model
    #[arg(long)]
    pub fallback_models: Option<String>,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct OnboardArgs {
    /// marketing, support, engineering, operations or sales
    #[arg(long)]
    pub template: Option<String>,
    #[arg(long)]
    pub company: Option<String>,
    /// Log in (or, with --register, create an account) with this e-mail first
    #[arg(long)]
    pub email: Option<String>,
    /// With --email: create the account instead of logging in
    #[arg(long)]
    pub register: bool,
    /// With --register: the account's name
    #[arg(long)]
    pub name: Option<String>,
    /// Connect this Discord server with your own bot (with --bot-token)
    #[arg(long)]
    pub guild_id: Option<String>,
    /// [env: AGENTCTL_BOT_TOKEN]
    #[arg(long, env = "AGENTCTL_BOT_TOKEN", hide_env_values = true)]
    pub bot_token: Option<String>,
    /// Map the agent to this channel of the server
    #[arg(long)]
    pub channel_id: Option<String>,
    /// Skip Discord
    #[arg(long)]
    pub no_discord: bool,
    /// A first task of your own, beside the template's sample task
    #[arg(long)]
    pub task: Option<String>,
    /// Start the agent at the end [default: asked; no without a terminal]
    #[arg(long)]
    pub start: bool,
}
