//! The test MCP server over stdio, as agentd starts an operator's stdio server. With
//! `MCP_TEST_PIDS` set it appends its process id to that file when it starts, so a test can
//! tell a restarted server from the first and check that none is left behind; with
//! `MCP_TEST_LINGER` set it does not exit when its input closes, so only a signal stops it.

use rmcp::ServiceExt;
use support::mcp_server::TestMcp;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    if let Some(path) = std::env::var_os("MCP_TEST_PIDS") {
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
            // A server that outlives its client's end of the pipe: only a kill stops it.
            if std::env::var_os("MCP_TEST_LINGER").is_some() {
                tokio::time::sleep(std::time::Duration::from_secs(120)).await;
            }
            std::process::ExitCode::SUCCESS
        }
        Err(_) => std::process::ExitCode::FAILURE,
    }
}
