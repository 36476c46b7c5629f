//! A log that cannot be written never costs a request: standard error on a full disk, or a
//! pipe whose reader is gone, and every request is still answered.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::process::{Child, Command};

use super::{Tmpfs, free_port, get_text};
use crate::helpers::{TestDb, backend_tests, eventually};

/// Starts agentd on a port of the test's choosing with standard error going to `stderr`,
/// and waits until it answers. A piped standard error is read meanwhile (start-up at debug
/// level can write more than a pipe holds), then handed back unread in `child.stderr`.
async fn start(db: &TestDb, data_dir: &std::path::Path, stderr: Stdio) -> (Child, String) {
    use tokio::io::AsyncReadExt;
    agentcore::install_tls_provider();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentd-under-test"))
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .env("AGENTD_LOG", "debug")
        .env("AGENTD_DATA_DIR", data_dir)
        .env("AGENTD_DATABASE_URL", db.url_for_process())
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("agentd starts");
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let drain = child.stderr.take().map(|mut stderr| {
        tokio::spawn(async move {
            let mut buffer = [0u8; 8192];
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    read = stderr.read(&mut buffer) => if matches!(read, Ok(0) | Err(_)) { break },
                }
            }
            stderr
        })
    });
    let address = format!("http://127.0.0.1:{port}");
    eventually(Duration::from_secs(30), "agentd answers", || async {
        reqwest::get(format!("{address}/healthz")).await.is_ok_and(|r| r.status() == 200)
    })
    .await;
    let _ = stop.send(());
    if let Some(drain) = drain {
        child.stderr = Some(drain.await.expect("the reader ends"));
    }
    (child, address)
}

/// Registers, creates agents and reads them back: every request must get its answer.
async fn exercise(address: &str) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let registered: serde_json::Value = client
        .post(format!("{address}/auth/register"))
        .json(&json!({"email": "logs@example.com", "password": "correct horse", "name": "Logs"}))
        .send()
        .await
        .expect("register is answered")
        .json()
        .await
        .unwrap();
    let token = registered["access_token"].as_str().expect("a token").to_owned();
    for n in 0..20 {
        let agent = json!({"id": format!("agent-{n}"), "name": "A", "role_prompt": "Work.", "channel": "c"});
        let response = client
            .post(format!("{address}/api/agents"))
            .bearer_auth(&token)
            .json(&agent)
            .send()
            .await
            .expect("every request is answered");
        assert!(response.status() == 201 || response.status() == 402, "{}", response.status());
        let missing =
            client.get(format!("{address}/api/agents/nobody")).bearer_auth(&token).send().await;
        assert_eq!(missing.expect("an error is answered too").status(), 404);
    }
    let (status, _) = get_text(address, "/metrics", None).await;
    assert_eq!(status, 200);
}

backend_tests! { db;
    requests_are_answered_when_standard_error_is_a_closed_pipe,
    requests_are_answered_when_the_log_file_disk_is_full,
    an_api_key_and_an_invite_token_never_reach_the_log,
}

async fn requests_are_answered_when_standard_error_is_a_closed_pipe(db: TestDb) {
    let data_dir = tempfile::tempdir().unwrap();
    let (mut child, address) = start(&db, data_dir.path(), Stdio::piped()).await;
    // The reader goes away: every later log line meets a broken pipe. (What start-up wrote,
    // migrations at debug level included, may not fit the pipe's buffer: it was drained.)
    drop(child.stderr.take());
    exercise(&address).await;
    let (_, metrics) = get_text(&address, "/metrics", None).await;
    let dropped = crate::helpers::sample(
        &crate::helpers::metric_samples(&metrics),
        "agentd_log_lines_dropped_total",
    );
    assert!(dropped > 0.0, "the lost lines are counted");
    assert!(child.try_wait().unwrap().is_none(), "agentd still runs");
}

async fn requests_are_answered_when_the_log_file_disk_is_full(db: TestDb) {
    let Some(disk) = Tmpfs::mount("1m") else { return };
    let log = std::fs::File::create(disk.path().join("agentd.log")).unwrap();
    disk.fill();
    let data_dir = tempfile::tempdir().unwrap();
    let (mut child, address) = start(&db, data_dir.path(), Stdio::from(log)).await;
    exercise(&address).await;
    assert!(child.try_wait().unwrap().is_none(), "agentd still runs");
}

/// At the most detailed level, the log of making, using, misusing and revoking a key and an
/// invite holds neither secret.
async fn an_api_key_and_an_invite_token_never_reach_the_log(db: TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentd.log");
    let log = std::fs::File::create(&path).unwrap();
    let (mut child, address) = start(&db, dir.path(), Stdio::from(log)).await;
    let client = reqwest::Client::new();
    let send =
        |method: reqwest::Method, path: &str, token: &str, body: Option<serde_json::Value>| {
            let mut request = client.request(method, format!("{address}{path}")).bearer_auth(token);
            if let Some(body) = body {
                request = request.json(&body);
            }
            request.send()
        };
    let register = |email: &str| {
        client
            .post(format!("{address}/auth/register"))
            .json(&json!({"email": email, "password": "correct horse", "name": "Logs"}))
            .send()
    };
    let ada: serde_json::Value = register("ada@example.com").await.unwrap().json().await.unwrap();
    let ada = ada["access_token"].as_str().unwrap().to_owned();
    let key: serde_json::Value = send(
        reqwest::Method::POST,
        "/api/workspace/keys",
        &ada,
        Some(json!({"name": "ci", "role": "member"})),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let (id, secret) =
        (key["id"].as_str().unwrap().to_owned(), key["secret"].as_str().unwrap().to_owned());
    assert_eq!(
        send(reqwest::Method::GET, "/api/agents", &secret, None).await.unwrap().status(),
        200
    );
    // The last hex digit changed (to another digit whatever it was).
    let last = if secret.ends_with('0') { '1' } else { '0' };
    let wrong = format!("{}{last}", &secret[..secret.len() - 1]);
    assert_eq!(
        send(reqwest::Method::GET, "/api/agents", &wrong, None).await.unwrap().status(),
        401
    );
    let invite: serde_json::Value = send(
        reqwest::Method::POST,
        "/api/workspace/invites",
        &ada,
        Some(json!({"role": "viewer"})),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let token = invite["token"].as_str().unwrap().to_owned();
    let bob: serde_json::Value = register("bob@example.com").await.unwrap().json().await.unwrap();
    let bob = bob["access_token"].as_str().unwrap().to_owned();
    let accepted = send(reqwest::Method::POST, &format!("/api/invites/{token}/accept"), &bob, None)
        .await
        .unwrap();
    assert_eq!(accepted.status(), 200);
    let revoked = send(reqwest::Method::DELETE, &format!("/api/workspace/keys/{id}"), &ada, None)
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    assert_eq!(
        send(reqwest::Method::GET, "/api/agents", &secret, None).await.unwrap().status(),
        401
    );
    child.kill().await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("API key created"), "the log was written at debug level: {text}");
    let secret_part = secret.rsplit('_').next().unwrap();
    assert!(!text.contains(secret_part), "the key's secret is in the log");
    assert!(!text.contains(&token), "the invite's token is in the log");
}
