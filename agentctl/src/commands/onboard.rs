//! `agentctl onboard`: from nothing to a working agent. Every question has a flag; on a
//! terminal the wizard asks what the flags did not say, and without one a missing answer is a
//! usage error raised before anything is created.
//!
//! The wizard asks everything first and creates the agent, its tasks, its channel mapping and
//! its start only after the last answer, so quitting at any question (Ctrl-C, which ends the
//! program, or Esc or `q` at a choice, which says so) leaves no agent. Two things are made before, because later questions need them:
//! the account, once its answers are in (the Discord questions act as that account), and a
//! Discord server's connection, once its answers are in (its channels are listed from it; it
//! belongs to the workspace, not to the agent, and any later agent can use it). The service's
//! own bot is offered only when the server has it configured: `GET /api/chat/oauth-url`
//! answers `not_configured` otherwise.

use dialoguer::{Confirm, Input, Select};

use agentcore::api::{
    CallbackRequest, ConnectRequest, CreateTaskRequest, LoginRequest, MapRequest, RegisterRequest,
    SetupRequest,
};
use agentcore::domain::onboarding::Template;
use agentcore::{OauthUrl, Session};

use super::{Context, interactive, password};
use crate::api::Reply;
use crate::cli::OnboardArgs;
use crate::client::Client;
use crate::failure::{Failure, Kind};

/// Every answer the wizard needs, gathered before anything of the agent is made.
struct Answers {
    template: String,
    company: String,
    /// The connected Discord server and the channel to map the agent to.
    discord: Option<(String, String)>,
    task: Option<String>,
    start: bool,
}

pub(crate) async fn run(
    cx: &mut Context,
    client: &Client,
    args: OnboardArgs,
) -> Result<(), Failure> {
    let asking = interactive();
    if !asking {
        check_flags(&args)?;
    }
    let client = &sign_in(cx, client, &args, asking).await?;
    let answers = ask(client, &args, asking).await?;

    let setup =
        SetupRequest { company_name: Some(answers.company), role_template: Some(answers.template) };
    let mut onboarded = client.setup(&setup).await?;
    let agent = onboarded.body.agent.id.as_str().to_owned();
    eprintln!("Created agent {agent} with its sample task.");
    if let Some((guild, channel)) = answers.discord {
        let request = MapRequest {
            agent_id: Some(agent.clone()),
            channel_id: Some(channel),
            channel_name: None,
        };
        let mapped = client.map(&guild, &request).await?.body;
        eprintln!("Mapped {agent} to #{}.", mapped.mapping.channel_name);
    }
    if let Some(title) = answers.task {
        let request = CreateTaskRequest { title: Some(title.clone()), ..Default::default() };
        client.add_task(&agent, &request).await?;
        eprintln!("Queued \"{title}\".");
    }
    if answers.start {
        client.start_agent(&agent).await?;
        eprintln!("Started {agent}.");
        // The setup's answer says how the agent was made (idle): show it as it is now.
        let status = client.agent(&agent).await?.body.agent.summary.status;
        onboarded.body.agent.status = status;
        if let Some(shown) = onboarded.answer.value.get_mut("agent") {
            shown["status"] = serde_json::to_value(status).map_err(Failure::internal)?;
        }
        onboarded.answer.raw = onboarded.answer.value.to_string();
    }

    cx.emit(&onboarded)?;
    eprintln!("\nNext:");
    eprintln!("  agentctl agents show {agent}        # the agent and its backlog");
    eprintln!("  agentctl agents activity {agent}    # what it did");
    eprintln!("  agentctl tasks add {agent} \"...\"    # more work");
    if !answers.start {
        eprintln!("  agentctl agents start {agent}       # let it work");
    }
    Ok(())
}

/// The answers the flags did not give, asked on a terminal; the Discord server is connected
/// on the way (see the module's doc), the agent is not.
async fn ask(client: &Client, args: &OnboardArgs, asking: bool) -> Result<Answers, Failure> {
    let template = match args.template.clone() {
        Some(template) => template,
        None => pick_template(&client.templates().await?.body.templates)?,
    };
    let company = match args.company.clone() {
        Some(company) => company,
        None => asked(Input::<String>::new().with_prompt("Your company's name").interact_text())?,
    };
    let discord = match connect_discord(client, args, asking).await? {
        Some(guild) => {
            let channel = match args.channel_id.clone() {
                Some(channel) => channel,
                None => pick_channel(client, &guild).await?,
            };
            Some((guild, channel))
        }
        None => None,
    };
    let task = match args.task.clone() {
        Some(task) => Some(task),
        None if asking => {
            let title: String = asked(
                Input::new()
                    .with_prompt("A first task of your own (empty to skip)")
                    .allow_empty(true)
                    .interact_text(),
            )?;
            Some(title).filter(|t| !t.trim().is_empty())
        }
        None => None,
    };
    let start = args.start
        || (asking
            && chosen(
                Confirm::new().with_prompt("Start the agent now?").default(true).interact_opt(),
            )?);
    Ok(Answers { template, company, discord, task, start })
}

/// What a person who quit is told: the command failed, and nothing of the agent was made.
fn quit() -> Failure {
    Failure::usage("Quit before the last answer: no agent was created.")
}

/// A prompt's answer; Ctrl-C is quitting. (On a terminal Ctrl-C usually ends the program at
/// once, before anything of the agent is made; this is for when the signal is not delivered.)
fn asked<T>(answer: dialoguer::Result<T>) -> Result<T, Failure> {
    answer.map_err(|error| {
        let dialoguer::Error::IO(io) = &error;
        if io.kind() == std::io::ErrorKind::Interrupted { quit() } else { error.into() }
    })
}

/// A choice's answer; Esc or `q` (no choice) is quitting, as Ctrl-C is.
fn chosen<T>(answer: dialoguer::Result<Option<T>>) -> Result<T, Failure> {
    asked(answer)?.ok_or_else(quit)
}

/// Without a terminal nothing can be asked: everything needed must be in the flags.
fn check_flags(args: &OnboardArgs) -> Result<(), Failure> {
    let mut missing = Vec::new();
    if args.template.is_none() {
        missing.push("--template");
    }
    if args.company.is_none() {
        missing.push("--company");
    }
    if args.register && (args.email.is_none() || args.name.is_none()) {
        missing.push("--email and --name (with --register)");
    }
    let discord = args.guild_id.is_some() || args.bot_token.is_some();
    if discord && !args.no_discord {
        if args.guild_id.is_none() || args.bot_token.is_none() {
            missing.push("--guild-id and --bot-token (together)");
        }
        if args.channel_id.is_none() {
            missing.push("--channel-id");
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Failure::usage(format!("no terminal to ask on; give {}", missing.join(", "))))
    }
}

/// The client to go on with: the profile's login when it still works, else a new one.
async fn sign_in(
    cx: &mut Context,
    client: &Client,
    args: &OnboardArgs,
    asking: bool,
) -> Result<Client, Failure> {
    if args.email.is_none() && cx.profile.is_some() {
        match client.me().await {
            Ok(me) => {
                eprintln!("Signed in as {}.", me.body.email);
                return Ok(client.clone());
            }
            Err(failure) if failure.kind == Kind::Auth && asking => {
                eprintln!("The saved login has ended; sign in again.");
            }
            Err(failure) => return Err(failure),
        }
    }
    let register = match &args.email {
        Some(_) => args.register,
        None if asking => {
            let accounts = ["Yes, log in", "No, create one"];
            let choice = Select::new()
                .with_prompt("Do you have an account?")
                .items(&accounts)
                .default(0)
                .interact_opt();
            chosen(choice)? == 1
        }
        None => {
            return Err(Failure::auth(
                "not logged in: run `agentctl login` first, or give --email (and --register)",
            ));
        }
    };
    let email = match args.email.clone() {
        Some(email) => email,
        None => asked(Input::<String>::new().with_prompt("E-mail").interact_text())?,
    };
    let session: Reply<Session> = if register {
        let name = match args.name.clone() {
            Some(name) => name,
            None => asked(Input::<String>::new().with_prompt("Your name").interact_text())?,
        };
        let password = password(None, true)?;
        let request = RegisterRequest {
            email: Some(email.clone()),
            password: Some(password),
            name: Some(name),
        };
        client.register(&request).await?
    } else {
        let password = password(None, false)?;
        client.login(&LoginRequest { email: Some(email.clone()), password: Some(password) }).await?
    };
    let token = cx.remember(&session.body, &email)?;
    Ok(Client { token: Some(token), ..client.clone() })
}

/// Connects a Discord server with the flags, or as the person chooses; `None` to skip.
async fn connect_discord(
    client: &Client,
    args: &OnboardArgs,
    asking: bool,
) -> Result<Option<String>, Failure> {
    if args.no_discord {
        return Ok(None);
    }
    if let (Some(guild), Some(token)) = (&args.guild_id, &args.bot_token) {
        return connect_with_token(client, guild, token).await.map(Some);
    }
    if !asking {
        return Ok(None);
    }
    let service_bot = service_bot(client).await?;
    let mut ways = vec![Way::OwnBot];
    ways.extend(service_bot.map(Way::ServiceBot));
    ways.push(Way::NotNow);
    let labels: Vec<&str> = ways.iter().map(Way::label).collect();
    let choice = Select::new()
        .with_prompt("Post the agent's work to Discord?")
        .items(&labels)
        .default(0)
        .interact_opt();
    match ways.swap_remove(chosen(choice)?) {
        Way::OwnBot => {
            let guild: String =
                asked(Input::new().with_prompt("Server (guild) id").interact_text())?;
            let token = asked(dialoguer::Password::new().with_prompt("Bot token").interact())?;
            connect_with_token(client, &guild, &token).await.map(Some)
        }
        Way::ServiceBot(url) => {
            eprintln!("Open this link, pick the server and authorise the bot:\n\n  {}\n", url.url);
            let code: String = asked(
                Input::new().with_prompt("The `code` from the page you land on").interact_text(),
            )?;
            let request = CallbackRequest {
                code: Some(code.trim().to_owned()),
                state: Some(url.state),
                guild_id: None,
            };
            let connected = client.callback(&request).await?.body;
            eprintln!("Connected {}.", connected.guild_name);
            Ok(Some(connected.guild_id))
        }
        Way::NotNow => Ok(None),
    }
}

/// How the agent's work may reach Discord: the service's bot only where the server has one.
enum Way {
    OwnBot,
    ServiceBot(OauthUrl),
    NotNow,
}

impl Way {
    fn label(&self) -> &'static str {
        match self {
            Way::OwnBot => "Yes, with my own bot token",
            Way::ServiceBot(_) => "Yes, install the service's bot",
            Way::NotNow => "Not now",
        }
    }
}

/// The service's bot's install link, or `None` when the server has no bot of its own.
async fn service_bot(client: &Client) -> Result<Option<OauthUrl>, Failure> {
    match client.oauth_url().await {
        Ok(url) => Ok(Some(url.body)),
        Err(failure) if failure.code.as_deref() == Some("not_configured") => Ok(None),
        Err(failure) => Err(failure),
    }
}

/// Connects `guild` with the user's own bot; returns the guild id.
async fn connect_with_token(client: &Client, guild: &str, token: &str) -> Result<String, Failure> {
    let request = ConnectRequest {
        guild_id: Some(guild.to_owned()),
        bot_token: Some(token.to_owned()),
        guild_name: None,
        public_key: None,
    };
    let connected = client.connect(&request).await?.body;
    eprintln!("Connected {}.", connected.guild_name);
    Ok(connected.guild_id)
}

fn pick_template(templates: &[Template]) -> Result<String, Failure> {
    let items: Vec<String> =
        templates.iter().map(|t| format!("{}: {}", t.name, t.description)).collect();
    let chosen =
        chosen(Select::new().with_prompt("Which role?").items(&items).default(0).interact_opt())?;
    Ok(templates[chosen].id.to_string())
}

async fn pick_channel(client: &Client, guild: &str) -> Result<String, Failure> {
    let channels = client.channels(guild).await?.body.channels;
    if channels.is_empty() {
        return Err(Failure::usage("the server has no text channel the bot can post to"));
    }
    let items: Vec<String> = channels.iter().map(|c| format!("#{}", c.name)).collect();
    let picked = Select::new().with_prompt("Which channel?").items(&items).default(0);
    Ok(channels[chosen(picked.interact_opt())?].id.clone())
}
