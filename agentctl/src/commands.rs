//! Each command as the request it makes and the view its answer takes.

use std::io::IsTerminal;

use serde_json::{Map, Value, json};

use agentcore::Core;

use crate::cli::{AgentsCommand, ChatCommand, Cli, Command, Global, Output, TasksCommand};
use crate::client::{Answer, Client, Transport, segment};
use crate::failure::{Failure, Kind};
use crate::onboard;
use crate::profile::{Profile, Profiles};
use crate::render::View;

const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// What every command needs: the options, the saved login, and a way to reach the service.
pub struct Context {
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
    pub async fn open_core(&self) -> Result<Core, Failure> {
        let flags =
            agentd::config::Flags { database_url: self.database_url(), ..Default::default() };
        let config = agentd::config::Config::load(&flags, &|name| std::env::var(name).ok())
            .and_then(|config| config.core_config())
            .map_err(|e| Failure::usage(e.to_string()))?;
        Core::open(config).await.map_err(|e| {
            Failure::network(format!("cannot open the database: {}", e.public_message()))
        })
    }

    /// A client for the mode in use, with the profile's token.
    pub async fn client(&self) -> Result<Client, Failure> {
        let transport = if self.is_local() {
            Transport::local(self.open_core().await?)
        } else {
            Transport::remote(&self.server())?
        };
        Ok(Client { transport, token: self.profile.as_ref().map(|p| p.token.clone()) })
    }

    /// Prints an answer: the service's JSON as it came, or its table.
    pub fn emit(&self, answer: &Answer, view: View) -> Result<(), Failure> {
        match self.global.output {
            Output::Json => print_out(&answer.raw),
            Output::Table => print_out(&view.render(&answer.value)),
        }
        Ok(())
    }

    /// Saves a fresh session as the profile and prints it without its token.
    pub fn keep_session(&mut self, answer: &Answer, email: &str) -> Result<(), Failure> {
        self.remember(answer, email)?;
        let mut shown = answer.value.clone();
        if let Some(object) = shown.as_object_mut() {
            object.remove("access_token");
        }
        self.emit(&Answer { raw: shown.to_string(), value: shown }, View::Session)
    }

    /// Saves a fresh session's token as the profile; returns the token.
    pub fn remember(&mut self, answer: &Answer, email: &str) -> Result<String, Failure> {
        let token = answer.value["access_token"]
            .as_str()
            .ok_or_else(|| Failure::network("the server's answer has no access_token"))?
            .to_owned();
        let local = self.is_local();
        let profile = Profile {
            server: (!local).then(|| self.server()),
            database_url: if local { self.database_url() } else { None },
            local,
            email: email.to_owned(),
            token: token.clone(),
        };
        let path = self.profiles.save(&self.global.profile, &profile)?;
        self.profile = Some(profile);
        eprintln!("The login is kept in {} (readable by you alone).", path.display());
        Ok(token)
    }

    /// Asks before something that cannot be undone; `--yes` answers for scripts.
    pub fn confirm(&self, question: &str) -> Result<(), Failure> {
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
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// `--password`, else `AGENTCTL_PASSWORD`, else asked on a terminal.
pub fn password(given: Option<String>, confirm: bool) -> Result<String, Failure> {
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

pub async fn run(cli: Cli) -> Result<(), Failure> {
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
            let client = cx.client().await?;
            let result = dispatch(&mut cx, &client, command).await;
            client.transport.close().await;
            result
        }
    }
}

async fn dispatch(cx: &mut Context, client: &Client, command: Command) -> Result<(), Failure> {
    match command {
        Command::Register { email, password: given, name } => {
            let password = password(given, true)?;
            let body = json!({"email": email, "password": password, "name": name});
            let answer = client.post("/auth/register", body).await?;
            cx.keep_session(&answer, &email)
        }
        Command::Login { email, password: given } => {
            let password = password(given, false)?;
            let body = json!({"email": email, "password": password});
            let answer = client.post("/auth/login", body).await?;
            cx.keep_session(&answer, &email)
        }
        Command::Logout => logout(cx, client).await,
        Command::Whoami => cx.emit(&client.get("/auth/me").await?, View::Fields),
        Command::Agents(command) => agents(cx, client, command).await,
        Command::Tasks(command) => tasks(cx, client, command).await,
        Command::Chat(command) => chat(cx, client, command).await,
        Command::Billing => cx.emit(&client.get("/api/billing").await?, View::Fields),
        Command::Templates => {
            cx.emit(&client.get("/api/onboarding/templates").await?, View::Templates)
        }
        Command::Onboard(args) => onboard::run(cx, client, args).await,
        Command::Completions { .. } | Command::Run => Ok(()),
    }
}

async fn logout(cx: &mut Context, client: &Client) -> Result<(), Failure> {
    let answer = client.post_empty("/auth/logout").await;
    cx.profiles.remove(&cx.global.profile)?;
    match answer {
        Ok(answer) => cx.emit(&answer, View::Fields),
        // The token was revoked already: forgetting it is all that was left to do.
        Err(failure) if failure.kind == Kind::Auth => {
            eprintln!("The session had ended already; the login is forgotten.");
            Ok(())
        }
        Err(failure) => Err(failure),
    }
}

async fn agents(cx: &Context, client: &Client, command: AgentsCommand) -> Result<(), Failure> {
    let path = |id: &str, rest: &str| format!("/api/agents/{}{rest}", segment(id));
    let (answer, view) = match command {
        AgentsCommand::List { workspace, status } => {
            let query = query(&[("workspace", workspace), ("status", status)]);
            (client.get(&format!("/api/agents{query}")).await?, View::Agents)
        }
        AgentsCommand::Show { id } => (client.get(&path(&id, "")).await?, View::Agent),
        AgentsCommand::Create {
            id,
            name,
            role_prompt,
            channel,
            workspace,
            throttle_seconds,
            model,
        } => {
            let body = object([
                ("id", Some(json!(id))),
                ("name", Some(json!(name))),
                ("role_prompt", Some(json!(role_prompt))),
                ("channel", Some(json!(channel))),
                ("workspace", workspace.map(Value::from)),
                ("throttle_seconds", throttle_seconds.map(Value::from)),
                ("model", model.map(Value::from)),
            ]);
            (client.post("/api/agents", body).await?, View::Agent)
        }
        AgentsCommand::Update {
            id,
            name,
            role_prompt,
            channel,
            workspace,
            status,
            throttle_seconds,
            model,
        } => {
            let body = object([
                ("name", name.map(Value::from)),
                ("role_prompt", role_prompt.map(Value::from)),
                ("channel", channel.map(Value::from)),
                ("workspace", workspace.map(clearable)),
                ("status", status.map(Value::from)),
                ("throttle_seconds", throttle_seconds.map(Value::from)),
                ("model", model.map(clearable)),
            ]);
            if body.as_object().is_some_and(Map::is_empty) {
                return Err(Failure::usage(
                    "nothing to change: give at least one field, e.g. --name",
                ));
            }
            (client.patch(&path(&id, ""), body).await?, View::Agent)
        }
        AgentsCommand::Delete { id } => {
            cx.confirm(&format!("Delete agent '{id}' with its backlog and activity?"))?;
            (client.delete(&path(&id, "")).await?, View::Fields)
        }
        AgentsCommand::Start { id } => {
            (client.post_empty(&path(&id, "/start")).await?, View::Fields)
        }
        AgentsCommand::Stop { id } => (client.post_empty(&path(&id, "/stop")).await?, View::Fields),
        AgentsCommand::Vacation { id, on, off } => {
            let vacation = path(&id, "/vacation");
            let answer = match (on, off) {
                (false, false) => client.post_empty(&vacation).await?,
                _ => client.post(&vacation, json!({"enabled": on})).await?,
            };
            (answer, View::Fields)
        }
        AgentsCommand::Activity { id, limit, before } => {
            let query = query(&[("limit", limit.map(|l| l.to_string())), ("before", before)]);
            (client.get(&path(&id, &format!("/activity{query}"))).await?, View::Activity)
        }
    };
    cx.emit(&answer, view)
}

async fn tasks(cx: &Context, client: &Client, command: TasksCommand) -> Result<(), Failure> {
    let backlog = |agent: &str| format!("/api/agents/{}/backlog", segment(agent));
    let task =
        |agent: &str, task: &str, rest: &str| format!("{}/{}{rest}", backlog(agent), segment(task));
    let (answer, view) = match command {
        TasksCommand::Add { agent, title, description, priority } => {
            let body = object([
                ("title", Some(json!(title))),
                ("description", description.map(Value::from)),
                ("priority", priority.map(Value::from)),
            ]);
            (client.post(&backlog(&agent), body).await?, View::Fields)
        }
        TasksCommand::List { agent, status } => {
            let query = query(&[("status", status)]);
            (client.get(&format!("{}{query}", backlog(&agent))).await?, View::Tasks)
        }
        TasksCommand::Show { agent, task: id } => {
            (client.get(&task(&agent, &id, "")).await?, View::Fields)
        }
        TasksCommand::Update { agent, task: id, title, description, priority } => {
            let body = object([
                ("title", title.map(Value::from)),
                ("description", description.map(clearable)),
                ("priority", priority.map(Value::from)),
            ]);
            if body.as_object().is_some_and(Map::is_empty) {
                return Err(Failure::usage(
                    "nothing to change: give --title, --description or --priority",
                ));
            }
            (client.patch(&task(&agent, &id, ""), body).await?, View::Fields)
        }
        TasksCommand::Delete { agent, task: id } => {
            (client.delete(&task(&agent, &id, "")).await?, View::Fields)
        }
        TasksCommand::Retry { agent, task: id } => {
            (client.post_empty(&task(&agent, &id, "/retry")).await?, View::Fields)
        }
    };
    cx.emit(&answer, view)
}

async fn chat(cx: &Context, client: &Client, command: ChatCommand) -> Result<(), Failure> {
    let (answer, view) = match command {
        ChatCommand::OauthUrl => (client.get("/api/chat/oauth-url").await?, View::Fields),
        ChatCommand::Callback { code, state, guild_id } => {
            let body = object([
                ("code", Some(json!(code))),
                ("state", state.map(Value::from)),
                ("guild_id", guild_id.map(Value::from)),
            ]);
            (client.post("/api/chat/callback", body).await?, View::Fields)
        }
        ChatCommand::Connect { guild_id, bot_token, guild_name } => {
            let body = object([
                ("guild_id", Some(json!(guild_id))),
                ("bot_token", Some(json!(bot_token))),
                ("guild_name", guild_name.map(Value::from)),
            ]);
            (client.post("/api/chat/connect", body).await?, View::Fields)
        }
        ChatCommand::Connections => (client.get("/api/chat/connections").await?, View::Connections),
        ChatCommand::Test { guild_id } => (
            client.post_empty(&format!("/api/chat/test/{}", segment(&guild_id))).await?,
            View::Fields,
        ),
        ChatCommand::Disconnect { guild_id } => {
            cx.confirm(&format!(
                "Disconnect server {guild_id}? Its mappings and pending posts are removed."
            ))?;
            let path = format!("/api/chat/connections/{}", segment(&guild_id));
            (client.delete(&path).await?, View::Fields)
        }
        ChatCommand::Channels { guild_id } => {
            let path = format!("/api/chat/connections/{}/channels", segment(&guild_id));
            (client.get(&path).await?, View::Channels)
        }
        ChatCommand::Map { agent, guild_id, channel_id, channel_name } => {
            let body = object([
                ("agent_id", Some(json!(agent))),
                ("channel_id", Some(json!(channel_id))),
                ("channel_name", channel_name.map(Value::from)),
            ]);
            (
                client.post(&format!("/api/chat/mappings/{}", segment(&guild_id)), body).await?,
                View::Fields,
            )
        }
        ChatCommand::Unmap { agent } => {
            (client.delete(&format!("/api/chat/mappings/{}", segment(&agent))).await?, View::Fields)
        }
        ChatCommand::Mappings => (client.get("/api/chat/mappings").await?, View::Mappings),
        ChatCommand::Send {
            agent,
            guild_id,
            content,
            embed_title,
            embed_description,
            embed_color,
        } => {
            let body = object([
                ("agent_id", Some(json!(agent))),
                ("content", content.map(Value::from)),
                ("embed_title", embed_title.map(Value::from)),
                ("embed_description", embed_description.map(Value::from)),
                ("embed_color", embed_color.map(Value::from)),
            ]);
            (
                client.post(&format!("/api/chat/send/{}", segment(&guild_id)), body).await?,
                View::Fields,
            )
        }
    };
    cx.emit(&answer, view)
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
    let outbox = core.start_outbox();
    let runtime = core.start_runtime();
    eprintln!(
        "Running the active agents on the {} database (node {}); Ctrl-C stops.",
        core.backend(),
        core.node_id()
    );
    agentd::shutdown_signal().await;
    runtime.shutdown().await;
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

/// A JSON object of the fields that are given.
fn object<const N: usize>(fields: [(&str, Option<Value>); N]) -> Value {
    let map: Map<String, Value> = fields
        .into_iter()
        .filter_map(|(key, value)| value.map(|value| (key.to_owned(), value)))
        .collect();
    Value::Object(map)
}

/// An empty flag value clears a nullable field.
fn clearable(value: String) -> Value {
    if value.is_empty() { Value::Null } else { Value::String(value) }
}

/// `?a=1&b=2` of the given pairs, percent-encoded; empty when none is given.
fn query(pairs: &[(&str, Option<String>)]) -> String {
    let given: Vec<String> = pairs
        .iter()
        .filter_map(|(key, value)| value.as_ref().map(|v| format!("{key}={}", segment(v))))
        .collect();
    if given.is_empty() { String::new() } else { format!("?{}", given.join("&")) }
}
