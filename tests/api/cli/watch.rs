//! Following runs from the terminal: `tasks add --watch` on a terminal, `tasks watch` in a
//! pipe (`-o json`), `tasks cancel`, the same watch in local mode on the server's database,
//! a server's stream seeing a task that `agentctl --local` added, and a watch that loses its
//! connection and follows on after its last event.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use super::{Ctl, PASSWORD};
use crate::fake_models::Script;
use crate::helpers::sse::Sse;
use crate::helpers::{TestApp, User, backend_tests, eventually};
use crate::terminal::Terminal;

backend_tests! { app;
    a_task_added_with_watch_is_followed_to_its_end_on_a_terminal,
    tasks_watch_prints_each_event_as_a_json_line_until_the_task_completes,
    a_task_is_cancelled_from_the_terminal_and_its_watch_ends_with_the_cancel,
    a_local_watch_follows_a_task_the_server_runs,
    a_server_stream_sees_a_task_added_by_agentctl_local,
    a_watch_whose_connection_breaks_follows_on_after_its_last_event,
    ctrl_c_ends_an_open_watch_with_0_and_a_tasks_watch_with_130,
}

const WAIT: Duration = Duration::from_secs(20);

/// A user with agent `id` on the fake model `openai:<id>` (memory allowed), logged in on
/// each of `ctls`.
async fn keeper(app: &TestApp, ctls: &[&Ctl], email: &str, id: &str) -> User {
    let user = app.register(email).await;
    let body = json!({"id": id, "name": "Keeper", "role_prompt": "You keep notes.",
        "channel": "notes", "model": format!("openai:{id}"), "tools": ["memory"]});
    app.post("/api/agents", &user, body).await.assert_status(201);
    for ctl in ctls {
        ctl.run(&["login", "--email", email, "--password", PASSWORD]).await.ok();
    }
    user
}

fn append(text: &str) -> Script {
    Script::Call { name: "memory".into(), arguments: json!({"action": "append", "text": text}) }
}

async fn start(app: &TestApp, user: &User, id: &str) {
    app.post_empty(&format!("/api/agents/{id}/start"), user).await.assert_status(200);
}

async fn add(app: &TestApp, user: &User, agent: &str, title: &str) -> String {
    app.add_task(user, agent, title, 0).await["id"].as_str().unwrap().to_owned()
}

/// agentctl in the background: its stdout read line by line, its stderr kept.
struct Watcher {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<String>>,
}

impl Watcher {
    fn spawn(ctl: &Ctl, args: &[&str]) -> Self {
        let mut command = ctl.command(args);
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.kill_on_drop(true).spawn().expect("agentctl starts");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut errors = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = errors.next_line().await {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Self { child, lines, stderr }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until agentctl has said `text` on stderr.
    async fn told(&self, text: &str) {
        eventually(WAIT, &format!("agentctl says {text:?}"), || async {
            self.stderr().contains(text)
        })
        .await;
    }

    /// Sends Ctrl-C's signal.
    async fn interrupt(&self) {
        let pid = self.child.id().expect("still running").to_string();
        let sent = tokio::process::Command::new("kill").args(["-INT", &pid]).status().await;
        assert!(sent.unwrap().success());
    }

    /// The next line of stdout; `None` once agentctl has closed it.
    async fn line(&mut self) -> Option<String> {
        let next = tokio::time::timeout(WAIT, self.lines.next_line()).await;
        next.unwrap_or_else(|_| panic!("no line within {WAIT:?}; stderr: {}", self.stderr()))
            .unwrap()
    }

    /// The rest of stdout, and the exit code.
    async fn finish(mut self) -> (Vec<String>, i32) {
        let mut lines = Vec::new();
        while let Some(line) = self.line().await {
            lines.push(line);
        }
        let status = tokio::time::timeout(WAIT, self.child.wait()).await;
        (lines, status.expect("agentctl exits").unwrap().code().unwrap_or(-1))
    }
}

/// Each line as the JSON object it must be.
fn objects(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a line that is not JSON ({e}): {line}"));
            assert!(value.is_object(), "{line}");
            value
        })
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

async fn a_task_added_with_watch_is_followed_to_its_end_on_a_terminal(app: TestApp) {
    let ctl = Ctl::remote(&app);
    let user = keeper(&app, &[&ctl], "watch@example.com", "keeper").await;
    start(&app, &user, "keeper").await;
    app.options
        .models
        .script_for("keeper", [append("Standup at 9."), Script::Answer("Noted.".into())]);
    let mut term =
        Terminal::spawn(ctl.command(&["tasks", "add", "keeper", "Remember standup", "--watch"]));
    for shown in [
        "task.added",
        "Task 'Remember standup' added",
        "task.started",
        "step 1 model → memory [11+22 tokens",
        "step 2 tool memory: Saved.",
        "step 3 model: Noted.",
        "task.completed",
        "Task 'Remember standup' completed in 3 steps (1 tool call).",
    ] {
        term.expect(shown).await;
    }
    let status = term.wait().await;
    assert_eq!(status.code(), Some(0), "{}", term.text());

    // A model that refuses the call for good: the task fails, and so does the command.
    let body = json!({"id": "breaker", "name": "Breaker", "role_prompt": "You break.",
        "channel": "notes", "model": "openai:breaker"});
    app.post("/api/agents", &user, body).await.assert_status(201);
    start(&app, &user, "breaker").await;
    app.options.models.script_for("breaker", [Script::Status(400, None)]);
    let mut term = Terminal::spawn(ctl.command(&["tasks", "add", "breaker", "Break", "--watch"]));
    term.expect("task.failed").await;
    term.expect("Task 'Break' failed").await;
    term.expect("error: task").await;
    let status = term.wait().await;
    assert_eq!(status.code(), Some(7), "a failed task's code: {}", term.text());
}

async fn tasks_watch_prints_each_event_as_a_json_line_until_the_task_completes(app: TestApp) {
    let ctl = Ctl::remote(&app);
    let user = keeper(&app, &[&ctl], "lines@example.com", "keeper").await;
    app.options
        .models
        .script_for("keeper", [append("one"), append("two"), Script::Answer("Both noted.".into())]);
    let task = add(&app, &user, "keeper", "Note two things").await;
    let watcher = Watcher::spawn(&ctl, &["-o", "json", "tasks", "watch", "keeper", &task]);
    // It says the agent is idle once its stream is open: nothing can be missed from here.
    watcher.told("Agent keeper is idle").await;
    start(&app, &user, "keeper").await;
    let (lines, code) = watcher.finish().await;
    assert_eq!(code, 0, "{lines:?}");
    let events = objects(&lines);
    let kinds = types(&events);
    assert_eq!(kinds.first(), Some(&"task.started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"task.completed"), "{kinds:?}");
    let steps: Vec<i64> = events
        .iter()
        .filter(|e| e["type"] == "step.finished")
        .map(|e| e["step"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3, 4, 5], "{kinds:?}");
    assert!(events.iter().all(|e| e["task_id"] == task.as_str()), "only the task's events");
    let completed = events.last().unwrap();
    assert_eq!(completed["activity"]["action"], "task_completed");
    assert!(completed["id"].is_i64(), "{completed}");

    // Once it has ended, watching it says so at once.
    let again = ctl.run(&["tasks", "watch", "keeper", &task]).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("it is complete"), "{}", again.stderr);
    let missing = ctl.run(&["tasks", "watch", "keeper", "01890000-0000-7000-8000-000000000000"]);
    let missing = missing.await;
    assert_eq!(missing.code, 4, "{}", missing.stderr);
}

async fn a_task_is_cancelled_from_the_terminal_and_its_watch_ends_with_the_cancel(app: TestApp) {
    let ctl = Ctl::remote(&app);
    let user = keeper(&app, &[&ctl], "cancel@example.com", "keeper").await;
    let first = add(&app, &user, "keeper", "Never mind").await;
    let second = add(&app, &user, "keeper", "Nor this").await;
    let watcher = Watcher::spawn(&ctl, &["tasks", "watch", "keeper", &second]);
    watcher.told("Agent keeper is idle").await;

    let cancelled = ctl.run(&["tasks", "cancel", "keeper", &first]).await.ok();
    for shown in ["status", "cancelled", "cancelled_by", "cancel@example.com", "Never mind"] {
        assert!(cancelled.stdout.contains(shown), "{shown} missing:\n{}", cancelled.stdout);
    }
    let again = ctl.run(&["tasks", "cancel", "keeper", &first]).await;
    assert_eq!(again.code, 5, "a conflict: {}", again.stderr);
    assert!(again.stderr.contains("task_already_cancelled"), "{}", again.stderr);
    assert!(again.stderr.contains("error: "), "the service's message: {}", again.stderr);

    let json = ctl.run(&["-o", "json", "tasks", "cancel", "keeper", &second]).await.ok();
    assert_eq!(json.json()["status"], "cancelled");
    assert_eq!(json.json()["cancelled_by"], "cancel@example.com");
    let stderr = watcher.stderr.clone();
    let (lines, code) = watcher.finish().await;
    assert_eq!(code, 8, "a cancelled task's code: {lines:?}");
    assert!(lines.last().unwrap().contains("task.cancelled"), "{lines:?}");
    // Its stderr is read by a task of its own, which may still be at it after the exit.
    eventually(WAIT, "agentctl says the task was cancelled", || async {
        stderr.lock().unwrap().contains("was cancelled")
    })
    .await;

    let watched = ctl.run(&["tasks", "watch", "keeper", &first]).await;
    assert_eq!(watched.code, 8, "ended already: {}", watched.stderr);
    let listed = ctl.run(&["-o", "json", "tasks", "list", "keeper", "--status", "cancelled"]);
    assert_eq!(listed.await.ok().json()["tasks"].as_array().unwrap().len(), 2);
}

async fn a_local_watch_follows_a_task_the_server_runs(app: TestApp) {
    let local = Ctl::local(&app);
    let user = keeper(&app, &[&local], "local-watch@example.com", "keeper").await;
    app.options
        .models
        .script_for("keeper", [append("Seen locally."), Script::Answer("Done.".into())]);
    let task = add(&app, &user, "keeper", "Run on the server").await;
    let watcher = Watcher::spawn(&local, &["tasks", "watch", "keeper", &task]);
    watcher.told("Agent keeper is idle").await;
    start(&app, &user, "keeper").await;
    let (lines, code) = watcher.finish().await;
    assert_eq!(code, 0, "{lines:?}");
    let all = lines.join("\n");
    for shown in ["task.started", "step 2 tool memory: Saved.", "step 3 model: Done."] {
        assert!(all.contains(shown), "{shown} missing:\n{all}");
    }
    assert!(lines.last().unwrap().contains("task.completed"), "{all}");
}

async fn a_server_stream_sees_a_task_added_by_agentctl_local(app: TestApp) {
    let local = Ctl::local(&app);
    let user = keeper(&app, &[&local], "other-process@example.com", "keeper").await;
    let path = "/api/agents/keeper/events";
    let mut events = Sse::connect(&app.address, path, &user.token, None).await;
    local.run(&["tasks", "add", "keeper", "From another process"]).await.ok();
    let seen =
        events.until(Duration::from_secs(5), "the task.added", |m| m.event == "task.added").await;
    let added = seen.last().unwrap();
    let details = added.data["activity"]["details"].as_str().unwrap();
    assert!(details.contains("From another process"), "{details}");
    assert!(added.id.is_some(), "a stored event");
}

/// A TCP proxy in front of the server whose connections can be cut.
struct Proxy {
    address: String,
    open: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: &str) -> Self {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let open = Arc::new(Mutex::new(Vec::new()));
        let connections = open.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let relay = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                connections.lock().unwrap().push(relay.abort_handle());
            }
        });
        Self { address, open, accept }
    }

    /// Closes every connection open now; new ones go through.
    fn cut(&self) {
        for relay in self.open.lock().unwrap().drain(..) {
            relay.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn a_watch_whose_connection_breaks_follows_on_after_its_last_event(app: TestApp) {
    let proxy = Proxy::start(&app.address).await;
    let mut ctl = Ctl::remote(&app);
    ctl.mode = vec!["--server".into(), proxy.address.clone()];
    let user = keeper(&app, &[&ctl], "reconnect@example.com", "slowpoke").await;
    start(&app, &user, "slowpoke").await;
    // Slow enough that the run goes on while the connection is down.
    app.options.models.set_latency_for("slowpoke", Duration::from_secs(1));
    app.options.models.script_for(
        "slowpoke",
        [append("first"), append("second"), Script::Answer("Both noted.".into())],
    );
    let args = ["-o", "json", "tasks", "add", "slowpoke", "Note two things", "--watch"];
    let mut watcher = Watcher::spawn(&ctl, &args);
    let mut lines = Vec::new();
    while !lines.last().is_some_and(|l: &String| l.contains("\"step.finished\"")) {
        lines.push(watcher.line().await.expect("the run's first step"));
    }
    proxy.cut();
    watcher.told("reconnecting").await;
    let stderr = watcher.stderr.clone();
    let (rest, code) = watcher.finish().await;
    lines.extend(rest);
    assert_eq!(code, 0, "{lines:?}\n{}", stderr.lock().unwrap());
    eventually(WAIT, "agentctl says following on after event", || async {
        stderr.lock().unwrap().contains("following on after event")
    })
    .await;

    let events = objects(&lines);
    let ids: Vec<i64> = events.iter().filter_map(|e| e["id"].as_i64()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "each stored event once, in order: {ids:?}");
    let steps: Vec<i64> = events
        .iter()
        .filter(|e| e["type"] == "step.finished")
        .map(|e| e["step"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3, 4, 5], "{:?}", types(&events));
    assert_eq!(types(&events).first(), Some(&"task.added"));
    assert_eq!(types(&events).last(), Some(&"task.completed"));
}

async fn ctrl_c_ends_an_open_watch_with_0_and_a_tasks_watch_with_130(app: TestApp) {
    let ctl = Ctl::remote(&app);
    let user = keeper(&app, &[&ctl], "interrupt@example.com", "keeper").await;
    let mut watcher = Watcher::spawn(&ctl, &["-o", "json", "agents", "watch"]);
    watcher.told("Ctrl-C stops").await;
    let task = add(&app, &user, "keeper", "Seen by all").await;
    let line = watcher.line().await.expect("the task's event");
    let added: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (added["type"].as_str(), added["task_id"].as_str()),
        (Some("task.added"), Some(&*task))
    );
    watcher.interrupt().await;
    let (rest, code) = watcher.finish().await;
    assert_eq!(code, 0, "an open watch ends well: {rest:?}");

    let watcher = Watcher::spawn(&ctl, &["tasks", "watch", "keeper", &task]);
    watcher.told("Agent keeper is idle").await;
    watcher.interrupt().await;
    let stderr = watcher.stderr.clone();
    let (_, code) = watcher.finish().await;
    assert_eq!(code, 130, "the task had not ended");
    eventually(WAIT, "agentctl says goes on", || async {
        stderr.lock().unwrap().contains("goes on")
    })
    .await;
}
