//! An operator's stdio MCP server, started by the real `agentd` as a child process: its tools
//! answer through an agent, a server that exits is started again on the next use, and when
//! agentd stops no server process is left behind.

use super::*;

backend_tests! { db;
    a_stdio_server_answers_comes_back_after_a_crash_and_goes_when_agentd_stops,
}

fn call(name: &str, arguments: Value) -> Script {
    Script::Call { name: name.into(), arguments }
}

/// The server processes started so far, from the file each appends its id to.
fn started(pid_file: &std::path::Path) -> Vec<u32> {
    let text = std::fs::read_to_string(pid_file).unwrap_or_default();
    text.lines().filter_map(|line| line.trim().parse().ok()).collect()
}

/// Whether `pid` is a live process (a zombie waiting to be reaped is not).
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Runs the task `title` on `agent` and returns its tool steps, once it completed.
async fn run(server: &Server, token: &str, agent: &str, title: &str) -> Vec<Value> {
    let path = format!("/api/agents/{agent}/backlog");
    let task = server.post(&path, token, json!({"title": title}), 201).await;
    let path = format!("{path}/{}", task["id"].as_str().unwrap());
    eventually(Duration::from_secs(30), "the task completes", || async {
        server.send(reqwest::Method::GET, &path, Some(token), Value::Null).await.1["status"]
            == "complete"
    })
    .await;
    let (_, steps) =
        server.send(reqwest::Method::GET, &format!("{path}/steps"), Some(token), Value::Null).await;
    steps["steps"].as_array().unwrap().iter().filter(|s| s["kind"] == "tool").cloned().collect()
}

async fn a_stdio_server_answers_comes_back_after_a_crash_and_goes_when_agentd_stops(db: TestDb) {
    let models = FakeModels::start().await;
    models.script_for(
        "stdio",
        [
            call("calc__add", json!({"a": 10, "b": 25})),
            Script::Answer("35".into()),
            call("calc__crash", json!({})),
            Script::Answer("It crashed.".into()),
            call("calc__add", json!({"a": 1, "b": 1})),
            Script::Answer("2".into()),
        ],
    );
    let data_dir = tempfile::tempdir().unwrap();
    let pid_file = data_dir.path().join("mcp-pids");
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_MCP__SERVERS__CALC__COMMAND", env!("CARGO_BIN_EXE_mcp-test-server").into()));
    env.push(("AGENTD_MCP__SERVERS__CALC__ENV__MCP_TEST_PIDS", pid_file.display().to_string()));
    env.push(("AGENTD_MCP__SERVERS__CALC__ENV__MCP_TEST_LINGER", "1".into()));
    let server = Server::start(&env).await;
    let token = server.register("stdio@example.com").await;
    let agent = json!({"id": "calc-user", "name": "Calc", "role_prompt": "Add.", "channel": "c",
                       "model": "openai:stdio", "tools": [], "mcp_servers": ["calc"]});
    server.post("/api/agents", &token, agent, 201).await;
    server.post("/api/agents/calc-user/start", &token, Value::Null, 200).await;

    let added = run(&server, &token, "calc-user", "Add 10 and 25").await;
    assert_eq!(
        (added[0]["tool"].as_str(), added[0]["output"].as_str()),
        (Some("calc__add"), Some("35"))
    );
    assert_eq!(started(&pid_file).len(), 1, "one server process for the first task");

    let crashed = run(&server, &token, "calc-user", "Crash it").await;
    let error = crashed[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("closed"), "the crash is a tool error: {}", crashed[0]);

    let again = run(&server, &token, "calc-user", "Add 1 and 1").await;
    assert_eq!(again[0]["output"], "2", "a new server process answers after the crash");
    let pids = started(&pid_file);
    assert!(pids.len() >= 2, "the server was started again: {pids:?}");
    let last = *pids.last().unwrap();
    assert!(alive(last), "the current server process runs");
    assert!(pids[..pids.len() - 1].iter().all(|pid| !alive(*pid)), "crashed ones are gone");

    assert!(server.signal("-TERM").await.success());
    eventually(Duration::from_secs(10), "no server process is left", || async {
        pids.iter().all(|pid| !alive(*pid))
    })
    .await;
}
