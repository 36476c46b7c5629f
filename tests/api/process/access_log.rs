//! The access log (`http.access_log`): a line per answered request, with its route, status,
//! time and request id, from the real binary; without the setting, no line per request at the
//! default level.

use super::*;

/// Starts agentd on its embedded default with `extra` settings; the data directory lives as
/// long as the server.
async fn server_with(extra: &[(&str, String)]) -> (Server, tempfile::TempDir) {
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = vec![("AGENTD_DATA_DIR", data_dir.path().display().to_string())];
    env.extend(extra.iter().cloned());
    (Server::start(&env).await, data_dir)
}

/// Requests `path` with the request id `id`; the status.
async fn get(server: &Server, path: &str, id: &str) -> u16 {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", server.address))
        .header("x-request-id", id)
        .send()
        .await
        .unwrap();
    response.status().as_u16()
}

/// Sends a request whose body never comes, and reads the answer the deadline makes.
async fn slow_body(server: &Server, id: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let address = server.address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST /auth/login HTTP/1.1\r\nHost: agentd\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\nX-Request-Id: {id}\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0; 512];
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut answer))
        .await
        .expect("an answer within the deadline")
        .unwrap();
    String::from_utf8_lossy(&answer[..read]).into_owned()
}

#[tokio::test]
async fn the_access_log_writes_a_line_per_request_with_its_route_status_and_request_id() {
    let (server, _dir) = server_with(&[
        ("AGENTD_HTTP__ACCESS_LOG", "true".into()),
        ("AGENTD_HTTP__REQUEST_TIMEOUT_SECONDS", "1".into()),
    ])
    .await;
    assert_eq!(get(&server, "/healthz", "probe-1").await, 200);
    assert_eq!(get(&server, "/api/agents/nobody", "probe-2").await, 401);
    // The deadline's own answer is logged too: the log's layer is outside it.
    assert!(slow_body(&server, "probe-3").await.starts_with("HTTP/1.1 408"));
    eventually(Duration::from_secs(10), "the requests' lines", || async {
        let log = server.log.lock().unwrap().clone();
        let line = |id: &str| log.iter().find(|l| l.contains(&format!("request_id={id}"))).cloned();
        match (line("probe-1"), line("probe-2"), line("probe-3")) {
            (Some(health), Some(refused), Some(slow)) => {
                assert!(health.contains("INFO access: GET /healthz 200 "), "{health}");
                assert!(refused.contains("access: GET /api/agents/{id} 401 "), "{refused}");
                assert!(slow.contains("access: POST /auth/login 408 "), "{slow}");
                true
            }
            _ => false,
        }
    })
    .await;
}

#[tokio::test]
async fn without_the_access_log_a_request_writes_no_line_at_the_default_level() {
    let (server, _dir) = server_with(&[]).await;
    for n in 0..20 {
        assert_eq!(get(&server, "/healthz", &format!("quiet-{n}")).await, 200);
    }
    // A line written after the requests: the process's own, to know the log has caught up.
    let token = server.register("quiet@example.com").await;
    assert!(!token.is_empty());
    eventually(Duration::from_secs(10), "the registration's log line", || async {
        server.log.lock().unwrap().iter().any(|l| l.contains("user registered"))
    })
    .await;
    let log = server.log.lock().unwrap().clone();
    let per_request: Vec<&String> =
        log.iter().filter(|l| l.contains("quiet-") || l.contains("finished processing")).collect();
    assert!(per_request.is_empty(), "a line per request at the default level: {per_request:?}");
}
