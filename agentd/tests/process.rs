//! The real `agentd` binary as an operator runs it: default SQLite database in the data
//! directory, a clean exit on SIGTERM, and tokens that survive the restart.
//!
//! This is the one test outside the `tests` crate: only this package's tests can name the
//! built binary (`CARGO_BIN_EXE_agentd`).

#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// A running `agentd` and the address it reported.
struct Server {
    child: Child,
    address: String,
}

impl Server {
    async fn start(data_dir: &std::path::Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args(["--bind", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .env_remove("AGENTD_DATABASE_URL")
            .env("AGENTD_LOG", "info")
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("agentd starts");
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
        Self { child, address: format!("http://{address}") }
    }

    /// Sends SIGTERM and waits for the exit, with a deadline.
    async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("still running").to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().await.expect("kill runs");
        assert!(sent.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("agentd exits after SIGTERM")
            .expect("exit status")
    }
}

#[tokio::test]
async fn agentd_creates_its_database_exits_cleanly_on_sigterm_and_keeps_tokens_across_restarts() {
    let data_dir = tempfile::tempdir().unwrap();
    agentcore::install_tls_provider();
    let client = reqwest::Client::new();

    let server = Server::start(data_dir.path()).await;
    assert!(
        data_dir.path().join("agentd.db").exists(),
        "the default database lives in the data directory"
    );
    let registered: serde_json::Value = client
        .post(format!("{}/auth/register", server.address))
        .json(&serde_json::json!({"email": "ops@example.com", "password": "correct horse", "name": "Ops"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = registered["access_token"].as_str().unwrap().to_owned();
    let status = server.terminate().await;
    assert!(status.success(), "exit status {status:?}");

    let server = Server::start(data_dir.path()).await;
    let me =
        client.get(format!("{}/auth/me", server.address)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(me.status(), 200);
    assert!(server.terminate().await.success());
}
