//! Hostile input from outside: schemathesis (PyPI) reads `/openapi.json` and sends generated
//! requests, valid and invalid, as a signed-in user to every operation. It fails the run on any
//! 5xx, any status the document does not list, and any body or header that breaks its schema.
//!
//! `AGENTD_TEST_SCHEMATHESIS` names the `st` executable (`.ci/run` installs a pinned version).
//! Without it the test passes with a notice, unless `AGENTD_TEST_REQUIRE_SCHEMATHESIS=1` (set by
//! CI) turns that into a failure.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{TestApp, TestDb, app_with, backend_tests};

/// Generated cases per operation and phase; about 30 operations and three phases make several
/// thousand requests.
const MAX_EXAMPLES: &str = "25";

/// The checks that matter for a server: no 5xx, and every answer as the document says.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_headers_conformance,response_schema_conformance";

fn schemathesis() -> Option<String> {
    match std::env::var("AGENTD_TEST_SCHEMATHESIS") {
        Ok(path) if !path.is_empty() => Some(path),
        _ if std::env::var("AGENTD_TEST_REQUIRE_SCHEMATHESIS").is_ok_and(|v| v == "1") => {
            panic!("AGENTD_TEST_REQUIRE_SCHEMATHESIS=1 but AGENTD_TEST_SCHEMATHESIS is not set")
        }
        _ => {
            eprintln!("note: schemathesis test skipped: AGENTD_TEST_SCHEMATHESIS is not set");
            None
        }
    }
}

/// A server without abuse limits (the run is one user sending thousands of requests), with a
/// Discord guild the user's bot can reach.
async fn open_app(db: TestDb) -> TestApp {
    app_with(db, |o| {
        o.limits.auth_per_minute = 0;
        o.limits.requests_per_minute = 0;
    })
    .await
}

async fn requests_served(app: &TestApp) -> f64 {
    let samples = crate::metrics::scrape(app, None).await;
    samples
        .iter()
        .filter(|(series, _)| series.starts_with("agentd_http_requests_total{"))
        .map(|(_, v)| v)
        .sum()
}

backend_tests! { db;
    schemathesis_finds_no_server_error_and_no_answer_outside_the_document,
}

async fn schemathesis_finds_no_server_error_and_no_answer_outside_the_document(db: TestDb) {
    let Some(st) = schemathesis() else { return };
    let app = open_app(db).await;
    app.discord.add_bot("bot-st.1", "Fuzz bot");
    app.discord.add_guild("4242", "Fuzz guild", &["bot-st.1"]);
    let user = app.register("fuzz@example.com").await;
    app.create_agent(&user, "alpha").await;
    app.add_task(&user, "alpha", "A first task", 1).await;
    app.post("/api/chat/connect", &user, json!({"bot_token": "bot-st.1", "guild_id": "4242"}))
        .await
        .assert_status(200);
    let before = requests_served(&app).await;

    // Hypothesis sometimes trips over its own example generation ("FlakyFailure", a runtime
    // error of the tool, not a finding): such a run is repeated once. Any real finding fails.
    // (Under a CPython before 3.11.8 or 3.12.2 the two workers' `ast.parse` calls race and fail
    // that way every time: `.ci/run` picks a newer Python for schemathesis.)
    let mut attempt = 0;
    let output = loop {
        attempt += 1;
        let work = tempfile::tempdir().unwrap();
        let run = tokio::process::Command::new(&st)
            .current_dir(work.path())
            .args(["run", &format!("{}/openapi.json", app.address)])
            .args(["--header", &format!("Authorization: Bearer {}", user.token)])
            // Logging out revokes the token the rest of the run uses; its own tests cover it.
            .args(["--exclude-path", "/auth/logout"])
            // Event streams do not end: a generated request would wait for its timeout. Their
            // own tests (`events.rs`) cover them, bad input included.
            .args(["--exclude-path", "/api/events", "--exclude-path", "/api/agents/{id}/events"])
            .args(["--checks", CHECKS, "--max-examples", MAX_EXAMPLES])
            .args(["--workers", "2", "--request-timeout", "20", "--generation-database", "none"])
            .args(["--no-color", "--output-truncate", "false"])
            .env("SCHEMATHESIS_HOOKS", "")
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(600), run)
            .await
            .expect("schemathesis finishes within 10 minutes")
            .expect("schemathesis runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let own_error =
            stdout.contains("hypothesis.errors.FlakyFailure") && !stdout.contains("FAILURES");
        if output.status.success() || !own_error || attempt == 2 {
            break output;
        }
        eprintln!("schemathesis tripped over its own generation; running it again:\n{stdout}");
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let sent = requests_served(&app).await - before;
    assert!(sent >= 1000.0, "only {sent} requests reached the server:\n{stdout}");
    eprintln!("schemathesis: {sent} requests, no failures\n{stdout}");
}
