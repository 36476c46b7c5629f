//! Shared rate limits (`models.rate_limits`) across agents and nodes: two servers on one
//! database against a fake provider that enforces its own limit.

use std::time::{Duration, Instant};

use agentcore::domain::ratelimit::{RateLimit, RateLimits};
use serde_json::{Value, json};

use crate::fake_models::{Call, Script};
use crate::helpers::{Options, TestApp, TestDb, User, app_with, backend_tests, eventually};

backend_tests! { db;
    twenty_agents_on_two_nodes_share_the_provider_s_limit_fairly_and_no_task_fails,
    a_429_with_retry_after_holds_back_every_agent_on_every_node,
    a_rate_limited_answer_is_no_failed_attempt_under_a_shared_limit,
}

const WAIT: Duration = Duration::from_secs(30);
const MODEL: &str = "openai:gpt-4o-mini";
const BLOCKED: &str = "SELECT COUNT(*) FROM rate_scopes WHERE blocked_until IS NOT NULL";

fn limited(options: &mut Options, limit: &str, window: Duration) {
    options.rate_limits = RateLimits {
        window,
        limits: [("openai".to_owned(), RateLimit::parse(limit).unwrap())].into(),
    };
    // Each node may run every agent: the share is not what limits them here.
    options.runtime.max_concurrent_calls = 64;
}

/// A second server on the first one's database, with the same settings and fake provider.
async fn second_node(first: &TestApp) -> TestApp {
    TestApp::start(first.db.stand_in(), first.options.clone()).await
}

/// The free plan's agents per user.
const PER_USER: usize = 3;

/// `count` agents on the limited model (three per user, as the free plan allows), none
/// started yet.
async fn agents(app: &TestApp, email: &str, count: usize) -> Vec<(User, String)> {
    let mut agents = Vec::new();
    for n in 0..count {
        let user = match agents.last() {
            Some((user, _)) if n % PER_USER != 0 => User::clone(user),
            _ => app.register(&format!("{}-{email}", n / PER_USER)).await,
        };
        let id = format!("agent-{n:02}");
        let agent = json!({"id": id, "name": format!("Agent {n}"), "role_prompt": "Be brief.",
            "channel": "general", "model": MODEL, "tools": []});
        app.post("/api/agents", &user, agent).await.assert_status(201);
        agents.push((user, id));
    }
    agents
}

async fn start(app: &TestApp, (user, id): &(User, String)) {
    app.post_empty(&format!("/api/agents/{id}/start"), user).await.assert_status(200);
}

async fn add_task(app: &TestApp, (user, id): &(User, String), title: &str) -> Value {
    app.add_task(user, id, title, 0).await
}

async fn tasks(app: &TestApp, (user, id): &(User, String)) -> Vec<Value> {
    let reply = app.get(&format!("/api/agents/{id}/backlog"), user).await;
    reply.assert_status(200)["tasks"].as_array().unwrap().clone()
}

async fn all_finished(app: &TestApp, agents: &[(User, String)], each: usize) -> bool {
    for agent in agents {
        let done = tasks(app, agent).await;
        let finished = done.iter().filter(|t| t["status"] == "complete" || t["status"] == "failed");
        if finished.count() < each {
            return false;
        }
    }
    true
}

/// The most requests the provider answered within any `window`-long span.
fn busiest_window(calls: &[Call], window: Duration) -> usize {
    let times: Vec<Instant> =
        calls.iter().filter(|c| !c.rate_limited).map(|c| c.received).collect();
    times
        .iter()
        .map(|start| {
            times.iter().filter(|t| **t >= *start && t.duration_since(*start) < window).count()
        })
        .max()
        .unwrap_or(0)
}

async fn twenty_agents_on_two_nodes_share_the_provider_s_limit_fairly_and_no_task_fails(
    db: TestDb,
) {
    const AGENTS: usize = 20;
    const TASKS: usize = 3;
    const LIMIT: usize = 10;
    let window = Duration::from_secs(2);
    let first = app_with(db, |o| limited(o, &format!("{LIMIT}/-"), window)).await;
    let fake = first.options.models.clone();
    fake.enforce_limit(LIMIT, window);
    let second = second_node(&first).await;
    let ids = agents(&first, "crowd@example.com", AGENTS).await;
    for agent in &ids {
        for n in 1..=TASKS {
            add_task(&first, agent, &format!("Task {n} of {}", agent.1)).await;
        }
    }
    // The provider holds the first call back (429, Retry-After: 2) so every agent is waiting
    // when the slots come: the order they are served in is the queue's, not their start's.
    fake.script([Script::Status(429, Some(2))]);
    start(&first, &ids[0]).await;
    eventually(WAIT, "the provider's 429 blocks its scope", || async {
        first.db.count(BLOCKED, &[]).await == 1
    })
    .await;
    for agent in &ids[1..] {
        start(&first, agent).await;
    }
    eventually(Duration::from_secs(60), "every task finishes", || async {
        all_finished(&first, &ids, TASKS).await
    })
    .await;

    let calls = fake.calls();
    // A slot frees a window and a fiftieth after its grant; a call slower than that margin on
    // its way to the provider (a loaded machine) may meet one 429, which every agent then
    // waits out: at most two, stated in docs/configuration.md.
    let refused = fake.refused_by_limit();
    assert!(refused <= 2, "{refused} calls went over the provider's limit");
    assert_eq!(calls.len(), AGENTS * TASKS + 1 + refused, "the 429, then one call per task");
    assert!(busiest_window(&calls, window) <= LIMIT, "{}", busiest_window(&calls, window));
    let mut finished_at: Vec<(String, Vec<chrono::DateTime<chrono::FixedOffset>>)> = Vec::new();
    for agent in &ids {
        let (id, done) = (&agent.1, tasks(&first, agent).await);
        assert!(done.iter().all(|t| t["status"] == "complete"), "{id}: {done:?}");
        let mut times: Vec<_> = done
            .iter()
            .map(|t| chrono::DateTime::parse_from_rfc3339(t["completed_at"].as_str().unwrap()))
            .map(Result::unwrap)
            .collect();
        times.sort();
        finished_at.push((id.clone(), times));
    }
    // Fair shares: every agent finished its first task before any agent finished its third.
    let last_first = finished_at.iter().map(|(_, t)| t[0]).max().unwrap();
    let first_third = finished_at.iter().map(|(_, t)| t[TASKS - 1]).min().unwrap();
    assert!(last_first < first_third, "an agent was starved: {finished_at:?}");
    let ran = |app: &TestApp| app.core.runtime_stats().tasks_completed;
    assert!(ran(&first) > 0 && ran(&second) > 0, "both nodes ran tasks");
    second.stop().await;
}

async fn a_429_with_retry_after_holds_back_every_agent_on_every_node(db: TestDb) {
    let first = app_with(db, |o| {
        limited(o, "1000/-", Duration::from_secs(60));
        o.runtime.retry_max = Duration::from_secs(5);
    })
    .await;
    let fake = first.options.models.clone();
    fake.script([Script::Status(429, Some(2))]);
    let second = second_node(&first).await;
    let ids = agents(&first, "held@example.com", 6).await;
    for agent in &ids {
        add_task(&first, agent, &format!("Work of {}", agent.1)).await;
    }
    start(&first, &ids[0]).await;
    eventually(WAIT, "the provider's 429 blocks its scope", || async {
        first.db.count(BLOCKED, &[]).await == 1
    })
    .await;
    let refused = fake.calls()[0].answered.unwrap();
    for agent in &ids[1..] {
        start(&first, agent).await;
    }
    eventually(WAIT, "every task finishes", || async { all_finished(&first, &ids, 1).await }).await;

    let calls = fake.calls();
    let during: Vec<Duration> = calls[1..]
        .iter()
        .map(|c| c.received.duration_since(refused))
        .filter(|after| *after < Duration::from_millis(1_900))
        .collect();
    assert!(during.len() <= 1, "calls during the provider's wait: {during:?}");
    assert_eq!(calls.len(), ids.len() + 1, "one refused call, then one per task");
    for agent in &ids {
        assert_eq!(tasks(&first, agent).await[0]["status"], "complete", "{}", agent.1);
    }
    let told = "SELECT COUNT(*) FROM events WHERE kind = 'retry' \
        AND CAST(data AS TEXT) LIKE '%rate_limited%'";
    assert!(first.db.count(told, &[]).await >= 1, "the waits are on the tasks' event streams");
    second.stop().await;
}

async fn a_rate_limited_answer_is_no_failed_attempt_under_a_shared_limit(db: TestDb) {
    let app = app_with(db, |o| limited(o, "-/-", Duration::from_secs(60))).await;
    let fake = app.options.models.clone();
    // Four 429s: without the shared limit, the third would fail the task.
    fake.script([
        Script::Status(429, Some(0)),
        Script::Status(429, Some(0)),
        Script::Status(429, None),
        Script::Status(429, Some(0)),
    ]);
    let ids = agents(&app, "patient@example.com", 1).await;
    add_task(&app, &ids[0], "Keep trying").await;
    start(&app, &ids[0]).await;
    eventually(WAIT, "the task finishes", || async { all_finished(&app, &ids, 1).await }).await;
    let task = &tasks(&app, &ids[0]).await[0];
    assert_eq!(task["status"], "complete", "{task}");
    assert_eq!(fake.calls().len(), 5);
}
