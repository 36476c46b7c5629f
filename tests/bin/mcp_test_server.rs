//! The test MCP server over stdio, as agentd starts an operator's stdio server. With
//! `MCP_TEST_PID_FILE` set it appends its process id to that file when it starts, so a test can
//! tell a restarted server from the first and check that none is left behind.

use rmcp::ServiceExt;
use support::mcp_server::TestMcp;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    if let Some(path) = std::env::var_os("MCP_TEST_PID_FILE") {
        use std::io::Write;
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| writeln!(file, "{}", std::process::id()));
        if appended.is_err() {
            return std::process::ExitCode::from(2);
        }
    }
    let server = TestMcp { may_exit: true, ..TestMcp::default() };
    let transport = (tokio::io::stdin(), tokio::io::stdout());
    match server.serve(transport).await {
        Ok(running) => {
            let _ = running.waiting().await;
            std::process::ExitCode::SUCCESS
        }
        Err(_) => std::process::ExitCode::FAILURE,
    }
}
