//! The node's bound on model calls in flight, across many agents.

use super::*;

backend_tests! { db;
    model_calls_in_flight_stay_within_the_configured_bound,
}

async fn model_calls_in_flight_stay_within_the_configured_bound(db: TestDb) {
    let mut options = Options::new().await;
    options.runtime.max_concurrent_calls = 2;
    options.models.set_latency(Duration::from_millis(250));
    let app = TestApp::start(db, options).await;
    let user = app.register("bound@example.com").await;
    // Five agents: more than `free` allows (billing moves users between plans in service).
    app.db.execute("UPDATE workspaces SET plan = 'team' WHERE id = $1", &[&user.id]).await;
    for a in 0..5 {
        let id = format!("busy-{a}");
        let body = json!({"id": id, "name": id, "role_prompt": ROLE, "channel": "c", "model": "openai:gpt-test"});
        app.post("/api/agents", &user, body).await.assert_status(201);
        app.add_task(&user, &id, "Work", 0).await;
        app.add_task(&user, &id, "More work", 0).await;
        app.post_empty(&format!("/api/agents/{id}/start"), &user).await.assert_status(200);
    }
    eventually(WAIT, "all ten tasks complete", || async {
        models(&app).calls().iter().filter(|c| c.answered.is_some()).count() == 10
    })
    .await;
    let mut events: Vec<(std::time::Instant, i32)> = Vec::new();
    for call in models(&app).calls() {
        events.push((call.received, 1));
        events.push((call.answered.unwrap(), -1));
    }
    // At equal instants the end comes first: a call may start the moment another ended.
    events.sort_by_key(|&(at, delta)| (at, delta));
    let (mut open, mut most) = (0, 0);
    for (_, delta) in events {
        open += delta;
        most = most.max(open);
    }
    assert_eq!(most, 2, "calls in flight at once");
}
