//! `agentctl onboard`: from nothing to a working agent. Every question has a flag; on a
//! terminal the wizard asks what the flags did not say, and without one a missing answer is a
//! usage error raised before anything is created.

use dialoguer::{Confirm, Input, Select};
use serde_json::{Value, json};

use crate::cli::OnboardArgs;
use crate::client::{Client, segment};
use crate::commands::{Context, interactive, password};
use crate::failure::{Failure, Kind};
use crate::render::View;

pub async fn run(cx: &mut Context, client: &Client, args: OnboardArgs) -> Result<(), Failure> {
    let asking = interactive();
    if !asking {
        check_flags(&args)?;
    }
    let client = &sign_in(cx, client, &args, asking).await?;

    let templates = client.get("/api/onboarding/templates").await?.value;
    let template = match args.template.clone() {
        Some(template) => template,
        None => pick_template(&templates["templates"])?,
    };
    let company = match args.company.clone() {
        Some(company) => company,
        None => Input::<String>::new().with_prompt("Your company's name").interact_text()?,
    };
    let onboarded = client
        .post("/api/onboarding/setup", json!({"company_name": company, "role_template": template}))
        .await?;
    let agent = onboarded.value["agent"]["id"].as_str().unwrap_or_default().to_owned();
    eprintln!("Created agent {agent} with its sample task.");

    if let Some(guild) = connect_discord(client, &args, asking).await? {
        let channel = match args.channel_id.clone() {
            Some(channel) => channel,
            None => pick_channel(client, &guild).await?,
        };
        let mapped = client
            .post(
                &format!("/api/chat/mappings/{}", segment(&guild)),
                json!({"agent_id": agent, "channel_id": channel}),
            )
            .await?;
        eprintln!(
            "Mapped {agent} to #{}.",
            mapped.value["channel_name"].as_str().unwrap_or(&channel)
        );
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
        client
            .post(&format!("/api/agents/{}/backlog", segment(&agent)), json!({"title": title}))
            .await?;
        eprintln!("Queued \"{title}\".");
    }

    let start = args.start
        || (asking
            && Confirm::new().with_prompt("Start the agent now?").default(true).interact()?);
    if start {
        client.post_empty(&format!("/api/agents/{}/start", segment(&agent))).await?;
        eprintln!("Started {agent}.");
    }

    cx.emit(&onboarded, View::Onboarded)?;
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
        match client.get("/auth/me").await {
            Ok(me) => {
                eprintln!("Signed in as {}.", me.value["email"].as_str().unwrap_or_default());
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
    let answer = if register {
        let name = match args.name.clone() {
            Some(name) => name,
            None => Input::<String>::new().with_prompt("Your name").interact_text()?,
        };
        let password = password(None, true)?;
        client
            .post("/auth/register", json!({"email": email, "password": password, "name": name}))
            .await?
    } else {
        let password = password(None, false)?;
        client.post("/auth/login", json!({"email": email, "password": password})).await?
    };
    let token = cx.remember(&answer, &email)?;
    Ok(Client { transport: client.transport.clone(), token: Some(token) })
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
            let url = client.get("/api/chat/oauth-url").await?.value;
            eprintln!(
                "Open this link, pick the server and authorise the bot:\n\n  {}\n",
                url["url"].as_str().unwrap_or_default()
            );
            let code: String =
                Input::new().with_prompt("The `code` from the page you land on").interact_text()?;
            let connected = client
                .post("/api/chat/callback", json!({"code": code.trim(), "state": url["state"]}))
                .await?;
            eprintln!("Connected {}.", connected.value["guild_name"].as_str().unwrap_or_default());
            Ok(connected.value["guild_id"].as_str().map(str::to_owned))
        }
        _ => Ok(None),
    }
}

/// Connects `guild` with the user's own bot; returns the guild id.
async fn connect_with_token(client: &Client, guild: &str, token: &str) -> Result<String, Failure> {
    let connected =
        client.post("/api/chat/connect", json!({"guild_id": guild, "bot_token": token})).await?;
    eprintln!("Connected {}.", connected.value["guild_name"].as_str().unwrap_or(guild));
    Ok(guild.to_owned())
}

fn pick_template(templates: &Value) -> Result<String, Failure> {
    let templates = templates.as_array().cloned().unwrap_or_default();
    let items: Vec<String> = templates
        .iter()
        .map(|t| {
            format!(
                "{}: {}",
                t["name"].as_str().unwrap_or_default(),
                t["description"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let chosen = Select::new().with_prompt("Which role?").items(&items).default(0).interact()?;
    Ok(templates[chosen]["id"].as_str().unwrap_or_default().to_owned())
}

async fn pick_channel(client: &Client, guild: &str) -> Result<String, Failure> {
    let channels =
        client.get(&format!("/api/chat/connections/{}/channels", segment(guild))).await?.value;
    let channels = channels["channels"].as_array().cloned().unwrap_or_default();
    if channels.is_empty() {
        return Err(Failure::usage("the server has no text channel the bot can post to"));
    }
    let items: Vec<String> =
        channels.iter().map(|c| format!("#{}", c["name"].as_str().unwrap_or_default())).collect();
    let chosen = Select::new().with_prompt("Which channel?").items(&items).default(0).interact()?;
    Ok(channels[chosen]["id"].as_str().unwrap_or_default().to_owned())
}
