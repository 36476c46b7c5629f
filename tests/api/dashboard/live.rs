//! The live pages over plain HTTP: the dashboard's event stream (`GET /events`) opens with the
//! session cookie only and counts against the per-user limit of streams; the cancel form needs
//! its CSRF token; a running task's page names the step running now.

use std::time::Duration;

use serde_json::{Value, json};
use support::fake_models::Script;

use super::Visitor;
use crate::helpers::{TestApp, TestDb, User, app_with, backend_tests, eventually};

const WAIT: Duration = Duration::from_secs(20);

backend_tests! { app;
    the_cancel_form_needs_its_csrf_token_and_the_pages_show_who_cancelled,
    a_running_tasks_page_shows_the_step_running_now,
}

backend_tests! { db;
    the_event_stream_opens_with_the_session_only_and_counts_against_the_stream_limit,
}

/// `path` with the visitor's session cookie (and nothing else), not following redirects.
async fn open(app: &TestApp, visitor: &Visitor, path: &str) -> reqwest::Response {
    let cookie = format!("agentd_session={}", visitor.cookies["agentd_session"]);
    client().get(format!("{}{path}", app.address)).header("cookie", cookie).send().await.unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Reads `stream` until its text holds `needle`, within [`WAIT`]; the text read.
async fn read_until(stream: &mut reqwest::Response, needle: &str) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut seen = String::new();
    while !seen.contains(needle) {
        let chunk = tokio::time::timeout_at(deadline, stream.chunk())
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} within {WAIT:?}; read: {seen}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended before {needle:?}; read: {seen}"));
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    seen
}

async fn the_event_stream_opens_with_the_session_only_and_counts_against_the_stream_limit(
    db: TestDb,
) {
    let app = app_with(db, |o| o.quotas.streams_per_user = 1).await;
    let dana = Visitor::with_writer(&app, "dana@example.com").await;
    let token = dana.api_user().token;

    // Signed out, or with the API's bearer token but no cookie: to the sign-in page.
    for request in [
        client().get(format!("{}/events", app.address)),
        client().get(format!("{}/events", app.address)).bearer_auth(&token),
    ] {
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), 303);
        assert_eq!(answer.headers()["location"], "/login");
    }
    // The API's stream takes the bearer token only, not the cookie.
    let api = open(&app, &dana, "/api/events").await;
    assert_eq!(api.status(), 401);

    let mut stream = open(&app, &dana, "/events?agent=writer").await;
    assert_eq!(stream.status(), 200);
    let kind = stream.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    assert!(stream.headers().contains_key("content-security-policy"), "a dashboard answer");
    app.add_task(&dana.api_user(), "writer", "Draft the note", 0).await;
    let read = read_until(&mut stream, "event: task.added").await;
    assert!(read.contains("Draft the note"), "{read}");

    // The user's one stream is open: a second, from the dashboard or the API, is refused.
    let second = open(&app, &dana, "/events").await;
    assert_eq!(second.status(), 429);
    assert!(second.text().await.unwrap().contains("quota_exceeded"));
    let api = client().get(format!("{}/api/events", app.address)).bearer_auth(&token);
    assert_eq!(api.send().await.unwrap().status(), 429);
    drop(stream);
    eventually(WAIT, "the closed stream's place is free again", || async {
        open(&app, &dana, "/events").await.status() == 200
    })
    .await;

    // Another user's agent is a missing one.
    let mut eve = Visitor::new(&app);
    eve.register("eve@example.com").await;
    assert_eq!(open(&app, &eve, "/events?agent=writer").await.status(), 404);
}

async fn the_cancel_form_needs_its_csrf_token_and_the_pages_show_who_cancelled(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let first = app.add_task(&dana.api_user(), "writer", "First", 0).await;
    let first = first["id"].as_str().unwrap().to_owned();
    let second = app.add_task(&dana.api_user(), "writer", "Second", 0).await;
    let second = second["id"].as_str().unwrap().to_owned();
    let page = format!("/agents/writer/tasks/{first}");
    let cancel = format!("{page}/cancel");

    let shown = dana.get(&page).await;
    let asks = format!("href=\"{cancel}?to=task\"");
    assert!(shown.body.contains(&asks), "a queued task offers cancel, asking first");
    assert!(shown.body.contains("data-events=\"/events?agent=writer&amp;task="), "live");
    let refused = dana.post(&cancel, &[("to", "task"), ("csrf", "")]).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let forged = "0".repeat(64);
    assert_eq!(dana.post(&cancel, &[("to", "task"), ("csrf", forged.as_str())]).await.status, 403);
    assert_eq!(status(&app, &dana, &first).await["status"], "queued");

    let cancelled = dana.post(&cancel, &[("to", "task")]).await;
    assert_eq!((cancelled.status, cancelled.location.as_deref()), (303, Some(page.as_str())));
    let task = status(&app, &dana, &first).await;
    assert_eq!(
        (task["status"].as_str(), task["cancelled_by"].as_str()),
        (Some("cancelled"), Some("dana@example.com"))
    );
    let shown = dana.get(&page).await;
    assert!(shown.body.contains("id=\"task-status\">cancelled<"), "{}", shown.body);
    assert!(shown.body.contains("Cancelled by dana@example.com"), "{}", shown.body);
    assert!(!shown.body.contains(&asks), "no cancel once cancelled");
    let again = dana.post(&cancel, &[]).await;
    assert_eq!(again.status, 409);
    assert!(again.body.contains("task_already_cancelled"), "{}", again.body);

    // From the agent's page: a row's button, back to that page, which counts it.
    let agent = dana.get("/agents/writer").await;
    let row_cancel = format!("/agents/writer/tasks/{second}/cancel");
    assert!(agent.body.contains(&format!("href=\"{row_cancel}\"")), "{}", agent.body);
    assert!(agent.body.contains("data-events=\"/events?agent=writer\""), "live");
    let from_row = dana.post(&row_cancel, &[]).await;
    let backlog = Some("/agents/writer#backlog");
    assert_eq!((from_row.status, from_row.location.as_deref()), (303, backlog));
    let agent = dana.get("/agents/writer").await;
    assert!(
        agent.body.contains("<span id=\"cancelled-count\">2</span> cancelled"),
        "{}",
        agent.body
    );
    let overview = dana.get("/").await;
    assert!(overview.body.contains("class=\"cancelled-count\">2<"), "{}", overview.body);
    assert!(overview.body.contains("data-events=\"/events\""), "live");
}

async fn status(app: &TestApp, visitor: &Visitor, task: &str) -> Value {
    let path = format!("/api/agents/writer/backlog/{task}");
    app.get(&path, &visitor.api_user()).await.assert_status(200).clone()
}

async fn a_running_tasks_page_shows_the_step_running_now(app: TestApp) {
    let mut dana = Visitor::new(&app);
    dana.register("dana@example.com").await;
    let user: User = dana.api_user();
    let agent = json!({"id": "writer", "name": "Writer", "role_prompt": "Writes.",
        "channel": "writing", "model": "openai:writer-live", "tools": ["memory"]});
    app.post("/api/agents", &user, agent).await.assert_status(201);
    app.options.models.script_for(
        "writer-live",
        [
            Script::Call {
                name: "memory".into(),
                arguments: json!({"action": "append", "text": "noted"}),
            },
            Script::Hang(Duration::from_secs(120)),
        ],
    );
    let task = app.add_task(&user, "writer", "Take your time", 0).await;
    let task = task["id"].as_str().unwrap().to_owned();
    let page = format!("/agents/writer/tasks/{task}");
    let queued = dana.get(&page).await;
    assert!(queued.body.contains("id=\"running\""), "{}", queued.body);
    assert!(queued.body.contains("data-seq=\"0\" hidden"), "nothing runs yet: {}", queued.body);
    app.post_empty("/api/agents/writer/start", &user).await.assert_status(200);

    // The model asked for the tool, the tool ran: step 3, the next model call, runs now, since
    // the tool's step was stored.
    let steps_path = format!("/api/agents/writer/backlog/{task}/steps");
    eventually(WAIT, "two steps stored", || async {
        app.get(&steps_path, &user).await.body["steps"].as_array().map(Vec::len) == Some(2)
    })
    .await;
    let steps = app.get(&steps_path, &user).await.body["steps"].clone();
    let since = steps[1]["created_at"].as_str().unwrap().to_owned();
    let running = dana.get(&page).await;
    let body = &running.body;
    assert!(body.contains("id=\"task-status\">in_progress<"), "{body}");
    assert!(body.contains("data-state=\"in_progress\" data-seq=\"3\">"), "shown: {body}");
    assert!(
        body.contains(
            "Step <strong data-step>3</strong> running: <span data-what>model call</span>"
        ),
        "{body}"
    );
    assert!(body.contains(&format!("data-since=\"{since}\"")), "since step 2: {since} in {body}");
    assert!(
        body.contains(&format!("href=\"{page}/cancel?to=task\"")),
        "a running task offers cancel"
    );

    let cancelled = dana.post(&format!("{page}/cancel"), &[("to", "task")]).await;
    assert_eq!(cancelled.status, 303, "{}", cancelled.body);
    let ended = dana.get(&page).await;
    assert!(ended.body.contains("id=\"task-status\">cancelled<"), "{}", ended.body);
    assert!(ended.body.contains("data-seq=\"0\" hidden"), "no step runs: {}", ended.body);
}
