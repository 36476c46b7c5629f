//! `agentctl onboard` on a terminal: the wizard from nothing to a working agent.

use super::*;

backend_tests! { app;
    the_wizard_registers_installs_the_bot_and_starts_the_agent,
    the_wizard_logs_in_connects_a_bot_and_leaves_the_agent_idle_locally,
    quitting_the_wizard_at_any_question_creates_no_agent,
}

backend_tests! { app_without_discord_app;
    the_wizard_does_not_offer_a_bot_the_server_does_not_have,
}

async fn the_wizard_registers_installs_the_bot_and_starts_the_agent(app: TestApp) {
    let ctl = Ctl::remote(&app);
    let guild = "888";
    app.discord.add_guild(guild, "Acme HQ", &[]);
    app.discord.issue_code("pty-code", guild);
    let mut term = Terminal::spawn(ctl.command(&["onboard"]));
    term.answer("Do you have an account?", &format!("{DOWN}{ENTER}")).await;
    term.answer("E-mail", &format!("pat@example.com{ENTER}")).await;
    term.answer("Your name", &format!("Pat{ENTER}")).await;
    term.answer_secret("Password", PASSWORD).await;
    term.answer_secret("Repeat it", PASSWORD).await;
    // marketing, support, ...: one down picks support.
    term.answer("Which role?", &format!("{DOWN}{ENTER}")).await;
    term.answer("Your company's name", &format!("Acme{ENTER}")).await;
    term.answer("Post the agent's work to Discord?", &format!("{DOWN}{ENTER}")).await;
    term.expect("Open this link").await;
    term.expect(&format!("client_id={}", crate::fake_discord::CLIENT_ID)).await;
    term.answer("The `code` from the page you land on", &format!("pty-code{ENTER}")).await;
    term.expect("Connected Acme HQ").await;
    // Text channels by position: #updates, then #general.
    term.expect("#updates").await;
    term.answer("#general", &format!("{DOWN}{ENTER}")).await;
    term.answer("A first task of your own", &format!("Write the FAQ{ENTER}")).await;
    term.answer("Start the agent now?", "y").await;
    // Everything of the agent is made after the last answer.
    term.expect("Created agent support-lead").await;
    term.expect("Mapped support-lead to #general").await;
    term.expect("Started support-lead").await;
    term.expect("(Support Lead), active").await;
    term.expect("agentctl agents activity support-lead").await;
    assert!(term.wait().await.success(), "{}", term.text());
    assert!(!term.text().contains(PASSWORD), "the password is never echoed:\n{}", term.text());

    // The wizard's login was saved: the next commands need no password.
    let agent = ctl.run(&["-o", "json", "agents", "show", "support-lead"]).await.ok().json();
    assert_eq!(agent["status"], "active");
    assert!(agent["role_prompt"].as_str().unwrap().contains("Acme"), "{agent}");
    let titles: Vec<_> = agent["backlog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap().to_owned())
        .collect();
    assert!(titles.contains(&"Write the FAQ".to_owned()), "{titles:?}");
    let mappings = ctl.run(&["-o", "json", "chat", "mappings"]).await.ok().json();
    assert_eq!(mappings["mappings"][0]["agent_id"], "support-lead");
    assert_eq!(mappings["mappings"][0]["channel_id"], format!("{guild}1"));
}

async fn the_wizard_logs_in_connects_a_bot_and_leaves_the_agent_idle_locally(app: TestApp) {
    app.register("lee@example.com").await;
    let (guild, bot) = ("999", "wizard-bot-token.1");
    app.discord.add_bot(bot, "WizardBot");
    app.discord.add_guild(guild, "Lee's", &[bot]);
    let ctl = Ctl::local(&app);
    let mut term = Terminal::spawn(ctl.command(&["onboard"]));
    term.answer("Do you have an account?", ENTER).await;
    term.answer("E-mail", &format!("lee@example.com{ENTER}")).await;
    term.answer_secret("Password", PASSWORD).await;
    term.answer("Which role?", ENTER).await;
    term.answer("Your company's name", &format!("Lee Ltd{ENTER}")).await;
    term.answer("Post the agent's work to Discord?", ENTER).await;
    term.answer("Server (guild) id", &format!("{guild}{ENTER}")).await;
    term.answer_secret("Bot token", bot).await;
    term.expect("Connected Lee's").await;
    term.answer("Which channel?", ENTER).await;
    term.answer("A first task of your own", ENTER).await;
    term.answer("Start the agent now?", "n").await;
    term.expect("Created agent marketing-lead").await;
    term.expect("Mapped marketing-lead to #updates").await;
    term.expect("agentctl agents start marketing-lead").await;
    assert!(term.wait().await.success(), "{}", term.text());
    let screen = term.text();
    assert!(
        !screen.contains(PASSWORD) && !screen.contains(bot),
        "secrets are never echoed:\n{screen}"
    );
    assert!(!screen.contains("Started marketing-lead"), "{screen}");

    let agent = ctl.run(&["-o", "json", "agents", "show", "marketing-lead"]).await.ok().json();
    assert_eq!(agent["status"], "idle");
    assert_eq!(agent["backlog"].as_array().unwrap().len(), 1, "only the sample task: {agent}");
    let mappings = ctl.run(&["-o", "json", "chat", "mappings"]).await.ok().json();
    assert_eq!(mappings["mappings"][0]["channel_id"], format!("{guild}2"));
}

/// The agents of the account `ctl` is logged in to, through the API.
async fn agent_ids(ctl: &Ctl) -> Vec<Value> {
    ctl.run(&["-o", "json", "agents", "list"]).await.ok().json()["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|agent| agent["id"].clone())
        .collect()
}

async fn quitting_the_wizard_at_any_question_creates_no_agent(app: TestApp) {
    let ctl = Ctl::remote(&app);
    ctl.run(&["register", "--email", "quit@example.com", "--password", PASSWORD, "--name", "Q"])
        .await
        .ok();
    // Ctrl-C at a question that takes text, Esc at the last one, a choice.
    for (question, keys) in [("A first task of your own", CTRL_C), ("Start the agent now?", ESC)] {
        let mut term = Terminal::spawn(ctl.command(&["onboard"]));
        term.answer("Which role?", ENTER).await;
        term.answer("Your company's name", &format!("Acme{ENTER}")).await;
        // Own bot, the service's bot, not now.
        term.answer("Post the agent's work to Discord?", &format!("{DOWN}{DOWN}{ENTER}")).await;
        if question == "Start the agent now?" {
            term.answer("A first task of your own", &format!("Write the FAQ{ENTER}")).await;
        }
        term.answer_keys(question, keys).await;
        let status = term.finish().await;
        assert!(!status.success(), "{}", term.text());
        if keys == ESC {
            // Ctrl-C interrupts the program at once (console raises SIGINT); Esc says so.
            assert_eq!(status.code(), Some(2), "{}", term.text());
            assert!(term.text().contains("no agent was created"), "{}", term.text());
        }
        assert!(!term.text().contains("Created agent"), "{}", term.text());
        assert_eq!(agent_ids(&ctl).await, Vec::<Value>::new(), "quit at {question:?}");
    }
}

async fn the_wizard_does_not_offer_a_bot_the_server_does_not_have(app: TestApp) {
    let ctl = Ctl::remote(&app);
    ctl.run(&["register", "--email", "nobot@example.com", "--password", PASSWORD, "--name", "N"])
        .await
        .ok();
    let mut term = Terminal::spawn(ctl.command(&["onboard"]));
    term.answer("Which role?", ENTER).await;
    term.answer("Your company's name", &format!("Acme{ENTER}")).await;
    term.expect("Post the agent's work to Discord?").await;
    // Own bot, not now: one down is "Not now".
    term.answer("Not now", &format!("{DOWN}{ENTER}")).await;
    let offered = term.text();
    assert!(!offered.contains("service's bot"), "offered a bot there is none of:\n{offered}");
    term.answer("A first task of your own", ENTER).await;
    term.answer("Start the agent now?", "n").await;
    term.expect("Created agent marketing-lead").await;
    assert!(term.finish().await.success(), "{}", term.text());
    assert_eq!(agent_ids(&ctl).await, vec![json!("marketing-lead")]);
}
