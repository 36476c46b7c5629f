//! The Standard Webhooks reference library (`standardwebhooks` on PyPI) as the tests' judge:
//! [`verify`] checks a webhook the service sent exactly as a receiver using the library would,
//! and [`sign`] signs a call to a trigger exactly as a sender using it would.
//!
//! `AGENTD_TEST_WEBHOOKS_PYTHON` names a Python that imports `standardwebhooks` (`.ci/run`
//! installs the pinned version of `.ci/standardwebhooks.txt` in a venv). Without it a test that
//! needs it passes with a notice, unless `AGENTD_TEST_REQUIRE_WEBHOOKS_PYTHON=1` (set by CI)
//! makes the missing library a failure.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Reads a JSON request on stdin and answers on stdout: `verify` prints the parsed body (or
/// exits 1 with the library's refusal), `sign` prints the `webhook-signature` value.
const SCRIPT: &str = r#"
import json, sys
from datetime import datetime, timezone
from standardwebhooks import Webhook
request = json.load(sys.stdin)
hook = Webhook(request["secret"])
if request["op"] == "verify":
    try:
        hook.verify(request["body"], request["headers"])
    except Exception as refused:
        print(f"{type(refused).__name__}: {refused}")
        sys.exit(1)
    print("verified")
else:
    at = datetime.fromtimestamp(request["timestamp"], tz=timezone.utc)
    print(hook.sign(request["id"], at, request["body"]))
"#;

/// The Python with the library, or `None` (with a notice) where it is not set up and not
/// required.
pub fn python() -> Option<String> {
    match std::env::var("AGENTD_TEST_WEBHOOKS_PYTHON") {
        Ok(path) if !path.is_empty() => Some(path),
        _ if std::env::var("AGENTD_TEST_REQUIRE_WEBHOOKS_PYTHON").is_ok_and(|v| v == "1") => {
            panic!(
                "AGENTD_TEST_REQUIRE_WEBHOOKS_PYTHON=1 but AGENTD_TEST_WEBHOOKS_PYTHON is not set"
            )
        }
        _ => {
            eprintln!(
                "note: the standardwebhooks checks are skipped: AGENTD_TEST_WEBHOOKS_PYTHON is not set"
            );
            None
        }
    }
}

async fn run(python: &str, request: Value) -> (bool, String) {
    let mut child = Command::new(python)
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the standardwebhooks Python");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(request.to_string().as_bytes()).await.expect("write the request");
    drop(stdin);
    let out = child.wait_with_output().await.expect("run the standardwebhooks Python");
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() && text.is_empty() {
        panic!("the standardwebhooks Python failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    (out.status.success(), text)
}

/// Whether the library verifies a received webhook: `Ok(())`, or the library's refusal.
/// `headers` are the request's headers as received (names in any case); the body must be
/// UTF-8, as the library requires.
pub async fn verify(
    python: &str,
    secret: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(), String> {
    let headers: serde_json::Map<String, Value> =
        headers.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    let body = std::str::from_utf8(body).map_err(|_| "the body is not UTF-8".to_owned())?;
    let request = json!({"op": "verify", "secret": secret, "headers": headers, "body": body});
    match run(python, request).await {
        (true, _) => Ok(()),
        (false, refusal) => Err(refusal),
    }
}

/// The `webhook-signature` header the library makes for a message.
pub async fn sign(python: &str, secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    let request =
        json!({"op": "sign", "secret": secret, "id": id, "timestamp": timestamp, "body": body});
    let (ok, signature) = run(python, request).await;
    assert!(ok, "the library did not sign: {signature}");
    signature
}
