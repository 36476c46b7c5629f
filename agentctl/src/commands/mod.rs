//! Each command as the request it makes; its typed answer says how it looks as a table.

use std::io::IsTerminal;

use agentcore::api::{
    BudgetRequest, CreateAgentRequest, CreateTaskRequest, LoginRequest, RegisterRequest,
    SetMemoryRequest, UpdateAgentRequest, UpdateTaskRequest, UsageParams, VacationRequest,
};
use agentcore::{Core, Session};

use crate::api::{ActivityQuery, AgentQuery, Reply};
use crate::cli::{AgentsCommand, Cli, Command, Global, Output, TasksCommand};
use crate::client::{Client, Transport};
use crate::failure::{Failure, Kind};
use crate::profile::{Profile, Profiles};
use crate::render::{Added, Render, Screen};

mod audit;
mod chat;
mod integrations;
mod onboard;
mod schedules;
mod teams;
mod watch;

const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// What every command needs: the options, the saved login, and a way to reach the service.
pub(crate) struct Context {
    pub global: Global,
    pub profiles: Profiles,
    pub profile: Option<Profile>,
}

impl Context {
    /// Local when asked with `--local`, or when the profile is a local login and no server was
    /// named.
    fn is_local(&self) -> bool {
        self.global.local
            || (self.global.server.is_none() && self.profile.as_ref().is_some_and(|p| p.local))
    }

    fn server(&self) -> String {
        self.global
            .server
            .clone()
            .or_else(|| self.profile.as_ref().and_then(|p| p.server.clone()))
            .unwrap_or_else(|| DEFAULT_SERVER.to_owned())
    }

    fn database_url(&self) -> Option<String> {
        self.global
            .database_url
            .clone()
            .or_else(|| self.profile.as_ref().and_then(|p| p.database_url.clone()))
    }

    /// The library opened on the database `agentd` would use, configured as `agentd` would be.
    pub(crate) async fn open_core(&self) -> Result<Core, Failure> {
        let flags =
            agentd::config::Flags { database_url: self.database_url(), ..Default::default() };
        let config = agentd::config::Config::load(&flags, &agentd::config::process_environment())
            .and_then(|config| config.core_config())
            .map_err(|e| Failure::usage(e.to_string()))?;
        Core::open(config).await.map_err(|e| {
            Failure::network(format!("cannot open the database: {}", e.public_message()))
        })
    }

    /// A client for the mode in use, with the token `command` is sent with: the API key in
    /// `AGENTD_API_KEY` when set (but to `logout`, which ends the profile's login), else the
    /// profile's. Its workspace is set by [`Context::workspace_for`].
    pub(crate) async fn client(&self, command: &Command) -> Result<Client, Failure> {
        let transport = if self.is_local() {
            Transport::local(self.open_core().await?)
        } else {
            Transport::remote(&self.server())?
        };
        let login = self.profile.as_ref().map(|p| p.token.clone());
        let token = match command {
            Command::Logout => login,
            _ => teams::api_key().or(login),
        };
        Ok(Client { transport, token, workspace: None })
    }

    /// A refused API key is not a login to renew: says which key.
    fn explain(&self, mut failure: Failure) -> Failure {
        if failure.code.as_deref() == Some("unauthorized") && teams::api_key().is_some() {
            failure.message = format!(
                "The API key in {} is not accepted: revoked, expired or mistyped.",
                teams::API_KEY_VARIABLE
            );
        }
        failure
    }

    /// Prints an answer: the service's JSON as it came, or the typed body's table.
    pub(crate) fn emit<T: Render>(&self, reply: &Reply<T>) -> Result<(), Failure> {
        self.show(&reply.answer.raw, &reply.body)
    }

    /// Prints `raw` for `--output json`, else `body`'s table.
    fn show(&self, raw: &str, body: &impl Render) -> Result<(), Failure> {
        match self.global.output {
            Output::Json => print_out(raw),
            Output::Table => print_out(&body.render(Screen::detect())),
        }
        Ok(())
    }

    /// Saves a fresh session as the profile and prints it without its token.
    pub(crate) fn keep_session(
        &mut self,
        session: &Reply<Session>,
        email: &str,
    ) -> Result<(), Failure> {
        self.remember(&session.body, email)?;
        let mut shown = session.answer.value.clone();
        if let Some(object) = shown.as_object_mut() {
            object.remove("access_token");
        }
        self.show(&shown.to_string(), &session.body)
    }

    /// Saves a fresh session's token as the profile; returns the token.
    pub(crate) fn remember(&mut self, session: &Session, email: &str) -> Result<String, Failure> {
        let token = session.access_token.clone();
        let local = self.is_local();
        let mut profile = Profile {
            server: (!local).then(|| self.server()),
            database_url: if local { self.database_url() } else { None },
            local,
            email: email.to_owned(),
            token: token.clone(),
            workspace: None,
        };
        // The same person at the same place keeps the workspace they chose.
        if let Some(earlier) = self.profile.as_ref().filter(|p| p.is_same_login(&profile)) {
            profile.workspace = earlier.workspace.clone();
        }
        let path = self.profiles.save(&self.global.profile, &profile)?;
        self.profile = Some(profile);
        eprintln!("The login is kept in {} (readable by you alone).", path.display());
        Ok(token)
    }

    /// Asks before something that cannot be undone; `--yes` answers for scripts.
    pub(crate) fn confirm(&self, question: &str) -> Result<(), Failure> {
        if self.global.yes {
            return Ok(());
        }
        if !interactive() {
            return Err(Failure::usage(format!(
                "{question} Add --yes to confirm without a terminal."
            )));
        }
        let confirmed =
            dialoguer::Confirm::new().with_prompt(question).default(false).interact()?;
        if confirmed { Ok(()) } else { Err(Failure::usage("Cancelled; nothing was changed.")) }
    }
}

/// Prompts only when a person is at the terminal.
pub(crate) fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// `--password`, else `AGENTCTL_PASSWORD`, else asked on a terminal.
pub(crate) fn password(given: Option<String>, confirm: bool) -> Result<String, Failure> {
    if let Some(password) = given.or_else(|| std::env::var("AGENTCTL_PASSWORD").ok()) {
        return Ok(password);
    }
    if !interactive() {
        return Err(Failure::usage(
            "no password: give --password, set AGENTCTL_PASSWORD, or run on a terminal",
        ));
    }
    let mut prompt = dialoguer::Password::new().with_prompt("Password");
    if confirm {
        prompt = prompt.with_confirmation("Repeat it", "The passwords differ.");
    }
    Ok(prompt.interact()?)
}

pub(crate) async fn run(cli: Cli) -> Result<(), Failure> {
    let profiles = Profiles::open()?;
    let profile = profiles.load(&cli.global.profile)?;
    let mut cx = Context { global: cli.global, profiles, profile };
    match cli.command {
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "agentctl", &mut script);
            print_out(&String::from_utf8_lossy(&script));
            Ok(())
        }
        Command::Run => run_agents(&cx).await,
        // Nothing to revoke or forget: no need to reach the service.
        Command::Logout if cx.profile.is_none() => {
            Err(Failure::auth(format!("profile '{}' is not logged in", cx.global.profile)))
        }
        command => {
            let mut client = cx.client(&command).await?;
            let result = match cx.workspace_for(&client, &command).await {
                Ok(workspace) => {
                    client.workspace = workspace;
                    dispatch(&mut cx, &client, command).await
                }
                Err(failure) => Err(failure),
            };
            client.transport.close().await;
            result.map_err(|failure| cx.explain(failure))
        }
    }
}

async fn dispatch(cx: &mut Context, client: &Client, command: Command) -> Result<(), Failure> {
    match command {
        Command::Register { email, password: given, name } => {
            let password = password(given, true)?;
            let request = RegisterRequest {
                email: Some(email.clone()),
                password: Some(password),
                name: Some(name),
            };
            let session = client.register(&request).await?;
            cx.keep_session(&session, &email)
        }
        Command::Login { email, password: given } => {
            let password = password(given, false)?;
            let request = LoginRequest { email: Some(email.clone()), password: Some(password) };
            let session = client.login(&request).await?;
            cx.keep_session(&session, &email)
        }
        Command::Logout => logout(cx, client).await,
        Command::Whoami => cx.emit(&client.me().await?),
        Command::Workspaces { command } => teams::workspaces(cx, client, command).await,
        Command::Workspace(command) => teams::workspace(cx, client, command).await,
        Command::Members { command } => teams::members(cx, client, command).await,
        Command::Invites { command } => teams::invites(cx, client, command).await,
        Command::Keys { command } => teams::keys(cx, client, command).await,
        Command::Audit(command) => audit::run(cx, client, command).await,
        Command::Agents(command) => agents(cx, client, command).await,
        Command::Tasks(command) => tasks(cx, client, command).await,
        Command::Schedules(command) => schedules::run(cx, client, command).await,
        Command::Webhooks(command) => integrations::webhooks(cx, client, command).await,
        Command::Triggers(command) => integrations::triggers(cx, client, command).await,
        Command::Chat(command) => chat::chat(cx, client, command).await,
        Command::Billing => cx.emit(&client.billing().await?),
        Command::Budget { set, clear } => {
            let reply = match (set, clear) {
                (Some(usd), _) => {
                    let request = BudgetRequest { monthly_usd: Some(Some(usd)) };
                    client.set_budget(&request).await?
                }
                (None, true) => {
                    client.set_budget(&BudgetRequest { monthly_usd: Some(None) }).await?
                }
                (None, false) => client.budget().await?,
            };
            cx.emit(&reply)
        }
        Command::Usage { from, to, agent, group_by } => {
            let params = UsageParams { from, to, agent_id: agent, group_by: Some(group_by) };
            cx.emit(&client.usage(&params).await?)
        }
        Command::Tools => cx.emit(&client.tools().await?),
        Command::Mcp(command) => chat::mcp(cx, client, command).await,
        Command::Templates => cx.emit(&client.templates().await?),
        Command::Onboard(args) => onboard::run(cx, client, args).await,
        Command::Completions { .. } | Command::Run => Ok(()),
    }
}

async fn logout(cx: &mut Context, client: &Client) -> Result<(), Failure> {
    let reply = client.logout().await;
    cx.profiles.remove(&cx.global.profile)?;
    match reply {
        Ok(reply) => cx.emit(&reply),
        // The token was revoked already: forgetting it is all that was left to do.
        Err(failure) if failure.kind == Kind::Auth => {
            eprintln!("The session had ended already; the login is forgotten.");
            Ok(())
        }
        Err(failure) => Err(failure),
    }
}

async fn agents(cx: &Context, client: &Client, command: AgentsCommand) -> Result<(), Failure> {
    match command {
        AgentsCommand::List { workspace, status } => {
            let filter = AgentQuery { workspace, status };
            cx.emit(&client.list_agents(&filter).await?)
        }
        AgentsCommand::Show { id } => cx.emit(&client.agent(&id).await?),
        AgentsCommand::Create { id, name, role_prompt, channel, settings } => {
            let settings = Settings::read(settings)?;
            let request = CreateAgentRequest {
                id: Some(id),
                name: Some(name),
                role_prompt: Some(role_prompt),
                channel: Some(channel),
                workspace: settings.workspace.flatten(),
                throttle_seconds: settings.throttle_seconds,
                model: settings.model.flatten(),
                tools: settings.tools,
                max_steps: settings.max_steps,
                mcp_servers: settings.mcp_servers,
                budget_monthly_usd: settings.budget_monthly_usd.flatten(),
                approval_tools: settings.approval_tools,
                fallback_models: settings.fallback_models.flatten(),
            };
            cx.emit(&client.create_agent(&request).await?)
        }
        AgentsCommand::Update { id, name, role_prompt, channel, status, settings } => {
            let settings = Settings::read(settings)?;
            let request = UpdateAgentRequest {
                name,
                role_prompt,
                channel,
                status,
                workspace: settings.workspace,
                throttle_seconds: settings.throttle_seconds,
                model: settings.model,
                tools: settings.tools,
                max_steps: settings.max_steps,
                mcp_servers: settings.mcp_servers,
                budget_monthly_usd: settings.budget_monthly_usd,
                approval_tools: settings.approval_tools,
                fallback_models: settings.fallback_models,
            };
            if request.is_empty() {
                return Err(Failure::usage(
                    "nothing to change: give at least one field, e.g. --name",
                ));
            }
            cx.emit(&client.update_agent(&id, &request).await?)
        }
        AgentsCommand::Delete { id } => {
            cx.confirm(&format!("Delete agent '{id}' with its backlog and activity?"))?;
            cx.emit(&client.delete_agent(&id).await?)
        }
        AgentsCommand::Start { id } => cx.emit(&client.start_agent(&id).await?),
        AgentsCommand::Stop { id } => cx.emit(&client.stop_agent(&id).await?),
        AgentsCommand::Vacation { id, on, off } => {
            let request = (on || off).then_some(VacationRequest { enabled: Some(on) });
            cx.emit(&client.vacation(&id, request.as_ref()).await?)
        }
        AgentsCommand::Memory { id, set, clear } => {
            let memory = match (set, clear) {
                (Some(text), _) => Some(text),
                (None, true) => Some(String::new()),
                (None, false) => None,
            };
            let reply = match memory {
                Some(memory) => {
                    let request = SetMemoryRequest { memory: Some(memory) };
                    client.set_memory(&id, &request).await?
                }
                None => client.memory(&id).await?,
            };
            cx.emit(&reply)
        }
        AgentsCommand::Watch { id } => watch::agents(cx, client, id).await,
        AgentsCommand::Activity { id, limit, before } => {
            let page = ActivityQuery { limit, before };
            cx.emit(&client.activity(&id, &page).await?)
        }
    }
}

async fn tasks(cx: &Context, client: &Client, command: TasksCommand) -> Result<(), Failure> {
    match command {
        TasksCommand::Add { agent, title, description, priority, watch } => {
            let request = CreateTaskRequest { title: Some(title), description, priority };
            if watch {
                return watch::add(cx, client, agent, &request).await;
            }
            let added = client.add_task(&agent, &request).await?;
            cx.show(&added.answer.raw, &Added(&added.body))
        }
        TasksCommand::List { agent, status } => cx.emit(&client.tasks(&agent, status).await?),
        TasksCommand::Show { agent, task } => cx.emit(&client.task(&agent, &task).await?),
        TasksCommand::Update { agent, task, title, description, priority } => {
            let request =
                UpdateTaskRequest { title, description: description.map(clearable), priority };
            if request.is_empty() {
                return Err(Failure::usage(
                    "nothing to change: give --title, --description or --priority",
                ));
            }
            cx.emit(&client.update_task(&agent, &task, &request).await?)
        }
        TasksCommand::Delete { agent, task } => cx.emit(&client.delete_task(&agent, &task).await?),
        TasksCommand::Retry { agent, task } => cx.emit(&client.retry_task(&agent, &task).await?),
        TasksCommand::Approve { agent, task } => {
            cx.emit(&client.decide_task(&agent, &task, "approve").await?)
        }
        TasksCommand::Deny { agent, task } => {
            cx.emit(&client.decide_task(&agent, &task, "deny").await?)
        }
        TasksCommand::Steps { agent, task } => cx.emit(&client.steps(&agent, &task).await?),
        TasksCommand::Cancel { agent, task } => cx.emit(&client.cancel_task(&agent, &task).await?),
        TasksCommand::Watch { agent, task: Some(task) } => {
            watch::task(cx, client, agent, task).await
        }
        TasksCommand::Watch { agent, task: None } => watch::agents(cx, client, Some(agent)).await,
    }
}

/// `agentctl run`: this process runs the agents and delivers their posts, like a server
/// without HTTP, until Ctrl-C or SIGTERM.
async fn run_agents(cx: &Context) -> Result<(), Failure> {
    if !cx.is_local() {
        return Err(Failure::usage(
            "`run` works on the database directly: add --local (a server runs its agents itself)",
        ));
    }
    let core = cx.open_core().await?;
    let outbox = agentcore::OutboxWorker::start(&core);
    let runtime = agentcore::Runtime::start(&core);
    let webhooks = agentcore::WebhookWorker::start(&core);
    eprintln!(
        "Running the active agents on the {} database (node {}); Ctrl-C stops.",
        core.backend(),
        core.node_id()
    );
    agentd::shutdown_signal().await;
    runtime.shutdown().await;
    webhooks.shutdown().await;
    outbox.shutdown().await;
    core.close().await;
    eprintln!("Stopped.");
    Ok(())
}

/// Writes a line to stdout; a reader that went away (`| head`) is not an error.
fn print_out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", text.trim_end_matches('\n'));
}

/// An empty flag value clears a nullable field.
fn clearable(value: String) -> Option<String> {
    if value.is_empty() { None } else { Some(value) }
}

/// An agent's settings as given on the command line, read: `Some(None)` where the value
/// clears the setting (an empty workspace or model, a budget of `none`).
struct Settings {
    workspace: Option<Option<String>>,
    throttle_seconds: Option<f64>,
    model: Option<Option<String>>,
    tools: Option<Vec<String>>,
    max_steps: Option<i64>,
    mcp_servers: Option<Vec<String>>,
    budget_monthly_usd: Option<Option<f64>>,
    approval_tools: Option<Vec<String>>,
    /// `Some(None)`: back to the server's chain.
    fallback_models: Option<Option<Vec<String>>>,
}

impl Settings {
    fn read(given: crate::cli::AgentSettings) -> Result<Self, Failure> {
        let list = |items: Option<String>| items.map(|all| crate::render::list_items(&all));
        let budget_monthly_usd = match given.budget_monthly_usd.as_deref() {
            None => None,
            Some("none") => Some(None),
            Some(raw) => Some(Some(raw.parse::<f64>().map_err(|_| {
                Failure::usage(format!(
                    "--budget-monthly-usd: '{raw}' is not a number of dollars (or none)"
                ))
            })?)),
        };
        Ok(Self {
            workspace: given.workspace.map(clearable),
            throttle_seconds: given.throttle_seconds,
            model: given.model.map(clearable),
            tools: list(given.tools),
            max_steps: given.max_steps,
            mcp_servers: list(given.mcp_servers),
            budget_monthly_usd,
            approval_tools: list(given.approval_tools),
            fallback_models: given.fallback_models.map(|all| match all.as_str() {
                "default" => None,
                _ => Some(crate::render::list_items(&all)),
            }),
        })
    }
}
