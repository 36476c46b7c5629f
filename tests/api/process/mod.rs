//! The real `agentd` process: the embedded default, a clean exit on SIGTERM, a `kill -9` with
//! posts or webhook deliveries pending or a task in progress, and several processes sharing one
//! database.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use crate::fake_discord::{Failure, FakeDiscord};
use crate::fake_models::{FakeModels, OPENAI_KEY, Script};
use crate::helpers::{TestDb, backend_tests, eventually};

mod access_log;
mod compaction;
mod config;
mod delivery;
mod mcp;
mod schedules;
mod secrets;
mod steps;
mod tasks;
mod teams;
mod traces;
mod webhooks;

/// A running `agentd` process and the address it reported.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) address: String,
    client: reqwest::Client,
    /// Every line the process wrote to standard error so far.
    pub(crate) log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    /// Starts the binary on port 0 with `env`, and waits for its "listening" line.
    pub(crate) async fn start(env: &[(&str, String)]) -> Self {
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
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        tokio::spawn(async move {
            let mut found = Some(found);
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                kept.lock().unwrap().push(line.clone());
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
        Self { child, address: format!("http://{address}"), client: reqwest::Client::new(), log }
    }

    /// Registers a user and returns the bearer token.
    pub(crate) async fn register(&self, email: &str) -> String {
        let body = json!({"email": email, "password": "correct horse", "name": "Ops"});
        let (status, registered) =
            self.send(reqwest::Method::POST, "/auth/register", None, body).await;
        assert_eq!(status, 201, "{registered}");
        registered["access_token"].as_str().unwrap().to_owned()
    }

    /// Connects `guild` through the bot whose token is `bot`.
    pub(crate) async fn connect(&self, token: &str, bot: &str, guild: &str) {
        let body = json!({"bot_token": bot, "guild_id": guild});
        self.post("/api/chat/connect", token, body, 200).await;
    }

    /// Creates the agent `id` called `name` and maps it to `channel` of the connected `guild`.
    pub(crate) async fn mapped_agent(
        &self,
        token: &str,
        (id, name): (&str, &str),
        guild: &str,
        channel: &str,
    ) {
        let agent = json!({"id": id, "name": name, "role_prompt": format!("You are {name}."), "channel": "c"});
        self.post("/api/agents", token, agent, 201).await;
        let mapping = json!({"agent_id": id, "channel_id": channel});
        self.post(&format!("/api/chat/mappings/{guild}"), token, mapping, 200).await;
    }

    /// Creates the agent `worker`, queues `tasks` (title, priority) and starts it.
    pub(crate) async fn started_worker(&self, token: &str, tasks: &[(String, i64)]) {
        let agent =
            json!({"id": "worker", "name": "Worker", "role_prompt": "Work.", "channel": "c"});
        self.post("/api/agents", token, agent, 201).await;
        for (title, priority) in tasks {
            let task = json!({"title": title, "priority": priority});
            self.post("/api/agents/worker/backlog", token, task, 201).await;
        }
        self.post("/api/agents/worker/start", token, Value::Null, 200).await;
    }

    /// POSTs `body` and asserts the status.
    pub(crate) async fn post(&self, path: &str, token: &str, body: Value, status: u16) -> Value {
        self.expect(reqwest::Method::POST, path, token, body, status).await
    }

    /// PATCHes with `body` and asserts the status.
    pub(crate) async fn patch(&self, path: &str, token: &str, body: Value, status: u16) -> Value {
        self.expect(reqwest::Method::PATCH, path, token, body, status).await
    }

    async fn expect(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Value,
        status: u16,
    ) -> Value {
        let (got, reply) = self.send(method.clone(), path, Some(token), body).await;
        assert_eq!(got, status, "{method} {path}: {reply}");
        reply
    }

    pub(crate) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Value,
    ) -> (u16, Value) {
        self.send_in(None, method, path, token, body).await
    }

    /// [`Server::send`] in `workspace` (`X-Workspace`), when given.
    pub(crate) async fn send_in(
        &self,
        workspace: Option<&str>,
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
        if let Some(workspace) = workspace {
            request = request.header("x-workspace", workspace);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Sends `signal` (`-STOP`, `-CONT`) without waiting for anything.
    pub(crate) async fn send_signal(&self, signal: &str) {
        let pid = self.child.id().expect("still running").to_string();
        let sent = Command::new("kill").args([signal, &pid]).status().await.expect("kill runs");
        assert!(sent.success());
    }

    /// Whether a line of the log contains `text`.
    pub(crate) fn logged(&self, text: &str) -> bool {
        self.log.lock().unwrap().iter().any(|line| line.contains(text))
    }

    /// Sends `signal` and waits for the exit, with a deadline.
    pub(crate) async fn signal(mut self, signal: &str) -> std::process::ExitStatus {
        let pid = self.child.id().expect("still running").to_string();
        let sent = Command::new("kill").args([signal, &pid]).status().await.expect("kill runs");
        assert!(sent.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("agentd exits after the signal")
            .expect("exit status")
    }
}

/// A failing test shows what the server said, so a failure seen only in CI can be read.
impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            eprintln!("--- agentd at {} logged {} lines:", self.address, log.len());
            for line in log.iter() {
                eprintln!("{line}");
            }
        }
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
    let token = server.register("ops@example.com").await;
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

/// Settings for a process that runs agents on the fake model with short leases.
pub(crate) fn runtime_env(
    db: &TestDb,
    data_dir: &tempfile::TempDir,
    models: &FakeModels,
) -> Vec<(&'static str, String)> {
    runtime_env_on(db.url_for_process(), data_dir, models)
}

/// [`runtime_env`] on the database at `url`.
pub(crate) fn runtime_env_on(
    url: String,
    data_dir: &tempfile::TempDir,
    models: &FakeModels,
) -> Vec<(&'static str, String)> {
    vec![
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", url),
        ("AGENTD_MODELS__DEFAULT", "openai:gpt-test".into()),
        ("AGENTD_MODELS__OPENAI_BASE_URL", models.openai_base()),
        ("AGENTD_MODELS__OPENAI_API_KEY", OPENAI_KEY.into()),
        ("AGENTD_RUNTIME__LEASE_SECONDS", "2".into()),
        ("AGENTD_RUNTIME__POLL_SECONDS", "0.5".into()),
    ]
}

/// Three `agentd` processes on one database with the fake model (answering after `latency`)
/// and a fake Discord guild, and a user on the `team` plan who connected the guild.
pub(crate) struct Cluster {
    pub(crate) models: FakeModels,
    pub(crate) discord: FakeDiscord,
    pub(crate) env: Vec<(&'static str, String)>,
    pub(crate) nodes: Vec<Server>,
    pub(crate) token: String,
    guild: String,
    _data_dir: tempfile::TempDir,
}

impl Cluster {
    pub(crate) async fn start(db: &TestDb, latency: Duration, guild: &str, email: &str) -> Self {
        Self::start_with(db, latency, (guild, email), &[]).await
    }

    /// [`Cluster::start`] with more settings for every node.
    pub(crate) async fn start_with(
        db: &TestDb,
        latency: Duration,
        (guild, email): (&str, &str),
        settings: &[(&'static str, &str)],
    ) -> Self {
        let models = FakeModels::start().await;
        models.set_latency(latency);
        let discord = FakeDiscord::start().await;
        let bot = format!("{guild}-bot.1");
        discord.add_bot(&bot, "ClusterBot");
        discord.add_guild(guild, "Cluster", &[bot.as_str()]);
        let data_dir = tempfile::tempdir().unwrap();
        let mut env = runtime_env(db, &data_dir, &models);
        env.push(("AGENTD_DISCORD__API_BASE", discord.api_base.clone()));
        env.extend(settings.iter().map(|(name, value)| (*name, (*value).to_owned())));
        let mut nodes = Vec::new();
        for _ in 0..3 {
            nodes.push(Server::start(&env).await);
        }
        let token = nodes[0].register(email).await;
        // More agents than `free` allows: the `team` plan (billing moves users between plans).
        db.execute("UPDATE workspaces SET plan = 'team'", &[]).await;
        nodes[0].connect(&token, &bot, guild).await;
        Self { models, discord, env, nodes, token, guild: guild.to_owned(), _data_dir: data_dir }
    }

    /// Creates `agent-<a>` (two digits) through node `a % 3` and maps it to `channel`.
    pub(crate) async fn add_mapped_agent(&self, a: usize, channel: &str) -> String {
        let (node, token) = (&self.nodes[a % 3], &self.token);
        let id = format!("agent-{a:02}");
        node.mapped_agent(token, (&id, &id), &self.guild, channel).await;
        id
    }

    /// Starts `agent-00` .. `agent-<count - 1>`, each through node `a % 3`.
    pub(crate) async fn start_agents(&self, count: usize) {
        for a in 0..count {
            let path = format!("/api/agents/agent-{a:02}/start");
            self.nodes[a % 3].post(&path, &self.token, Value::Null, 200).await;
        }
    }
}

/// One task at a time per agent (its role prompt names it), whichever node ran it: calls of an
/// agent never overlap. A call cut off by a kill has no answer; its task lease had to expire
/// before the next call.
pub(crate) fn assert_one_call_at_a_time(models: &FakeModels, agents: usize) {
    let mut by_agent = std::collections::HashMap::<String, Vec<_>>::new();
    for call in models.calls() {
        // The role prompt, the system prompt's first line, names the agent.
        let role = call.system().lines().next().unwrap_or_default().to_owned();
        by_agent.entry(role).or_default().push(call);
    }
    assert_eq!(by_agent.len(), agents);
    for (agent, calls) in &mut by_agent {
        calls.sort_by_key(|c| c.received);
        for pair in calls.windows(2) {
            let ended = pair[0].answered.unwrap_or(pair[0].received + Duration::from_secs(1));
            assert!(pair[1].received >= ended, "{agent} had two tasks in progress at once");
        }
    }
}

/// Whether `message` is a task's "Working on" post, the one with its Cancel button.
pub(crate) fn is_working_on(message: &crate::fake_discord::Posted) -> bool {
    message.body["embeds"][0]["title"].as_str().is_some_and(|t| t.starts_with("Working on: "))
}

/// How often each embed title containing `marker` was posted to `channel` (results and
/// failures: not the tasks' "Working on" posts).
pub(crate) fn posted_titles(
    discord: &FakeDiscord,
    channel: &str,
    marker: &str,
) -> std::collections::HashMap<String, usize> {
    let mut posted = std::collections::HashMap::new();
    for message in discord.messages_in(channel).iter().filter(|m| !is_working_on(m)) {
        if let Some(title) =
            message.body["embeds"][0]["title"].as_str().filter(|t| t.contains(marker))
        {
            *posted.entry(title.to_owned()).or_default() += 1;
        }
    }
    posted
}

/// Tasks completed more than once (by their `task_completed` entries), and the total.
pub(crate) async fn completions(db: &TestDb) -> (i64, i64) {
    let doubled = db.count("SELECT COUNT(*) FROM (SELECT task_id FROM activity WHERE action = 'task_completed' GROUP BY task_id HAVING COUNT(*) > 1) AS doubled", &[]).await;
    let total =
        db.count("SELECT COUNT(*) FROM activity WHERE action = 'task_completed'", &[]).await;
    (doubled, total)
}
