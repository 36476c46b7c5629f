//! Watching and stopping runs as they happen: `GET /api/events` (Server-Sent Events) and
//! `POST .../cancel`, through the real server, with the fake model's scripted calls.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_models::Script;
use crate::helpers::sse::{Message, Sse};
use crate::helpers::{Backend, TestApp, TestDb, User, app_with, backend_tests, eventually};

backend_tests! { app;
    a_stream_sees_every_step_of_a_three_call_tool_run_in_order_once,
    a_client_that_reconnects_with_its_last_event_id_gets_exactly_what_it_missed,
    a_retried_model_call_shows_its_retries_on_the_stream,
    cancel_drops_the_model_call_in_flight_and_keeps_what_the_tools_did,
    a_stream_on_another_node_follows_the_run_and_a_cancel_there_stops_it,
    an_event_committed_where_no_node_hears_of_it_still_reaches_the_streams,
    events_written_at_once_through_two_nodes_are_numbered_once_each_without_a_gap,
}

backend_tests! { db;
    streams_are_bounded_per_user_and_show_only_the_users_own_events,
}

const WAIT: Duration = Duration::from_secs(20);
const ROLE: &str = "You keep notes for Acme's release team.";

/// A user with agent `id` on the fake `openai:<id>` model, allowed `tools`.
async fn agent(app: &TestApp, email: &str, id: &str, tools: &[&str]) -> User {
    let user = app.register(email).await;
    let body = json!({"id": id, "name": "Keeper", "role_prompt": ROLE, "channel": "notes",
        "model": format!("openai:{id}"), "tools": tools});
    app.post("/api/agents", &user, body).await.assert_status(201);
    user
}

fn call(name: &str, arguments: Value) -> Script {
    Script::Call { name: name.into(), arguments }
}

fn append(text: &str) -> Script {
    call("memory", json!({"action": "append", "text": text}))
}

async fn start(app: &TestApp, user: &User, id: &str) {
    app.post_empty(&format!("/api/agents/{id}/start"), user).await.assert_status(200);
}

async fn stream(app: &TestApp, user: &User, path: &str, last: Option<i64>) -> Sse {
    Sse::connect(&app.address, path, &user.token, last).await
}

fn ends(task: &str) -> impl Fn(&Message) -> bool + '_ {
    move |m| m.data["task_id"] == task && m.event.starts_with("task.") && is_end(&m.event)
}

fn is_end(event: &str) -> bool {
    matches!(event, "task.completed" | "task.failed" | "task.cancelled")
}

fn stored_ids(messages: &[Message]) -> Vec<i64> {
    messages.iter().filter_map(|m| m.id).collect()
}

async fn task_status(app: &TestApp, user: &User, agent: &str, task: &str) -> String {
    let reply = app.get(&format!("/api/agents/{agent}/backlog/{task}"), user).await;
    reply.assert_status(200)["status"].as_str().unwrap().to_owned()
}

async fn a_stream_sees_every_step_of_a_three_call_tool_run_in_order_once(app: TestApp) {
    let user = agent(&app, "steps@example.com", "stepper", &["memory"]).await;
    app.options.models.script_for(
        "stepper",
        [append("one"), append("two"), append("three"), Script::Answer("Noted all three.".into())],
    );
    let mut events = stream(&app, &user, "/api/agents/stepper/events", None).await;
    let added = app.add_task(&user, "stepper", "Note three things", 0).await;
    let task = added["id"].as_str().unwrap();
    start(&app, &user, "stepper").await;
    let seen = events.until(WAIT, "the task's end", ends(task)).await;

    // Every stored event once, in the order written.
    let ids = stored_ids(&seen);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids not increasing: {ids:?}");
    let kinds: Vec<&str> = seen.iter().map(|m| m.event.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"task.added"), "{kinds:?}");
    assert!(kinds.contains(&"agent.status"), "the start: {kinds:?}");
    assert_eq!(kinds.last(), Some(&"task.completed"), "{kinds:?}");
    let finished: Vec<i64> = seen
        .iter()
        .filter(|m| m.event == "step.finished")
        .map(|m| m.data["step"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(finished, [1, 2, 3, 4, 5, 6, 7], "each step once, in order: {kinds:?}");
    let tools: Vec<&str> = seen
        .iter()
        .filter(|m| m.event == "step.finished" && m.data["step"]["kind"] == "tool")
        .map(|m| m.data["step"]["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["memory", "memory", "memory"]);
    // Each step's start is told before its end.
    for seq in 1..=7 {
        let started = seen
            .iter()
            .position(|m| m.event == "step.started" && m.data["started"]["seq"] == seq)
            .unwrap_or_else(|| panic!("no start of step {seq}: {kinds:?}"));
        let ended = seen
            .iter()
            .position(|m| m.event == "step.finished" && m.data["step"]["seq"] == seq)
            .unwrap();
        assert!(started < ended, "step {seq} started after it finished: {kinds:?}");
        assert!(seen[started].id.is_none(), "a start is live only");
    }
    let started = seen.iter().position(|m| m.event == "task.started").unwrap();
    assert!(started < seen.iter().position(|m| m.event == "step.started").unwrap());
    for message in &seen {
        assert_eq!(message.data["agent_id"], "stepper", "{message:?}");
        assert_eq!(message.data["type"], message.event.as_str());
    }
    let completed = seen.last().unwrap();
    assert_eq!(completed.data["activity"]["action"], "task_completed");
    assert_eq!(completed.data["id"], completed.id.unwrap());
}

async fn a_client_that_reconnects_with_its_last_event_id_gets_exactly_what_it_missed(app: TestApp) {
    let user = agent(&app, "reconnect@example.com", "slowpoke", &["memory"]).await;
    app.options.models.set_latency_for("slowpoke", Duration::from_millis(300));
    app.options.models.script_for(
        "slowpoke",
        [append("first"), append("second"), Script::Answer("Both noted.".into())],
    );
    let mut first = stream(&app, &user, "/api/agents/slowpoke/events", None).await;
    let added = app.add_task(&user, "slowpoke", "Note two things", 0).await;
    let task = added["id"].as_str().unwrap().to_owned();
    start(&app, &user, "slowpoke").await;
    let before = first.until(WAIT, "the first step", |m| m.event == "step.finished").await;
    let last = *stored_ids(&before).last().unwrap();
    drop(first);
    eventually(WAIT, "the task completes", || async {
        task_status(&app, &user, "slowpoke", &task).await == "complete"
    })
    .await;

    let mut again = stream(&app, &user, "/api/agents/slowpoke/events", Some(last)).await;
    let missed = again.until(WAIT, "the task's end", ends(&task)).await;
    let mut whole = stream(&app, &user, "/api/agents/slowpoke/events", Some(0)).await;
    let everything = whole.until(WAIT, "the task's end", ends(&task)).await;
    let expected: Vec<i64> = stored_ids(&everything).into_iter().filter(|id| *id > last).collect();
    assert!(!expected.is_empty());
    assert_eq!(stored_ids(&missed), expected, "exactly the events after {last}, in order");
    assert!(missed.iter().all(|m| m.id.is_some()), "nothing live is replayed");
    assert_eq!(stored_ids(&everything)[0], 1, "the user's first event is 1");
    let steps = everything.iter().filter(|m| m.event == "step.finished").count();
    assert_eq!(steps, 5);
}

async fn a_retried_model_call_shows_its_retries_on_the_stream(app: TestApp) {
    let user = agent(&app, "retries@example.com", "flaky", &[]).await;
    app.options.models.script_for(
        "flaky",
        [
            Script::Status(500, None),
            Script::Status(429, Some(1)),
            Script::Answer("Made it.".into()),
        ],
    );
    let mut events = stream(&app, &user, "/api/events", None).await;
    let added = app.add_task(&user, "flaky", "Try hard", 0).await;
    let task = added["id"].as_str().unwrap();
    start(&app, &user, "flaky").await;
    let seen = events.until(WAIT, "the task's end", ends(task)).await;
    let retries: Vec<&Value> =
        seen.iter().filter(|m| m.event == "task.retrying").map(|m| &m.data["retry"]).collect();
    assert_eq!(retries.len(), 2, "{seen:?}");
    assert_eq!(
        (retries[0]["attempt"].as_i64(), retries[0]["status"].as_i64()),
        (Some(1), Some(500))
    );
    assert_eq!(
        (retries[1]["attempt"].as_i64(), retries[1]["status"].as_i64()),
        (Some(2), Some(429))
    );
    assert!(retries[1]["reason"].as_str().unwrap().contains("429"), "{:?}", retries[1]);
    let at = |m: &Value| chrono::DateTime::parse_from_rfc3339(m.as_str().unwrap()).unwrap();
    let retrying =
        seen.iter().find(|m| m.event == "task.retrying" && m.data["retry"]["attempt"] == 2);
    let retrying = retrying.unwrap();
    let wait = at(&retrying.data["retry"]["next_attempt_at"]) - at(&retrying.data["at"]);
    assert!(wait >= chrono::Duration::milliseconds(900), "Retry-After: 1 is the next try: {wait}");
    assert_eq!(seen.last().unwrap().event, "task.completed");
    assert!(seen.iter().all(|m| m.data["task_id"] == task || m.event == "agent.status"));
}

async fn cancel_drops_the_model_call_in_flight_and_keeps_what_the_tools_did(app: TestApp) {
    let user = agent(&app, "cancel@example.com", "worker", &["memory"]).await;
    app.options.models.script_for(
        "worker",
        [
            append("Kept before the cancel."),
            Script::Hang(Duration::from_secs(120)),
            Script::Answer("The next one is done.".into()),
        ],
    );
    let mut events = stream(&app, &user, "/api/agents/worker/events", None).await;
    let running = app.add_task(&user, "worker", "Take your time", 0).await;
    let running = running["id"].as_str().unwrap().to_owned();
    let queued = app.add_task(&user, "worker", "Never mind this one", -1).await;
    let queued = queued["id"].as_str().unwrap().to_owned();
    start(&app, &user, "worker").await;
    events
        .until(WAIT, "the tool step", |m| {
            m.event == "step.finished" && m.data["step"]["kind"] == "tool"
        })
        .await;
    let calls_of =
        || app.options.models.calls().into_iter().filter(|c| c.body["model"] == "worker").count();
    eventually(WAIT, "the second model call is in flight", || async { calls_of() == 2 }).await;

    let cancel = |task: &str| {
        let path = format!("/api/agents/worker/backlog/{task}/cancel");
        let user = &user;
        let app = &app;
        async move { app.post_empty(&path, user).await }
    };
    // The queued one first: once the running one is cancelled, the agent would take it next.
    let dropped = cancel(&queued).await;
    assert_eq!(dropped.assert_status(200)["status"], "cancelled");
    let cancelled = cancel(&running).await;
    let cancelled = cancelled.assert_status(200);
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["cancelled_by"], "cancel@example.com");
    assert!(cancelled["completed_at"].is_string());
    let told = events.until(WAIT, "the cancel", ends(&running)).await;
    let end = told.last().unwrap();
    assert_eq!(end.event, "task.cancelled");
    let details = end.data["activity"]["details"].as_str().unwrap();
    assert!(details.contains("cancel@example.com") && details.contains("memory"), "{details}");

    // The agent goes on at once (its worker is not stuck in the dropped call)...
    let next = app.add_task(&user, "worker", "Next", 0).await;
    let next = next["id"].as_str().unwrap().to_owned();
    eventually(WAIT, "the next task completes", || async {
        task_status(&app, &user, "worker", &next).await == "complete"
    })
    .await;
    // ...the cancelled run made no call after the one in flight, and what its tool did
    // stays done, once.
    assert_eq!(calls_of(), 3, "one more call, the next task's");
    let memory = app.get("/api/agents/worker/memory", &user).await.assert_status(200).clone();
    assert_eq!(memory["memory"], "Kept before the cancel.");
    let steps = app.get(&format!("/api/agents/worker/backlog/{running}/steps"), &user).await;
    assert_eq!(steps.assert_status(200)["steps"].as_array().unwrap().len(), 2);
    assert_eq!(task_status(&app, &user, "worker", &running).await, "cancelled");
    assert_eq!(task_status(&app, &user, "worker", &queued).await, "cancelled");
    let agent = app.get("/api/agents/worker", &user).await.assert_status(200).clone();
    assert_eq!(agent["backlog_summary"]["cancelled"], 2, "{agent}");
    assert_eq!(agent["backlog_summary"]["complete"], 1, "{agent}");
    assert_eq!(agent["status"], "active", "a cancel is not a failure");

    cancel(&running).await.assert_error(409, "task_already_cancelled");
    cancel(&next).await.assert_error(409, "task_finished");
    app.post_empty("/api/agents/worker/backlog/nope/cancel", &user)
        .await
        .assert_error(404, "task_not_found");
    let actions = app.actions(&user, "worker").await;
    assert_eq!(actions.iter().filter(|a| *a == "task_cancelled").count(), 2, "{actions:?}");
}

/// A second node on the same database that runs no agents: its streams see what the test's
/// server runs, and its cancels stop it there.
async fn a_stream_on_another_node_follows_the_run_and_a_cancel_there_stops_it(app: TestApp) {
    let user = agent(&app, "nodes@example.com", "remote", &[]).await;
    app.options.models.script_for(
        "remote",
        [Script::Answer("First done.".into()), Script::Hang(Duration::from_secs(120))],
    );
    let other = app.another_node().await;
    let address = other.address.clone();

    let mut events = Sse::connect(&address, "/api/events", &user.token, None).await;
    let first = app.add_task(&user, "remote", "Quick one", 1).await;
    let first = first["id"].as_str().unwrap().to_owned();
    let slow = app.add_task(&user, "remote", "Slow one", 0).await;
    let slow = slow["id"].as_str().unwrap().to_owned();
    start(&app, &user, "remote").await;
    let seen = events.until(WAIT, "the first task's end", ends(&first)).await;
    assert!(seen.iter().any(|m| m.event == "step.finished"), "the run's step, written there");
    assert_eq!(seen.last().unwrap().event, "task.completed");
    events
        .until(WAIT, "the slow task's start", |m| {
            m.event == "task.started" && m.data["task_id"] == slow
        })
        .await;
    let calls =
        || app.options.models.calls().into_iter().filter(|c| c.body["model"] == "remote").count();
    eventually(WAIT, "the slow call is in flight", || async { calls() == 2 }).await;

    let client = reqwest::Client::new();
    let cancelled = client
        .post(format!("{address}/api/agents/remote/backlog/{slow}/cancel"))
        .bearer_auth(&user.token)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 200);
    events.until(WAIT, "the cancel", ends(&slow)).await;
    // The node running it let go of the call: its worker takes the next task at once.
    app.options.models.script_for("remote", [Script::Answer("After done.".into())]);
    let next = app.add_task(&user, "remote", "After", 0).await;
    let next = next["id"].as_str().unwrap().to_owned();
    eventually(WAIT, "the next task completes on the running node", || async {
        task_status(&app, &user, "remote", &next).await == "complete"
    })
    .await;
    assert_eq!(calls(), 3);
    other.close().await;
}

async fn streams_are_bounded_per_user_and_show_only_the_users_own_events(db: TestDb) {
    let app = app_with(db, |o| o.quotas.streams_per_user = 2).await;
    let ada = agent(&app, "ada@example.com", "ada-agent", &[]).await;
    let bob = agent(&app, "bob@example.com", "bob-agent", &[]).await;
    let mut bobs = stream(&app, &bob, "/api/events", None).await;
    let _second = stream(&app, &bob, "/api/agents/bob-agent/events", None).await;
    let refused = Sse::open(&app.address, "/api/events", &bob.token, None).await;
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "quota_exceeded", "{body}");
    assert_eq!(body["error"]["details"]["quota"], "streams_per_user", "{body}");
    // Another user's agent is a missing one, before any stream opens.
    let theirs = Sse::open(&app.address, "/api/agents/ada-agent/events", &bob.token, None).await;
    assert_eq!(theirs.status(), 404);
    // Ada's streams are her own to count.
    let mut adas = stream(&app, &ada, "/api/events", None).await;

    app.add_task(&ada, "ada-agent", "Ada's work", 0).await;
    app.add_task(&bob, "bob-agent", "Bob's work", 0).await;
    let first = bobs.next(WAIT).await.expect("Bob's event");
    assert_eq!(first.data["activity"]["details"], "Task 'Bob's work' added with priority 0.");
    assert_eq!(first.id, Some(2), "Bob's own numbering: his agent's creation was 1");
    let hers = adas.next(WAIT).await.expect("Ada's event");
    assert_eq!(hers.data["agent_id"], "ada-agent");

    // A stream closed by its client frees its place.
    drop(bobs);
    eventually(WAIT, "a place frees up", || async {
        Sse::open(&app.address, "/api/events", &bob.token, None).await.status() == 200
    })
    .await;
}

/// An event committed where no node hears of it: written by another process, or staged by a
/// node killed between its commit and the numbering (on PostgreSQL a node numbers what it
/// wrote right after its commit, and every node what anyone left at least every second). Here
/// the row goes in by SQL behind the nodes' backs, so nothing rings a bell: the stream gets it
/// from PostgreSQL's numbering sweep, or from SQLite's poll of other processes' writes.
async fn an_event_committed_where_no_node_hears_of_it_still_reaches_the_streams(app: TestApp) {
    let user = agent(&app, "behind@example.com", "bystander", &[]).await;
    let mut events = stream(&app, &user, "/api/events", None).await;
    let written = "Written by another process.";
    app.db
        .execute(
            "INSERT INTO activity (owner_id, agent_id, action, details, task_id, created_at) \
             SELECT owner_id, agent_id, action, $2, task_id, created_at FROM activity \
             WHERE owner_id = $1 ORDER BY id LIMIT 1",
            &[&user.id, written],
        )
        .await;
    let seen = events
        .until(WAIT, "the entry written elsewhere", |m| m.data["activity"]["details"] == written)
        .await;
    assert_eq!(seen.len(), 1, "only that entry happened: {seen:?}");
    assert_eq!(seen[0].data["agent_id"], "bystander");
    let latest = app.get("/api/agents/bystander/activity?limit=1", &user).await;
    assert_eq!(seen[0].id, Some(2), "numbered after the agent's creation, 1");
    assert_eq!(latest.assert_status(200)["entries"][0]["details"], written);
    if app.db.backend == Backend::Postgres {
        let staged = "SELECT COUNT(*) FROM pending_events WHERE owner_id = $1";
        assert_eq!(app.db.count(staged, &[&user.id]).await, 0, "nothing left to number");
    }
}

/// Four clients add tasks to one owner's two agents at once, two through each of two nodes,
/// while a stream follows the owner: each add's event arrives once, and the numbers run one
/// after another with no gap, though both nodes (and the stream) number concurrently.
async fn events_written_at_once_through_two_nodes_are_numbered_once_each_without_a_gap(
    app: TestApp,
) {
    const ADDS: usize = 25;
    let user = agent(&app, "busy@example.com", "busy", &[]).await;
    let body = json!({"id": "busier", "name": "Busier", "role_prompt": ROLE, "channel": "more",
        "model": "openai:busier"});
    app.post("/api/agents", &user, body).await.assert_status(201);
    let other = app.another_node().await;
    let mut events = stream(&app, &user, "/api/events", None).await;

    let client = reqwest::Client::new();
    let adders = (0..4).map(|adder| {
        let address = if adder % 2 == 0 { app.address.clone() } else { other.address.clone() };
        let agent = if adder < 2 { "busy" } else { "busier" };
        let (client, token) = (client.clone(), user.token.clone());
        tokio::spawn(async move {
            for n in 0..ADDS {
                let added = client
                    .post(format!("{address}/api/agents/{agent}/backlog"))
                    .bearer_auth(&token)
                    .json(&json!({"title": format!("Adder {adder}, task {n}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(added.status(), 201);
            }
        })
    });
    for adder in adders.collect::<Vec<_>>() {
        adder.await.unwrap();
    }
    let added = std::cell::Cell::new(0);
    let seen = events
        .until(WAIT, "every add's event", |m| {
            if m.event == "task.added" {
                added.set(added.get() + 1);
            }
            added.get() == 4 * ADDS
        })
        .await;
    let ids = stored_ids(&seen);
    assert_eq!(ids.len(), seen.len(), "every event here is stored: {seen:?}");
    assert!(
        ids.windows(2).all(|w| w[1] == w[0] + 1),
        "numbers with a gap or out of order: {ids:?}"
    );
    let mut tasks: Vec<&str> = seen.iter().map(|m| m.data["task_id"].as_str().unwrap()).collect();
    tasks.sort_unstable();
    tasks.dedup();
    assert_eq!(tasks.len(), 4 * ADDS, "each task's event once");
    other.close().await;
}
