//! `agentctl onboard`: from nothing to a working agent. Every question has a flag; on a
//! terminal the wizard asks what the flags did not say, and without one a missing answer is a
//! usage error raised before anything is created.

use dialoguer::{Confirm, Input, Select};

use agentcore::api::{
    CallbackRequest, ConnectRequest, CreateTaskRequest, LoginRequest, MapRequest, RegisterRequest,
    SetupRequest,
};
use agentcore::domain::onboarding::Template;

use super::{Context, interactive, password};
use crate::cli::OnboardArgs;
use crate::client::Client;
use crate::failure::{Failure, Kind};

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

    let templates = client.templates().await?.body.templates;
    let template = match args.template.clone() {
        Some(template) => template,
        None => pick_template(&templates)?,
    };
    let company = match args.company.clone() {
        Some(company) => company,
        None => Input::<String>::new().with_prompt("Your company's name").interact_text()?,
    };
    let setup = SetupRequest { company_name: Some(company), role_template: Some(template) };
    let onboarded = client.setup(&setup).await?;
    let agent = onboarded.body.agent.id.as_str().to_owned();
    eprintln!("Created agent {agent} with its sample task.");

    if let Some(guild) = connect_discord(client, &args, asking).await? {
        let channel = match args.channel_id.clone() {
            Some(channel) => channel,
            None => pick_channel(client, &guild).await?,
        };
        let request = MapRequest {
            agent_id: Some(agent.clone()),
            channel_id: Some(channel),
            channel_name: None,
        };
        let mapped = client.map(&guild, &request).await?.body;
        eprintln!("Mapped {agent} to #{}.", mapped.mapping.channel_name);
    }

    let task = match args.task.clone() {
        Some(task) => Some(task),
        None if asking => {
            let title: String = Input::new()
                .with_prompt("A first task of your own (empty to skip)")
                .allow_empty(true)
                .interact_text()?;
            Some(title).filter(|t| !t.trim().is_empty())
        }
        None => None,
    };
    if let Some(title) = task {
        let request = CreateTaskRequest { title: Some(title.clone()), ..Default::default() };
        client.add_task(&agent, &request).await?;
        eprintln!("Queued \"{title}\".");
    }

    let start = args.start
        || (asking
            && Confirm::new().with_prompt("Start the agent now?").default(true).interact()?);
    if start {
        client.start_agent(&agent).await?;
        eprintln!("Started {agent}.");
    }

    cx.emit(&onboarded)?;
    eprintln!("\nNext:");
    eprintln!("  agentctl agents show {agent}        # the agent and its backlog");
    eprintln!("  agentctl agents activity {agent}    # what it did");
    eprintln!("  agentctl tasks add {agent} \"...\"    # more work");
    if !start {
        eprintln!("  agentctl agents start {agent}       # let it work");
    }
    Ok(())
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
            let choice = Select::new()
                .with_prompt("Do you have an account?")
                .items(&["Yes, log in", "No, create one"])
                .default(0)
                .interact()?;
            choice == 1
        }
        None => {
            return Err(Failure::auth(
                "not logged in: run `agentctl login` first, or give --email (and --register)",
            ));
        }
    };
    let email = match args.email.clone() {
        Some(email) => email,
        None => Input::<String>::new().with_prompt("E-mail").interact_text()?,
    };
    let session = if register {
        let name = match args.name.clone() {
            Some(name) => name,
            None => Input::<String>::new().with_prompt("Your name").interact_text()?,
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
    let choice = Select::new()
        .with_prompt("Post the agent's work to Discord?")
        .items(&["Yes, with my own bot token", "Yes, install the service's bot", "Not now"])
        .default(0)
        .interact()?;
    match choice {
        0 => {
            let guild: String = Input::new().with_prompt("Server (guild) id").interact_text()?;
            let token = dialoguer::Password::new().with_prompt("Bot token").interact()?;
            connect_with_token(client, &guild, &token).await.map(Some)
        }
        1 => {
            let url = client.oauth_url().await?.body;
            eprintln!("Open this link, pick the server and authorise the bot:\n\n  {}\n", url.url);
            let code: String =
                Input::new().with_prompt("The `code` from the page you land on").interact_text()?;
            let request = CallbackRequest {
                code: Some(code.trim().to_owned()),
                state: Some(url.state),
                guild_id: None,
            };
            let connected = client.callback(&request).await?.body;
            eprintln!("Connected {}.", connected.guild_name);
            Ok(Some(connected.guild_id))
        }
        _ => Ok(None),
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
    let chosen = Select::new().with_prompt("Which role?").items(&items).default(0).interact()?;
    Ok(templates[chosen].id.to_string())
}

async fn pick_channel(client: &Client, guild: &str) -> Result<String, Failure> {
    let channels = client.channels(guild).await?.body.channels;
    if channels.is_empty() {
        return Err(Failure::usage("the server has no text channel the bot can post to"));
    }
    let items: Vec<String> = channels.iter().map(|c| format!("#{}", c.name)).collect();
    let chosen = Select::new().with_prompt("Which channel?").items(&items).default(0).interact()?;
    Ok(channels[chosen].id.clone())
}
