//! An operator's stdio MCP server, started by the real `agentd` as a child process: its tools
//! answer through an agent, a server that exits is started again on the next use, and when
//! agentd stops no server process is left behind; a user's server whose tool list never ends
//! is read within bounds.

use super::*;

backend_tests! { db;
    a_stdio_server_answers_comes_back_after_a_crash_and_goes_when_agentd_stops,
    a_users_server_with_hundreds_of_large_pages_is_read_within_bounds,
}

/// A `/proc/<pid>/status` figure in bytes (`VmRSS`: resident now; `VmHWM`: the peak).
fn memory(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// How much more than its resident memory before a listing agentd may reach while reading
/// one: a few pages of at most 4 MiB each, parsed, and the 512 KB it keeps.
const LISTING_MEMORY_BOUND: u64 = 96 * 1024 * 1024;

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

async fn a_users_server_with_hundreds_of_large_pages_is_read_within_bounds(db: TestDb) {
    use support::mcp_server::{McpHttpServer, Paging, TestMcp};

    // 300 pages of 16 tools, each description 200 KB: 960 MB if read whole.
    let paging = Paging { pages: 300, per_page: 16, description_bytes: 200 * 1024 };
    let mcp = McpHttpServer::serve(TestMcp { paging: Some(paging), ..TestMcp::default() }).await;
    let models = FakeModels::start().await;
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_TOOLS__HTTP__ALLOW_PRIVATE", "true".into()));
    let server = Server::start(&env).await;
    let pid = server.child.id().unwrap();
    let token = server.register("pager@example.com").await;
    server.post("/api/mcp/servers", &token, json!({"name": "big", "url": mcp.url}), 201).await;
    // Writing 5 to clear_refs resets the peak (VmHWM) to the resident size now.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = memory(pid, "VmRSS");

    let (status, tested) = server
        .send(reqwest::Method::POST, "/api/mcp/servers/big/test", Some(&token), Value::Null)
        .await;
    assert_eq!(status, 200, "{tested}");
    assert_eq!(tested.get("error"), None, "{tested}");
    let tools = tested["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 128, "at most 128 tools per server");
    assert_eq!(tools[0]["description"].as_str().unwrap().chars().count(), 2_000);
    let warning = tested["warning"].as_str().unwrap_or_default();
    for said in ["goes on past page 8", "128 descriptions cut to 2000 characters"] {
        assert!(warning.contains(said), "{said}: {warning}");
    }
    assert!(mcp.listed() <= 8, "pages read: {}", mcp.listed());

    let (status, listed) =
        server.send(reqwest::Method::GET, "/api/tools", Some(&token), Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(listed["mcp_servers"][0]["tools"].as_array().map(Vec::len), Some(128));
    assert_eq!(listed["mcp_servers"][0]["warning"], tested["warning"]);

    let peak = memory(pid, "VmHWM");
    assert!(
        peak.saturating_sub(before) < LISTING_MEMORY_BOUND,
        "agentd grew from {} MB to a peak of {} MB",
        before >> 20,
        peak >> 20
    );
    assert!(server.signal("-TERM").await.success());
}
