//! The activity log over HTTP: entries for each change, newest first, with paging.

use serde_json::json;

use crate::helpers::{TestApp, backend_tests};

backend_tests! { app;
    each_change_writes_an_entry_newest_first,
    thirty_entries_by_default_limit_and_before_page_back,
    paging_one_entry_at_a_time_never_skips_part_of_a_change,
}

async fn each_change_writes_an_entry_newest_first(app: TestApp) {
    let user = app.register("log@example.com").await;
    app.create_agent(&user, "logger").await;
    app.patch("/api/agents/logger", &user, json!({"channel": "log"})).await.assert_status(200);
    app.post_empty("/api/agents/logger/start", &user).await.assert_status(200);
    app.post_empty("/api/agents/logger/vacation", &user).await.assert_status(200);
    app.post_empty("/api/agents/logger/vacation", &user).await.assert_status(200);
    app.post_empty("/api/agents/logger/stop", &user).await.assert_status(200);
    app.patch("/api/agents/logger", &user, json!({"status": "vacation"})).await.assert_status(200);
    // Added while the agent is away, so the runtime leaves it alone.
    let task = app.add_task(&user, "logger", "write it down", 0).await;
    let task_path = format!("/api/agents/logger/backlog/{}", task["id"].as_str().unwrap());
    app.patch(&task_path, &user, json!({"priority": 2})).await.assert_status(200);
    app.delete(&task_path, &user).await.assert_status(200);

    let reply = app.get("/api/agents/logger/activity", &user).await;
    let entries = reply.assert_status(200)["entries"].as_array().unwrap().clone();
    let actions: Vec<&str> = entries.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        [
            "task_deleted",
            "task_updated",
            "task_added",
            "status_changed",
            "agent_stopped",
            "vacation_ended",
            "vacation_started",
            "agent_started",
            "agent_updated",
            "agent_created"
        ]
    );
    for entry in &entries {
        assert!(entry["details"].as_str().is_some_and(|d| !d.is_empty()), "{entry}");
        let stamp = entry["timestamp"].as_str().unwrap();
        assert!(
            stamp.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(stamp).is_ok(),
            "{stamp}"
        );
    }
    let stamps: Vec<&str> = entries.iter().map(|e| e["timestamp"].as_str().unwrap()).collect();
    let parsed: Vec<_> =
        stamps.iter().map(|s| chrono::DateTime::parse_from_rfc3339(s).unwrap()).collect();
    assert!(parsed.windows(2).all(|w| w[0] >= w[1]), "newest first: {stamps:?}");
    assert_eq!(entries[0]["task_id"], task["id"]);
}

async fn thirty_entries_by_default_limit_and_before_page_back(app: TestApp) {
    let user = app.register("paging@example.com").await;
    app.create_agent(&user, "busy").await;
    for i in 0..39 {
        app.add_task(&user, "busy", &format!("task {i}"), 0).await;
    }
    let entries = |reply: crate::helpers::Reply| {
        reply.assert_status(200)["entries"].as_array().unwrap().clone()
    };

    let page = entries(app.get("/api/agents/busy/activity", &user).await);
    assert_eq!(page.len(), 30);
    assert_eq!(page[0]["details"], "Task 'task 38' added with priority 0.");
    assert_eq!(entries(app.get("/api/agents/busy/activity?limit=1000", &user).await).len(), 40);
    assert_eq!(entries(app.get("/api/agents/busy/activity?limit=1", &user).await).len(), 1);

    let first = entries(app.get("/api/agents/busy/activity?limit=15", &user).await);
    let oldest = first.last().unwrap()["timestamp"].as_str().unwrap().to_owned();
    let encoded = oldest.replace(':', "%3A");
    let second = entries(
        app.get(&format!("/api/agents/busy/activity?limit=15&before={encoded}"), &user).await,
    );
    assert_eq!(second.len(), 15);
    assert_eq!(second[0]["details"], "Task 'task 23' added with priority 0.");
    let rest = entries(
        app.get(&format!("/api/agents/busy/activity?limit=1000&before={encoded}"), &user).await,
    );
    assert_eq!(rest.len(), 25);
    assert_eq!(rest.last().unwrap()["action"], "agent_created");

    for bad in [
        "limit=0",
        "limit=1001",
        "limit=ten",
        "limit=-1",
        "before=yesterday",
        "before=2026-13-01T00:00:00Z",
    ] {
        let reply = app.get(&format!("/api/agents/busy/activity?{bad}"), &user).await;
        reply.assert_error(400, "validation_failed");
    }
}

async fn paging_one_entry_at_a_time_never_skips_part_of_a_change(app: TestApp) {
    let user = app.register("onebyone@example.com").await;
    app.create_agent(&user, "pager").await;
    app.patch("/api/agents/pager", &user, json!({"name": "Pager", "status": "active"}))
        .await
        .assert_status(200);
    let mut seen = Vec::new();
    let mut path = "/api/agents/pager/activity?limit=1".to_owned();
    loop {
        let page = app.get(&path, &user).await;
        let Some(entry) = page.assert_status(200)["entries"].as_array().unwrap().first().cloned()
        else {
            break;
        };
        seen.push(entry["action"].as_str().unwrap().to_owned());
        let before = entry["timestamp"].as_str().unwrap().replace(':', "%3A");
        path = format!("/api/agents/pager/activity?limit=1&before={before}");
    }
    assert_eq!(seen, ["status_changed", "agent_updated", "agent_created"]);
}
