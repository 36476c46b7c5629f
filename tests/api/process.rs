//! The real `agentd` process: the embedded default, a clean exit on SIGTERM, a `kill -9` with
//! posts pending or a task in progress, and several processes sharing one database.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use crate::fake_discord::{Failure, FakeDiscord};
use crate::fake_models::{FakeModels, OPENAI_KEY, Script};
use crate::helpers::{TestDb, backend_tests, eventually};

/// A running `agentd` process and the address it reported.
struct Server {
    child: Child,
    address: String,
    client: reqwest::Client,
}

impl Server {
    /// Starts the binary on port 0 with `env`, and waits for its "listening" line.
    async fn start(env: &[(&str, String)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentd-under-test"));
        command
            .args(["--bind", "127.0.0.1:0"])
            .env("AGENTD_LOG", "info")
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("agentd starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let (found, address) = oneshot::channel();
        tokio::spawn(async move {
            let mut found = Some(found);
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Some(at) = line.find("address=") else { continue };
                if let Some(found) = found.take() {
                    let _ = found.send(line[at + "address=".len()..].trim().to_owned());
                }
            }
        });
        let address = tokio::time::timeout(Duration::from_secs(30), address)
            .await
            .expect("agentd reports its address in time")
            .expect("agentd reports its address");
        agentcore::install_tls_provider();
        Self { child, address: format!("http://{address}"), client: reqwest::Client::new() }
    }

    /// Registers a user and returns the bearer token.
    async fn register(&self, email: &str) -> String {
        let body = json!({"email": email, "password": "correct horse", "name": "Ops"});
        let (status, registered) =
            self.send(reqwest::Method::POST, "/auth/register", None, body).await;
        assert_eq!(status, 201, "{registered}");
        registered["access_token"].as_str().unwrap().to_owned()
    }

    /// POSTs `body` and asserts the status.
    async fn post(&self, path: &str, token: &str, body: Value, status: u16) -> Value {
        let (got, reply) = self.send(reqwest::Method::POST, path, Some(token), body).await;
        assert_eq!(got, status, "POST {path}: {reply}");
        reply
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Value,
    ) -> (u16, Value) {
        let mut request =
            self.client.request(method, format!("{}{path}", self.address)).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Sends `signal` and waits for the exit, with a deadline.
    async fn signal(mut self, signal: &str) -> std::process::ExitStatus {
        let pid = self.child.id().expect("still running").to_string();
        let sent = Command::new("kill").args([signal, &pid]).status().await.expect("kill runs");
        assert!(sent.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("agentd exits after the signal")
            .expect("exit status")
    }
}

#[tokio::test]
async fn agentd_creates_its_database_exits_cleanly_on_sigterm_and_keeps_tokens_across_restarts() {
    let data_dir = tempfile::tempdir().unwrap();
    let env = [
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", String::new()),
    ];
    let server = Server::start(&env).await;
    assert!(
        data_dir.path().join("agentd.db").exists(),
        "the default database lives in the data directory"
    );
    let body = json!({"email": "ops@example.com", "password": "correct horse", "name": "Ops"});
    let (status, registered) =
        server.send(reqwest::Method::POST, "/auth/register", None, body).await;
    assert_eq!(status, 201);
    let token = registered["access_token"].as_str().unwrap().to_owned();
    // No model provider is configured: agents answer with `echo`.
    server
        .post(
            "/api/agents",
            &token,
            json!({"id": "echoer", "name": "Echoer", "role_prompt": "Echo.", "channel": "c"}),
            201,
        )
        .await;
    let task =
        server.post("/api/agents/echoer/backlog", &token, json!({"title": "Say hello"}), 201).await;
    server.post("/api/agents/echoer/start", &token, Value::Null, 200).await;
    let path = format!("/api/agents/echoer/backlog/{}", task["id"].as_str().unwrap());
    eventually(Duration::from_secs(10), "the echo task completes", || async {
        server.send(reqwest::Method::GET, &path, Some(&token), Value::Null).await.1["status"]
            == "complete"
    })
    .await;
    let done = server.send(reqwest::Method::GET, &path, Some(&token), Value::Null).await.1;
    assert!(done["result"].as_str().unwrap().contains("No model was called"), "{done}");
    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "exit status {exit:?}");

    let server = Server::start(&env).await;
    let (status, _) =
        server.send(reqwest::Method::GET, "/auth/me", Some(&token), Value::Null).await;
    assert_eq!(status, 200);
    assert!(server.signal("-TERM").await.success());
}

backend_tests! { db;

async fn a_killed_process_loses_no_pending_post(db) {
    let discord = FakeDiscord::start().await;
    discord.add_bot("kill-bot.1", "KillBot");
    discord.add_guild("777", "Kill", &["kill-bot.1"]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = [
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", db.url_for_process()),
        ("AGENTD_DISCORD__API_BASE", discord.api_base.clone()),
    ];
    let server = Server::start(&env).await;
    let post = reqwest::Method::POST;
    let body = json!({"email": "kill@example.com", "password": "correct horse", "name": "K"});
    let (_, registered) = server.send(post.clone(), "/auth/register", None, body).await;
    let token = registered["access_token"].as_str().unwrap().to_owned();
    let token = Some(token.as_str());
    assert_eq!(server.send(post.clone(), "/api/chat/connect", token, json!({"bot_token": "kill-bot.1", "guild_id": "777"})).await.0, 200);
    let agent = json!({"id": "poster", "name": "Poster", "role_prompt": "Post.", "channel": "c"});
    assert_eq!(server.send(post.clone(), "/api/agents", token, agent).await.0, 201);
    assert_eq!(server.send(post.clone(), "/api/chat/mappings/777", token, json!({"agent_id": "poster", "channel_id": "7771"})).await.0, 200);

    discord.fail_next(&[Failure::ServerError; 10_000]);
    for status in ["active", "idle", "active"] {
        assert_eq!(server.send(reqwest::Method::PATCH, "/api/agents/poster", token, json!({"status": status})).await.0, 200);
    }
    let attempts = || discord.requests().iter().filter(|r| r.path.ends_with("/messages")).count();
    eventually(Duration::from_secs(20), "delivery was attempted", || async { attempts() > 0 }).await;
    server.signal("-KILL").await;
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL", &[]).await, 3);
    assert!(discord.messages().is_empty());

    discord.clear_failures();
    let _server = Server::start(&env).await;
    // The first retry waits a second, a post held at the kill waits out its 30 s lease.
    eventually(Duration::from_secs(60), "three posts delivered", || async { discord.messages().len() >= 3 }).await;
    eventually(Duration::from_secs(10), "the outbox drains", || async {
        db.count("SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL", &[]).await == 0
    }).await;
    let titles: Vec<String> = discord.messages().iter().map(|m| m.body["embeds"][0]["title"].as_str().unwrap().to_owned()).collect();
    assert_eq!(titles, ["Poster is active", "Poster is idle", "Poster is active"]);
}

async fn two_processes_on_one_database_deliver_each_post_once_and_in_order(db) {
    let discord = FakeDiscord::start().await;
    discord.add_bot("shared-bot.1", "SharedBot");
    discord.add_guild("888", "Shared", &["shared-bot.1"]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = [
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", db.url_for_process()),
        ("AGENTD_DISCORD__API_BASE", discord.api_base.clone()),
    ];
    let first = Server::start(&env).await;
    let second = Server::start(&env).await;
    let post = reqwest::Method::POST;
    let body = json!({"email": "nodes@example.com", "password": "correct horse", "name": "N"});
    let (_, registered) = first.send(post.clone(), "/auth/register", None, body).await;
    let token = registered["access_token"].as_str().unwrap().to_owned();
    let token = Some(token.as_str());
    assert_eq!(second.send(post.clone(), "/api/chat/connect", token, json!({"bot_token": "shared-bot.1", "guild_id": "888"})).await.0, 200);
    let agent = json!({"id": "poster", "name": "Poster", "role_prompt": "Post.", "channel": "c"});
    assert_eq!(first.send(post.clone(), "/api/agents", token, agent).await.0, 201);
    assert_eq!(second.send(post.clone(), "/api/chat/mappings/888", token, json!({"agent_id": "poster", "channel_id": "8881"})).await.0, 200);

    let mut expected = Vec::new();
    for i in 0..40 {
        let (name, status) = (format!("p{i:02}"), if i % 2 == 0 { "active" } else { "idle" });
        let node = if i % 3 == 0 { &second } else { &first };
        assert_eq!(node.send(reqwest::Method::PATCH, "/api/agents/poster", token, json!({"name": name, "status": status})).await.0, 200);
        expected.push(format!("{name} is {status}"));
    }
    eventually(Duration::from_secs(60), "40 posts delivered", || async { discord.messages().len() >= 40 }).await;
    let titles: Vec<String> = discord.messages().iter().map(|m| m.body["embeds"][0]["title"].as_str().unwrap().to_owned()).collect();
    assert_eq!(titles, expected);
    let mut sends = std::collections::HashMap::<String, usize>::new();
    for request in discord.requests().iter().filter(|r| r.path.ends_with("/messages")) {
        *sends.entry(request.body["nonce"].as_str().unwrap().to_owned()).or_default() += 1;
    }
    assert_eq!(sends.len(), 40);
    assert!(sends.values().all(|n| *n == 1), "a post was sent by both processes: {sends:?}");
}

}

/// Settings for a process that runs agents on the fake model with short leases.
fn runtime_env(
    db: &TestDb,
    data_dir: &tempfile::TempDir,
    models: &FakeModels,
) -> Vec<(&'static str, String)> {
    vec![
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", db.url_for_process()),
        ("AGENTD_MODELS__DEFAULT", "openai:gpt-test".into()),
        ("AGENTD_MODELS__OPENAI_BASE_URL", models.openai_base()),
        ("AGENTD_MODELS__OPENAI_API_KEY", OPENAI_KEY.into()),
        ("AGENTD_RUNTIME__LEASE_SECONDS", "2".into()),
        ("AGENTD_RUNTIME__POLL_SECONDS", "0.5".into()),
    ]
}

/// Tasks completed more than once (by their `task_completed` entries), and the total.
async fn completions(db: &TestDb) -> (i64, i64) {
    let doubled = db.count("SELECT COUNT(*) FROM (SELECT task_id FROM activity WHERE action = 'task_completed' GROUP BY task_id HAVING COUNT(*) > 1) AS doubled", &[]).await;
    let total =
        db.count("SELECT COUNT(*) FROM activity WHERE action = 'task_completed'", &[]).await;
    (doubled, total)
}

backend_tests! { db;

async fn a_process_killed_during_a_task_loses_no_task_and_writes_no_result_twice(db) {
    let models = FakeModels::start().await;
    // The first call never answers in time: the process dies while it is open.
    models.script([Script::Hang(Duration::from_secs(60))]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = runtime_env(&db, &data_dir, &models);
    let server = Server::start(&env).await;
    let token = server.register("crash@example.com").await;
    server.post("/api/agents", &token, json!({"id": "worker", "name": "Worker", "role_prompt": "Work.", "channel": "c"}), 201).await;
    for n in 0..3 {
        server.post("/api/agents/worker/backlog", &token, json!({"title": format!("Task {n}"), "priority": 3 - n}), 201).await;
    }
    server.post("/api/agents/worker/start", &token, Value::Null, 200).await;
    eventually(Duration::from_secs(20), "the first call arrives", || async { !models.calls().is_empty() }).await;
    server.signal("-KILL").await;
    assert_eq!(db.count("SELECT COUNT(*) FROM tasks WHERE status = 'in_progress'", &[]).await, 1);
    assert_eq!(db.count("SELECT COUNT(*) FROM tasks WHERE status = 'queued'", &[]).await, 2);

    let _server = Server::start(&env).await;
    eventually(Duration::from_secs(30), "every task completes after the restart", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await == 3
    }).await;
    assert_eq!(completions(&db).await, (0, 3), "a result was written twice");
    let users: Vec<String> = models.calls().iter().map(|c| c.user().to_owned()).collect();
    assert_eq!(users, ["Task 0", "Task 0", "Task 1", "Task 2"], "the interrupted task runs again, first");
    assert_eq!(db.count("SELECT COUNT(*) FROM tasks WHERE attempts = 2", &[]).await, 1, "the lost call counts as an attempt");
}

async fn sigterm_lets_the_task_in_progress_finish_then_gives_everything_back(db) {
    let models = FakeModels::start().await;
    models.script([Script::Hang(Duration::from_millis(1500))]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = runtime_env(&db, &data_dir, &models);
    let server = Server::start(&env).await;
    let token = server.register("term@example.com").await;
    server.post("/api/agents", &token, json!({"id": "worker", "name": "Worker", "role_prompt": "Work.", "channel": "c"}), 201).await;
    for n in 0..2 {
        server.post("/api/agents/worker/backlog", &token, json!({"title": format!("Task {n}"), "priority": 2 - n}), 201).await;
    }
    server.post("/api/agents/worker/start", &token, Value::Null, 200).await;
    eventually(Duration::from_secs(20), "the first call arrives", || async { !models.calls().is_empty() }).await;
    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "exit status {exit:?}");
    assert_eq!(db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await, 1, "the task in progress finished");
    assert_eq!(db.count("SELECT COUNT(*) FROM tasks WHERE status = 'queued'", &[]).await, 1, "no new task was taken");
    assert_eq!(models.calls().len(), 1);
    assert_eq!(db.count("SELECT COUNT(*) FROM agents WHERE lease_owner IS NOT NULL", &[]).await, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM runtime_nodes", &[]).await, 0);
}

async fn a_task_longer_than_the_grace_period_goes_back_to_the_queue_at_shutdown(db) {
    let models = FakeModels::start().await;
    models.script([Script::Hang(Duration::from_secs(60))]);
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_RUNTIME__SHUTDOWN_GRACE_SECONDS", "0.5".into()));
    // Leases far longer than the test: only the release at shutdown can free the task.
    env.retain(|(name, _)| *name != "AGENTD_RUNTIME__LEASE_SECONDS");
    env.push(("AGENTD_RUNTIME__LEASE_SECONDS", "600".into()));
    let server = Server::start(&env).await;
    let token = server.register("grace@example.com").await;
    server.post("/api/agents", &token, json!({"id": "worker", "name": "Worker", "role_prompt": "Work.", "channel": "c"}), 201).await;
    server.post("/api/agents/worker/backlog", &token, json!({"title": "Endless"}), 201).await;
    server.post("/api/agents/worker/start", &token, Value::Null, 200).await;
    eventually(Duration::from_secs(20), "the call arrives", || async { !models.calls().is_empty() }).await;
    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "exit status {exit:?}");
    assert_eq!(db.count("SELECT COUNT(*) FROM tasks WHERE status = 'queued' AND lease_owner IS NULL", &[]).await, 1);

    let _server = Server::start(&env).await;
    eventually(Duration::from_secs(20), "the next process runs it at once", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await == 1
    }).await;
}

async fn three_processes_share_twenty_agents_and_survive_losing_one(db) {
    const AGENTS: usize = 20;
    const TASKS: usize = 40;
    let models = FakeModels::start().await;
    models.set_latency(Duration::from_millis(15));
    let discord = FakeDiscord::start().await;
    discord.add_bot("nodes-bot.1", "NodesBot");
    discord.add_guild("999", "Nodes", &["nodes-bot.1"]);
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_DISCORD__API_BASE", discord.api_base.clone()));
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(Server::start(&env).await);
    }
    let token = nodes[0].register("nodes@example.com").await;
    // Twenty agents: the `team` plan (billing moves users between plans in service).
    db.execute("UPDATE users SET plan = 'team'", &[]).await;
    nodes[1].post("/api/chat/connect", &token, json!({"bot_token": "nodes-bot.1", "guild_id": "999"}), 200).await;
    for a in 0..AGENTS {
        let node = &nodes[a % 3];
        let id = format!("agent-{a:02}");
        node.post("/api/agents", &token, json!({"id": id, "name": id, "role_prompt": format!("You are {id}."), "channel": "c"}), 201).await;
        let channel = if a % 2 == 0 { "9991" } else { "9992" };
        node.post("/api/chat/mappings/999", &token, json!({"agent_id": id, "channel_id": channel}), 200).await;
        let adds = (0..TASKS).map(|t| {
            let node = &nodes[(a + t) % 3];
            let (path, token, title) = (format!("/api/agents/{id}/backlog"), token.clone(), format!("{id} task {t:02}"));
            async move { node.post(&path, &token, json!({"title": title}), 201).await }
        });
        futures::future::join_all(adds).await;
    }
    for a in 0..AGENTS {
        nodes[a % 3].post(&format!("/api/agents/agent-{a:02}/start"), &token, Value::Null, 200).await;
    }
    let complete = || db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]);
    eventually(Duration::from_secs(60), "a quarter of the tasks complete", || async { complete().await >= 200 }).await;
    let killed = nodes.remove(1);
    killed.signal("-KILL").await;
    eventually(Duration::from_secs(120), "all 800 tasks complete", || async { complete().await == 800 }).await;
    assert_eq!(completions(&db).await, (0, 800), "a result was written twice");

    // One task at a time per agent, whichever node ran it: calls of an agent never overlap.
    let mut by_agent = std::collections::HashMap::<String, Vec<_>>::new();
    for call in models.calls() {
        by_agent.entry(call.system().to_owned()).or_default().push(call);
    }
    assert_eq!(by_agent.len(), AGENTS);
    for (agent, calls) in &mut by_agent {
        calls.sort_by_key(|c| c.received);
        for pair in calls.windows(2) {
            // A call cut off by the kill has no answer; its task lease had to expire first.
            let ended = pair[0].answered.unwrap_or(pair[0].received + Duration::from_secs(1));
            assert!(pair[1].received >= ended, "{agent} had two tasks in progress at once");
        }
    }

    eventually(Duration::from_secs(60), "every result is posted", || async {
        discord.messages().iter().filter(|m| m.body["embeds"][0]["title"].as_str().is_some_and(|t| t.contains(" task "))).count() >= 800
    }).await;
    let mut posted = std::collections::HashMap::<String, usize>::new();
    for message in discord.messages() {
        let title = message.body["embeds"][0]["title"].as_str().unwrap().to_owned();
        if title.contains(" task ") {
            *posted.entry(title).or_default() += 1;
        }
    }
    assert_eq!(posted.len(), 800);
    assert!(posted.values().all(|n| *n == 1), "a result was posted twice");
}

}

#[tokio::test]
async fn agentd_config_prints_every_layer_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agentd.toml");
    std::fs::write(&file, "bind = '127.0.0.1:7001'\n[auth]\njwt_secret = 'file-secret-0123456789abcdef0123456789'\n[runtime]\nlease_seconds = 12\npoll_seconds = 2\n").unwrap();
    let agentd = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentd-under-test"));
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("AGENTD_")) {
            command.env_remove(name);
        }
        command
            .env("XDG_CONFIG_HOME", dir.path())
            .env("AGENTD_DATA_DIR", dir.path())
            .envs(env.iter().copied())
            .args(args)
            .output()
    };
    let file_arg = file.display().to_string();
    let shown = agentd(
        &["--config", &file_arg, "--bind", "127.0.0.1:7003", "config"],
        &[("AGENTD_RUNTIME__LEASE_SECONDS", "13"), ("AGENTD_RUNTIME__LEASE_SECOND", "1")],
    )
    .await
    .unwrap();
    assert!(shown.status.success());
    let (stdout, stderr) =
        (String::from_utf8_lossy(&shown.stdout), String::from_utf8_lossy(&shown.stderr));
    for expected in [
        "bind = \"127.0.0.1:7003\"",
        "lease_seconds = 13",
        "poll_seconds = 2",
        "jwt_secret = \"<redacted>\"",
        &file_arg,
    ] {
        assert!(stdout.contains(expected), "{expected} missing:\n{stdout}");
    }
    assert!(!stdout.contains("file-secret"), "{stdout}");
    assert!(
        stderr
            .contains("AGENTD_RUNTIME__LEASE_SECOND (did you mean AGENTD_RUNTIME__LEASE_SECONDS?)"),
        "{stderr}"
    );

    // The default place: agentd.toml in the platform config directory.
    std::fs::create_dir_all(dir.path().join("agentd")).unwrap();
    std::fs::write(dir.path().join("agentd/agentd.toml"), "[runtime]\nlease_seconds = 7\n")
        .unwrap();
    let shown = agentd(&["config"], &[]).await.unwrap();
    assert!(String::from_utf8_lossy(&shown.stdout).contains("lease_seconds = 7"));

    std::fs::write(&file, "[runtime]\nlease_secs = 3\n").unwrap();
    let refused = agentd(&["--config", &file_arg], &[]).await.unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("'runtime.lease_secs' is not a setting")
    );
}
