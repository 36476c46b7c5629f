//! The real `agentctl` binary against a real `agentd` (remote) and against the same database
//! (local): output in both formats, exit codes, error messages, and the saved login.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::fake_discord::FakeDiscord;
use crate::fake_models::{FakeModels, OPENAI_KEY, Script};
use crate::helpers::{TestApp, TestDb, backend_tests, eventually};
use crate::terminal::{CTRL_C, DOWN, ENTER, ESC, Terminal};

mod acting;
mod approvals;
mod audit;
mod budget;
mod fit;
mod integrations;
mod local;
mod schedules;
mod teams;
mod watch;
mod wizard;

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
    accounts_keep_the_token_private_and_map_failures_to_exit_codes,
    agents_and_tasks_print_the_same_json_in_both_modes,
    limits_billing_and_onboarding_from_the_terminal,
    chat_commands_reach_discord_through_the_service,
}

async fn accounts_keep_the_token_private_and_map_failures_to_exit_codes(app: TestApp) {
    for (n, ctl) in both_modes(&app).await.into_iter().enumerate() {
        let email = format!("ada{n}@example.com");
        let registered = ctl
            .run(&["register", "--email", &email, "--password", PASSWORD, "--name", "Ada"])
            .await
            .ok();
        assert!(registered.stdout.contains("Logged in as Ada"), "{}", registered.stdout);
        let path = ctl.profile_path("default");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "the token file is private");
        }
        let token =
            serde_json::from_slice::<Value>(&std::fs::read(&path).unwrap()).unwrap()["token"]
                .as_str()
                .unwrap()
                .to_owned();
        let me = ctl.run(&["-o", "json", "whoami"]).await.ok();
        assert_eq!(me.json()["email"], email.as_str());
        let login =
            ctl.run(&["-o", "json", "login", "--email", &email, "--password", PASSWORD]).await.ok();
        assert_eq!(login.json()["user"]["email"], email.as_str());
        assert!(login.json().get("access_token").is_none());
        for run in [&registered, &me, &login] {
            assert!(
                !run.stdout.contains(&token) && !run.stderr.contains(&token),
                "the token is never printed"
            );
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

async fn agents_and_tasks_print_the_same_json_in_both_modes(app: TestApp) {
    let [remote, local] = both_modes(&app).await;
    remote
        .run(&["register", "--email", "ops@example.com", "--password", PASSWORD, "--name", "Ops"])
        .await
        .ok();
    local.run(&["login", "--email", "ops@example.com", "--password", PASSWORD]).await.ok();

    let created = remote
        .run(&[
            "-o",
            "json",
            "agents",
            "create",
            "--id",
            "writer",
            "--name",
            "Writer",
            "--role-prompt",
            "You write.",
            "--channel",
            "news",
            "--workspace",
            "marketing",
        ])
        .await
        .ok();
    assert_eq!(created.json()["status"], "idle");
    let task = local
        .run(&["-o", "json", "tasks", "add", "writer", "Write a haiku", "--priority", "2"])
        .await
        .ok();
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
        assert!(
            tasks.stdout.contains("Write a haiku") && tasks.stdout.contains("queued"),
            "{}",
            tasks.stdout
        );

        let missing = ctl.run(&["agents", "show", "nobody"]).await;
        assert_eq!(missing.code, 4);
        assert!(missing.stderr.contains("agent_not_found"), "{}", missing.stderr);
        let bad = ctl
            .run(&[
                "agents",
                "create",
                "--id",
                "Bad Id",
                "--name",
                "X",
                "--role-prompt",
                "P",
                "--channel",
                "c",
            ])
            .await;
        assert_eq!(bad.code, 2);
        assert!(bad.stderr.contains("id:"), "the field is named: {}", bad.stderr);
        let exists = ctl
            .run(&[
                "agents",
                "create",
                "--id",
                "writer",
                "--name",
                "X",
                "--role-prompt",
                "P",
                "--channel",
                "c",
            ])
            .await;
        assert_eq!(exists.code, 5);
        let usage = ctl.run(&["agents", "frobnicate"]).await;
        assert_eq!(usage.code, 2);
    }

    let updated = local
        .run(&["-o", "json", "tasks", "update", "writer", &task_id, "--title", "Write two haiku"])
        .await
        .ok();
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

/// `onboard` for a new account, with every answer given as a flag but the password.
const ONBOARD_NEW_USER: &[&str] = &[
    "-o",
    "json",
    "onboard",
    "--email",
    "new@example.com",
    "--register",
    "--name",
    "New",
    "--template",
    "support",
    "--company",
    "Acme",
    "--task",
    "Answer the first ticket",
    "--start",
];

async fn limits_billing_and_onboarding_from_the_terminal(app: TestApp) {
    let ctl = Ctl::remote(&app);
    // Onboarding without a terminal needs its answers as flags, and creates nothing without them.
    let unanswered =
        ctl.run(&["onboard", "--email", "new@example.com", "--register", "--name", "New"]).await;
    assert_eq!(unanswered.code, 2);
    assert!(
        unanswered.stderr.contains("--template") && unanswered.stderr.contains("--company"),
        "{}",
        unanswered.stderr
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM users", &[]).await, 0);

    let onboarded = ctl.run(ONBOARD_NEW_USER).await;
    // No password flag: it comes from the environment.
    assert_eq!(onboarded.code, 2, "no password without a terminal: {}", onboarded.stderr);
    let mut with_password = Ctl::remote(&app);
    with_password.env.push(("AGENTCTL_PASSWORD", PASSWORD.into()));
    let onboarded = with_password.run(ONBOARD_NEW_USER).await.ok();
    assert_eq!(onboarded.json()["agent"]["id"], "support-lead");
    let tasks = with_password.run(&["-o", "json", "tasks", "list", "support-lead"]).await.ok();
    assert_eq!(tasks.json()["tasks"].as_array().unwrap().len(), 2);
    let agent = with_password.run(&["-o", "json", "agents", "show", "support-lead"]).await.ok();
    assert_eq!(agent.json()["status"], "active");

    for template in ["sales", "marketing"] {
        with_password.run(&["onboard", "--template", template, "--company", "Acme"]).await.ok();
    }
    let limited =
        with_password.run(&["onboard", "--template", "engineering", "--company", "Acme"]).await;
    assert_eq!(limited.code, 5, "{}", limited.stderr);
    assert!(limited.stderr.contains("plan_limit_reached"), "{}", limited.stderr);
    let billing = with_password.run(&["-o", "json", "billing"]).await.ok();
    assert_eq!(
        billing.json(),
        json!({"plan": "free", "agent_limit": 3, "agents_used": 3, "subscription_status": null})
    );
    let templates = with_password.run(&["templates"]).await.ok();
    for id in ["marketing", "support", "engineering", "operations", "sales"] {
        assert!(templates.stdout.contains(id), "{}", templates.stdout);
    }
}

async fn chat_commands_reach_discord_through_the_service(app: TestApp) {
    let ctl = Ctl::remote(&app);
    ctl.run(&["register", "--email", "chat@example.com", "--password", PASSWORD, "--name", "Chat"])
        .await
        .ok();
    ctl.run(&[
        "agents",
        "create",
        "--id",
        "herald",
        "--name",
        "Herald",
        "--role-prompt",
        "Announce.",
        "--channel",
        "news",
    ])
    .await
    .ok();
    // The service's own bot: the install link, then the code Discord's redirect brought.
    let link = ctl.run(&["-o", "json", "chat", "oauth-url"]).await.ok().json();
    assert!(link["url"].as_str().unwrap().contains(crate::fake_discord::CLIENT_ID), "{link}");
    let state = link["state"].as_str().unwrap().to_owned();
    app.discord.add_guild("778", "Beta", &[]);
    app.discord.issue_code("cli-code", "778");
    let forged = ctl.run(&["chat", "callback", "--code", "cli-code", "--state", "forged"]).await;
    assert_eq!(forged.code, 2, "{}", forged.stderr);
    let installed = ctl
        .run(&["-o", "json", "chat", "callback", "--code", "cli-code", "--state", &state])
        .await
        .ok()
        .json();
    assert_eq!(installed["guild_id"], "778");
    let table = ctl.run(&["chat", "connections"]).await.ok();
    assert!(table.stdout.contains("Beta") && table.stdout.contains("oauth"), "{}", table.stdout);
    ctl.run(&["chat", "disconnect", "778", "--yes"]).await.ok();

    let (guild, bot) = ("777", "terminal-bot-token.1");
    app.discord.add_bot(bot, "TerminalBot");
    app.discord.add_guild(guild, "Acme", &[bot]);
    let mut with_token = Ctl {
        config: ctl.config,
        mode: ctl.mode.clone(),
        env: vec![("AGENTCTL_BOT_TOKEN", bot.into())],
    };
    let connected =
        with_token.run(&["-o", "json", "chat", "connect", "--guild-id", guild]).await.ok();
    assert_eq!(connected.json()["status"], "connected");
    let channels = with_token.run(&["-o", "json", "chat", "channels", guild]).await.ok();
    let channel = channels.json()["channels"][0]["id"].as_str().unwrap().to_owned();
    with_token
        .run(&["chat", "map", "herald", "--guild-id", guild, "--channel-id", &channel])
        .await
        .ok();
    let mappings = with_token.run(&["chat", "mappings"]).await.ok();
    assert!(
        mappings.stdout.contains("herald") && mappings.stdout.contains(&channel),
        "{}",
        mappings.stdout
    );
    let sent = with_token
        .run(&[
            "-o",
            "json",
            "chat",
            "send",
            "herald",
            "--guild-id",
            guild,
            "--content",
            "Hello from the terminal",
        ])
        .await
        .ok();
    assert_eq!(sent.json()["status"], "sent");
    assert!(
        app.discord
            .messages_in(&channel)
            .iter()
            .any(|m| m.body["content"] == "Hello from the terminal")
    );
    // Onboarding with Discord from flags: the new agent is mapped to the chosen channel.
    let onboarded = with_token
        .run(&[
            "-o",
            "json",
            "onboard",
            "--template",
            "marketing",
            "--company",
            "Acme",
            "--guild-id",
            guild,
            "--channel-id",
            &channel,
        ])
        .await
        .ok();
    assert_eq!(onboarded.json()["agent"]["id"], "marketing-lead");
    let mappings = with_token.run(&["-o", "json", "chat", "mappings"]).await.ok();
    let listed = mappings.json();
    let mapping = listed["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["agent_id"] == "marketing-lead")
        .cloned();
    assert_eq!(mapping.expect("marketing-lead is mapped")["channel_id"], channel.as_str());
    let refused = with_token.run(&["chat", "disconnect", guild]).await;
    assert_eq!(refused.code, 2);
    with_token.env.clear();
    with_token.run(&["chat", "disconnect", guild, "--yes"]).await.ok();
    let none = with_token.run(&["-o", "json", "chat", "connections"]).await.ok();
    assert_eq!(none.json(), json!({"connections": []}));
}
