//! agentctl without a server, and its own commands: `run`, completions, network failures.

use super::*;

backend_tests! { db;
    one_machine_needs_no_server_run_works_the_agents_until_sigterm,
}

async fn one_machine_needs_no_server_run_works_the_agents_until_sigterm(db: TestDb) {
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
    ctl.run(&["register", "--email", "ada@example.com", "--password", PASSWORD, "--name", "Ada"])
        .await
        .ok();
    let channel = format!("{guild}1");
    ctl.run(&[
        "onboard",
        "--template",
        "sales",
        "--company",
        "Acme Robotics",
        "--guild-id",
        guild,
        "--channel-id",
        &channel,
        "--start",
    ])
    .await
    .ok();
    ctl.run(&["tasks", "add", "sales-lead", "Draft three follow-ups", "--priority", "2"])
        .await
        .ok();
    assert!(models.calls().is_empty(), "nothing runs the agents yet");

    let remote = Ctl {
        config: tempfile::tempdir().unwrap(),
        mode: vec!["--server".into(), "http://127.0.0.1:9".into()],
        env: Vec::new(),
    };
    let refused = remote.run(&["run"]).await;
    assert_eq!(refused.code, 2, "a server runs its own agents: {}", refused.stderr);
    let mut runner = ctl
        .command(&["run"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    eventually(Duration::from_secs(20), "the first task fails", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'failed'", &[]).await == 1
    })
    .await;
    let agent = ctl.run(&["-o", "json", "agents", "show", "sales-lead"]).await.ok().json();
    assert_eq!(agent["status"], "error", "{agent}");
    let failed = agent["backlog"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["status"] == "failed")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = ctl.run(&["tasks", "show", "sales-lead", &failed]).await.ok();
    assert!(
        shown.stdout.contains("failed") && shown.stdout.contains("refused the request"),
        "{}",
        shown.stdout
    );

    let retried =
        ctl.run(&["-o", "json", "tasks", "retry", "sales-lead", &failed]).await.ok().json();
    assert_eq!(retried["status"], "queued");
    let again = ctl.run(&["tasks", "retry", "sales-lead", &failed]).await;
    assert_eq!(again.code, 5, "only a failed task can be retried: {}", again.stderr);
    ctl.run(&["agents", "start", "sales-lead"]).await.ok();
    eventually(Duration::from_secs(20), "both tasks complete", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await == 2
    })
    .await;
    eventually(Duration::from_secs(20), "the results are posted to the channel", || async {
        discord
            .messages_in(&channel)
            .iter()
            .any(|m| m.body["embeds"][0]["title"] == "Draft three follow-ups")
    })
    .await;
    let activity = ctl.run(&["agents", "activity", "sales-lead"]).await.ok();
    for action in ["task_completed", "agent_error", "task_failed"] {
        assert!(activity.stdout.contains(action), "{action}:\n{}", activity.stdout);
    }

    let deleted = ctl.run(&["tasks", "delete", "sales-lead", &failed]).await.ok();
    assert!(deleted.stdout.contains(&failed), "{}", deleted.stdout);
    assert_eq!(ctl.run(&["tasks", "show", "sales-lead", &failed]).await.code, 4);

    let pid = runner.id().unwrap().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().await.unwrap().success());
    let stopped = tokio::time::timeout(Duration::from_secs(20), runner.wait())
        .await
        .expect("run stops on SIGTERM")
        .unwrap();
    assert!(stopped.success(), "{stopped:?}");
    let mut stderr = String::new();
    tokio::io::AsyncReadExt::read_to_string(runner.stderr.as_mut().unwrap(), &mut stderr)
        .await
        .unwrap();
    assert!(
        stderr.contains("Running the active agents") && stderr.contains("Stopped."),
        "{stderr}"
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM runtime_nodes", &[]).await, 0, "the node signed off");

    // The profile remembers that this login is local, and on which database.
    ctl.mode.clear();
    let listed = ctl.run(&["-o", "json", "agents", "list"]).await.ok().json();
    assert_eq!(listed["agents"][0]["id"], "sales-lead", "{listed}");
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
