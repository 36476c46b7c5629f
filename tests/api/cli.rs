//! The real `agentctl` binary against a real `agentd` (remote) and against the same database
//! (local): output in both formats, exit codes, error messages, and the saved login.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::fake_discord::FakeDiscord;
use crate::fake_models::{FakeModels, OPENAI_KEY, Script};
use crate::helpers::{TestApp, backend_tests, eventually};
use crate::terminal::{DOWN, ENTER, Terminal};

/// One person's terminal: a config directory of their own and a way to reach the service.
struct Ctl {
    config: tempfile::TempDir,
    mode: Vec<String>,
    env: Vec<(&'static str, String)>,
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }

    fn ok(self) -> Self {
        assert_eq!(self.code, 0, "stdout: {}\nstderr: {}", self.stdout, self.stderr);
        self
    }
}

impl Ctl {
    fn remote(app: &TestApp) -> Self {
        Self {
            config: tempfile::tempdir().unwrap(),
            mode: vec!["--server".into(), app.address.clone()],
            env: Vec::new(),
        }
    }

    /// Local mode on the server's own database and key.
    fn local(app: &TestApp) -> Self {
        Self::on_database(
            app.db.url_for_process(),
            app.options.data_dir.path(),
            &app.options.discord,
        )
    }

    /// Local mode on `database` with the key in `data_dir`, and Discord at the fake.
    fn on_database(database: String, data_dir: &Path, discord: &FakeDiscord) -> Self {
        Self {
            config: tempfile::tempdir().unwrap(),
            mode: vec!["--local".into(), "--database-url".into(), database],
            env: vec![
                ("AGENTD_DATA_DIR", data_dir.display().to_string()),
                ("AGENTD_DISCORD__API_BASE", discord.api_base.clone()),
            ],
        }
    }

    /// `agentctl <mode> <args>` with this person's settings and nothing from the test's own
    /// environment.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentctl-under-test"));
        for (name, _) in std::env::vars() {
            if name.starts_with("AGENTCTL_") || name.starts_with("AGENTD_") {
                command.env_remove(name);
            }
        }
        command
            .env("AGENTCTL_CONFIG_DIR", self.config.path())
            // Local mode reads agentd's configuration file: never the machine's own.
            .env("XDG_CONFIG_HOME", self.config.path())
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .args(&self.mode)
            .args(args);
        command
    }

    /// Runs without a terminal.
    async fn run(&self, args: &[&str]) -> Run {
        let output = self.command(args).stdin(Stdio::null()).kill_on_drop(true).output();
        let output = tokio::time::timeout(Duration::from_secs(60), output)
            .await
            .unwrap_or_else(|_| panic!("agentctl {args:?} did not finish"))
            .expect("agentctl runs");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    fn profile_path(&self, name: &str) -> std::path::PathBuf {
        self.config.path().join("profiles").join(format!("{name}.json"))
    }
}

const PASSWORD: &str = "correct horse";

async fn both_modes(app: &TestApp) -> [Ctl; 2] {
    [Ctl::remote(app), Ctl::local(app)]
}

backend_tests! { app;

async fn accounts_keep_the_token_private_and_map_failures_to_exit_codes(app) {
    for (n, ctl) in both_modes(&app).await.into_iter().enumerate() {
        let email = format!("ada{n}@example.com");
        let registered = ctl.run(&["register", "--email", &email, "--password", PASSWORD, "--name", "Ada"]).await.ok();
        assert!(registered.stdout.contains("Logged in as Ada"), "{}", registered.stdout);
        let path = ctl.profile_path("default");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "the token file is private");
        }
        let token = serde_json::from_slice::<Value>(&std::fs::read(&path).unwrap()).unwrap()["token"].as_str().unwrap().to_owned();
        let me = ctl.run(&["-o", "json", "whoami"]).await.ok();
        assert_eq!(me.json()["email"], email.as_str());
        let login = ctl.run(&["-o", "json", "login", "--email", &email, "--password", PASSWORD]).await.ok();
        assert_eq!(login.json()["user"]["email"], email.as_str());
        assert!(login.json().get("access_token").is_none());
        for run in [&registered, &me, &login] {
            assert!(!run.stdout.contains(&token) && !run.stderr.contains(&token), "the token is never printed");
        }

        let wrong = ctl.run(&["login", "--email", &email, "--password", "wrong password"]).await;
        assert_eq!(wrong.code, 3, "{}", wrong.stderr);
        assert!(wrong.stderr.contains("login"), "{}", wrong.stderr);
        let no_password = ctl.run(&["login", "--email", &email]).await;
        assert_eq!(no_password.code, 2, "no terminal, no password: {}", no_password.stderr);

        ctl.run(&["logout"]).await.ok();
        assert!(!path.exists(), "logout forgets the token");
        let after = ctl.run(&["whoami"]).await;
        assert_eq!(after.code, 3);
        assert!(after.stderr.contains("agentctl login"), "{}", after.stderr);
    }
}

async fn agents_and_tasks_print_the_same_json_in_both_modes(app) {
    let [remote, local] = both_modes(&app).await;
    remote.run(&["register", "--email", "ops@example.com", "--password", PASSWORD, "--name", "Ops"]).await.ok();
    local.run(&["login", "--email", "ops@example.com", "--password", PASSWORD]).await.ok();

    let created = remote.run(&["-o", "json", "agents", "create", "--id", "writer", "--name", "Writer",
        "--role-prompt", "You write.", "--channel", "news", "--workspace", "marketing"]).await.ok();
    assert_eq!(created.json()["status"], "idle");
    let task = local.run(&["-o", "json", "tasks", "add", "writer", "Write a haiku", "--priority", "2"]).await.ok();
    let task_id = task.json()["id"].as_str().unwrap().to_owned();

    let from_remote = remote.run(&["-o", "json", "agents", "show", "writer"]).await.ok();
    let from_local = local.run(&["-o", "json", "agents", "show", "writer"]).await.ok();
    assert_eq!(from_remote.stdout, from_local.stdout, "the same bytes in both modes");
    assert_eq!(from_remote.json()["backlog"][0]["id"], task_id.as_str());

    for ctl in [&remote, &local] {
        let table = ctl.run(&["agents", "list"]).await.ok();
        for expected in ["ID", "STATUS", "writer", "Writer", "idle", "news", "marketing"] {
            assert!(table.stdout.contains(expected), "{expected} missing:\n{}", table.stdout);
        }
        let tasks = ctl.run(&["tasks", "list", "writer"]).await.ok();
        assert!(tasks.stdout.contains("Write a haiku") && tasks.stdout.contains("queued"), "{}", tasks.stdout);

        let missing = ctl.run(&["agents", "show", "nobody"]).await;
        assert_eq!(missing.code, 4);
        assert!(missing.stderr.contains("agent_not_found"), "{}", missing.stderr);
        let bad = ctl.run(&["agents", "create", "--id", "Bad Id", "--name", "X", "--role-prompt", "P", "--channel", "c"]).await;
        assert_eq!(bad.code, 2);
        assert!(bad.stderr.contains("id:"), "the field is named: {}", bad.stderr);
        let exists = ctl.run(&["agents", "create", "--id", "writer", "--name", "X", "--role-prompt", "P", "--channel", "c"]).await;
        assert_eq!(exists.code, 5);
        let usage = ctl.run(&["agents", "frobnicate"]).await;
        assert_eq!(usage.code, 2);
    }

    let updated = local.run(&["-o", "json", "tasks", "update", "writer", &task_id, "--title", "Write two haiku"]).await.ok();
    assert_eq!(updated.json()["title"], "Write two haiku");
    let started = remote.run(&["-o", "json", "agents", "start", "writer"]).await.ok();
    assert_eq!(started.json(), json!({"status": "started", "agent_id": "writer"}));
    let activity = local.run(&["agents", "activity", "writer", "--limit", "5"]).await.ok();
    assert!(activity.stdout.contains("agent_started"), "{}", activity.stdout);

    // Deleting asks first; without a terminal only --yes confirms.
    let refused = remote.run(&["agents", "delete", "writer"]).await;
    assert_eq!(refused.code, 2);
    assert!(refused.stderr.contains("--yes"), "{}", refused.stderr);
    local.run(&["agents", "delete", "writer", "--yes"]).await.ok();
    assert_eq!(remote.run(&["agents", "show", "writer"]).await.code, 4);
}

async fn limits_billing_and_onboarding_from_the_terminal(app) {
    let ctl = Ctl::remote(&app);
    // Onboarding without a terminal needs its answers as flags, and creates nothing without them.
    let unanswered = ctl.run(&["onboard", "--email", "new@example.com", "--register", "--name", "New"]).await;
    assert_eq!(unanswered.code, 2);
    assert!(unanswered.stderr.contains("--template") && unanswered.stderr.contains("--company"), "{}", unanswered.stderr);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM users", &[]).await, 0);

    let onboarded = ctl.run(&["-o", "json", "onboard", "--email", "new@example.com", "--register", "--name", "New",
        "--template", "support", "--company", "Acme", "--task", "Answer the first ticket", "--start"]).await;
    // No password flag: it comes from the environment.
    assert_eq!(onboarded.code, 2, "no password without a terminal: {}", onboarded.stderr);
    let mut with_password = Ctl::remote(&app);
    with_password.env.push(("AGENTCTL_PASSWORD", PASSWORD.into()));
    let onboarded = with_password.run(&["-o", "json", "onboard", "--email", "new@example.com", "--register", "--name", "New",
        "--template", "support", "--company", "Acme", "--task", "Answer the first ticket", "--start"]).await.ok();
    assert_eq!(onboarded.json()["agent"]["id"], "support-lead");
    let tasks = with_password.run(&["-o", "json", "tasks", "list", "support-lead"]).await.ok();
    assert_eq!(tasks.json()["tasks"].as_array().unwrap().len(), 2);
    let agent = with_password.run(&["-o", "json", "agents", "show", "support-lead"]).await.ok();
    assert_eq!(agent.json()["status"], "active");

    for template in ["sales", "marketing"] {
        with_password.run(&["onboard", "--template", template, "--company", "Acme"]).await.ok();
    }
    let limited = with_password.run(&["onboard", "--template", "engineering", "--company", "Acme"]).await;
    assert_eq!(limited.code, 5, "{}", limited.stderr);
    assert!(limited.stderr.contains("plan_limit_reached"), "{}", limited.stderr);
    let billing = with_password.run(&["-o", "json", "billing"]).await.ok();
    assert_eq!(billing.json(), json!({"plan": "free", "agent_limit": 3, "agents_used": 3, "subscription_status": null}));
    let templates = with_password.run(&["templates"]).await.ok();
    for id in ["marketing", "support", "engineering", "operations", "sales"] {
        assert!(templates.stdout.contains(id), "{}", templates.stdout);
    }
}

async fn chat_commands_reach_discord_through_the_service(app) {
    let ctl = Ctl::remote(&app);
    ctl.run(&["register", "--email", "chat@example.com", "--password", PASSWORD, "--name", "Chat"]).await.ok();
    ctl.run(&["agents", "create", "--id", "herald", "--name", "Herald", "--role-prompt", "Announce.", "--channel", "news"]).await.ok();
    // The service's own bot: the install link, then the code Discord's redirect brought.
    let link = ctl.run(&["-o", "json", "chat", "oauth-url"]).await.ok().json();
    assert!(link["url"].as_str().unwrap().contains(crate::fake_discord::CLIENT_ID), "{link}");
    let state = link["state"].as_str().unwrap().to_owned();
    app.discord.add_guild("778", "Beta", &[]);
    app.discord.issue_code("cli-code", "778");
    let forged = ctl.run(&["chat", "callback", "--code", "cli-code", "--state", "forged"]).await;
    assert_eq!(forged.code, 2, "{}", forged.stderr);
    let installed = ctl.run(&["-o", "json", "chat", "callback", "--code", "cli-code", "--state", &state]).await.ok().json();
    assert_eq!(installed["guild_id"], "778");
    let table = ctl.run(&["chat", "connections"]).await.ok();
    assert!(table.stdout.contains("Beta") && table.stdout.contains("oauth"), "{}", table.stdout);
    ctl.run(&["chat", "disconnect", "778", "--yes"]).await.ok();

    let (guild, bot) = ("777", "terminal-bot-token.1");
    app.discord.add_bot(bot, "TerminalBot");
    app.discord.add_guild(guild, "Acme", &[bot]);
    let mut with_token = Ctl { config: ctl.config, mode: ctl.mode.clone(), env: vec![("AGENTCTL_BOT_TOKEN", bot.into())] };
    let connected = with_token.run(&["-o", "json", "chat", "connect", "--guild-id", guild]).await.ok();
    assert_eq!(connected.json()["status"], "connected");
    let channels = with_token.run(&["-o", "json", "chat", "channels", guild]).await.ok();
    let channel = channels.json()["channels"][0]["id"].as_str().unwrap().to_owned();
    with_token.run(&["chat", "map", "herald", "--guild-id", guild, "--channel-id", &channel]).await.ok();
    let mappings = with_token.run(&["chat", "mappings"]).await.ok();
    assert!(mappings.stdout.contains("herald") && mappings.stdout.contains(&channel), "{}", mappings.stdout);
    let sent = with_token.run(&["-o", "json", "chat", "send", "herald", "--guild-id", guild, "--content", "Hello from the terminal"]).await.ok();
    assert_eq!(sent.json()["status"], "sent");
    assert!(app.discord.messages_in(&channel).iter().any(|m| m.body["content"] == "Hello from the terminal"));
    // Onboarding with Discord from flags: the new agent is mapped to the chosen channel.
    let onboarded = with_token.run(&["-o", "json", "onboard", "--template", "marketing", "--company", "Acme",
        "--guild-id", guild, "--channel-id", &channel]).await.ok();
    assert_eq!(onboarded.json()["agent"]["id"], "marketing-lead");
    let mappings = with_token.run(&["-o", "json", "chat", "mappings"]).await.ok();
    let listed = mappings.json();
    let mapping = listed["mappings"].as_array().unwrap().iter().find(|m| m["agent_id"] == "marketing-lead").cloned();
    assert_eq!(mapping.expect("marketing-lead is mapped")["channel_id"], channel.as_str());
    let refused = with_token.run(&["chat", "disconnect", guild]).await;
    assert_eq!(refused.code, 2);
    with_token.env.clear();
    with_token.run(&["chat", "disconnect", guild, "--yes"]).await.ok();
    let none = with_token.run(&["-o", "json", "chat", "connections"]).await.ok();
    assert_eq!(none.json(), json!({"connections": []}));
}

async fn the_wizard_registers_installs_the_bot_and_starts_the_agent(app) {
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
    term.expect("Created agent support-lead").await;
    term.answer("Post the agent's work to Discord?", &format!("{DOWN}{ENTER}")).await;
    term.expect("Open this link").await;
    term.expect(&format!("client_id={}", crate::fake_discord::CLIENT_ID)).await;
    term.answer("The `code` from the page you land on", &format!("pty-code{ENTER}")).await;
    term.expect("Connected Acme HQ").await;
    // Text channels by position: #updates, then #general.
    term.expect("#updates").await;
    term.answer("#general", &format!("{DOWN}{ENTER}")).await;
    term.expect("Mapped support-lead to #general").await;
    term.answer("A first task of your own", &format!("Write the FAQ{ENTER}")).await;
    term.answer("Start the agent now?", "y").await;
    term.expect("Started support-lead").await;
    term.expect("agentctl agents activity support-lead").await;
    assert!(term.wait().await.success(), "{}", term.text());
    assert!(!term.text().contains(PASSWORD), "the password is never echoed:\n{}", term.text());

    // The wizard's login was saved: the next commands need no password.
    let agent = ctl.run(&["-o", "json", "agents", "show", "support-lead"]).await.ok().json();
    assert_eq!(agent["status"], "active");
    assert!(agent["role_prompt"].as_str().unwrap().contains("Acme"), "{agent}");
    let titles: Vec<_> = agent["backlog"].as_array().unwrap().iter().map(|t| t["title"].as_str().unwrap().to_owned()).collect();
    assert!(titles.contains(&"Write the FAQ".to_owned()), "{titles:?}");
    let mappings = ctl.run(&["-o", "json", "chat", "mappings"]).await.ok().json();
    assert_eq!(mappings["mappings"][0]["agent_id"], "support-lead");
    assert_eq!(mappings["mappings"][0]["channel_id"], format!("{guild}1"));
}

async fn the_wizard_logs_in_connects_a_bot_and_leaves_the_agent_idle_locally(app) {
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
    term.expect("Created agent marketing-lead").await;
    term.answer("Post the agent's work to Discord?", ENTER).await;
    term.answer("Server (guild) id", &format!("{guild}{ENTER}")).await;
    term.answer_secret("Bot token", bot).await;
    term.expect("Connected Lee's").await;
    term.answer("Which channel?", ENTER).await;
    term.expect("Mapped marketing-lead to #updates").await;
    term.answer("A first task of your own", ENTER).await;
    term.answer("Start the agent now?", "n").await;
    term.expect("agentctl agents start marketing-lead").await;
    assert!(term.wait().await.success(), "{}", term.text());
    let screen = term.text();
    assert!(!screen.contains(PASSWORD) && !screen.contains(bot), "secrets are never echoed:\n{screen}");
    assert!(!screen.contains("Started marketing-lead"), "{screen}");

    let agent = ctl.run(&["-o", "json", "agents", "show", "marketing-lead"]).await.ok().json();
    assert_eq!(agent["status"], "idle");
    assert_eq!(agent["backlog"].as_array().unwrap().len(), 1, "only the sample task: {agent}");
    let mappings = ctl.run(&["-o", "json", "chat", "mappings"]).await.ok().json();
    assert_eq!(mappings["mappings"][0]["channel_id"], format!("{guild}2"));
}

}

backend_tests! { db;

async fn one_machine_needs_no_server_run_works_the_agents_until_sigterm(db) {
    let models = FakeModels::start().await;
    // The first task's call is refused: it fails and the agent stops in error.
    models.script([Script::Status(400, None)]);
    let discord = FakeDiscord::start().await;
    let (guild, bot) = ("555", "local-bot-token.1");
    discord.add_bot(bot, "LocalBot");
    discord.add_guild(guild, "Acme", &[bot]);
    let data_dir = tempfile::tempdir().unwrap();
    let mut ctl = Ctl::on_database(db.url_for_process(), data_dir.path(), &discord);
    ctl.env.extend([
        ("AGENTD_MODELS__DEFAULT", "openai:gpt-test".to_owned()),
        ("AGENTD_MODELS__OPENAI_BASE_URL", models.openai_base()),
        ("AGENTD_MODELS__OPENAI_API_KEY", OPENAI_KEY.to_owned()),
        ("AGENTD_RUNTIME__POLL_SECONDS", "0.5".to_owned()),
        ("AGENTCTL_BOT_TOKEN", bot.to_owned()),
    ]);
    ctl.run(&["register", "--email", "ada@example.com", "--password", PASSWORD, "--name", "Ada"]).await.ok();
    let channel = format!("{guild}1");
    ctl.run(&["onboard", "--template", "sales", "--company", "Acme Robotics", "--guild-id", guild, "--channel-id", &channel, "--start"]).await.ok();
    ctl.run(&["tasks", "add", "sales-lead", "Draft three follow-ups", "--priority", "2"]).await.ok();
    assert!(models.calls().is_empty(), "nothing runs the agents yet");

    let remote = Ctl { config: tempfile::tempdir().unwrap(), mode: vec!["--server".into(), "http://127.0.0.1:9".into()], env: Vec::new() };
    let refused = remote.run(&["run"]).await;
    assert_eq!(refused.code, 2, "a server runs its own agents: {}", refused.stderr);
    let mut runner = ctl.command(&["run"]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true).spawn().unwrap();

    eventually(Duration::from_secs(20), "the first task fails", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'failed'", &[]).await == 1
    }).await;
    let agent = ctl.run(&["-o", "json", "agents", "show", "sales-lead"]).await.ok().json();
    assert_eq!(agent["status"], "error", "{agent}");
    let failed = agent["backlog"].as_array().unwrap().iter().find(|t| t["status"] == "failed").unwrap()["id"].as_str().unwrap().to_owned();
    let shown = ctl.run(&["tasks", "show", "sales-lead", &failed]).await.ok();
    assert!(shown.stdout.contains("failed") && shown.stdout.contains("refused the request"), "{}", shown.stdout);

    let retried = ctl.run(&["-o", "json", "tasks", "retry", "sales-lead", &failed]).await.ok().json();
    assert_eq!(retried["status"], "queued");
    let again = ctl.run(&["tasks", "retry", "sales-lead", &failed]).await;
    assert_eq!(again.code, 5, "only a failed task can be retried: {}", again.stderr);
    ctl.run(&["agents", "start", "sales-lead"]).await.ok();
    eventually(Duration::from_secs(20), "both tasks complete", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await == 2
    }).await;
    eventually(Duration::from_secs(20), "the results are posted to the channel", || async {
        discord.messages_in(&channel).iter().any(|m| m.body["embeds"][0]["title"] == "Draft three follow-ups")
    }).await;
    let activity = ctl.run(&["agents", "activity", "sales-lead"]).await.ok();
    for action in ["task_completed", "agent_error", "task_failed"] {
        assert!(activity.stdout.contains(action), "{action}:\n{}", activity.stdout);
    }

    let deleted = ctl.run(&["tasks", "delete", "sales-lead", &failed]).await.ok();
    assert!(deleted.stdout.contains(&failed), "{}", deleted.stdout);
    assert_eq!(ctl.run(&["tasks", "show", "sales-lead", &failed]).await.code, 4);

    let pid = runner.id().unwrap().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().await.unwrap().success());
    let stopped = tokio::time::timeout(Duration::from_secs(20), runner.wait()).await.expect("run stops on SIGTERM").unwrap();
    assert!(stopped.success(), "{stopped:?}");
    let mut stderr = String::new();
    tokio::io::AsyncReadExt::read_to_string(runner.stderr.as_mut().unwrap(), &mut stderr).await.unwrap();
    assert!(stderr.contains("Running the active agents") && stderr.contains("Stopped."), "{stderr}");
    assert_eq!(db.count("SELECT COUNT(*) FROM runtime_nodes", &[]).await, 0, "the node signed off");

    // The profile remembers that this login is local, and on which database.
    ctl.mode.clear();
    let listed = ctl.run(&["-o", "json", "agents", "list"]).await.ok().json();
    assert_eq!(listed["agents"][0]["id"], "sales-lead", "{listed}");
}

}

#[tokio::test]
async fn completions_are_printed_for_each_shell() {
    let config = tempfile::tempdir().unwrap();
    for (shell, marker) in
        [("bash", "complete -F"), ("zsh", "#compdef agentctl"), ("fish", "complete -c agentctl")]
    {
        let output = Command::new(env!("CARGO_BIN_EXE_agentctl-under-test"))
            .env("AGENTCTL_CONFIG_DIR", config.path())
            .args(["completions", shell])
            .output()
            .await
            .unwrap();
        assert!(output.status.success());
        let script = String::from_utf8(output.stdout).unwrap();
        assert!(script.contains(marker) && script.contains("onboard"), "{shell}: {script}");
    }
    let unknown = Command::new(env!("CARGO_BIN_EXE_agentctl-under-test"))
        .env("AGENTCTL_CONFIG_DIR", config.path())
        .args(["completions", "cmd.exe"])
        .output()
        .await
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}

#[tokio::test]
async fn an_unreachable_server_is_a_network_failure() {
    let config = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agentctl-under-test"))
        .env("AGENTCTL_CONFIG_DIR", config.path())
        .args(["--server", "http://127.0.0.1:9", "agents", "list"])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot reach the server"));
}
