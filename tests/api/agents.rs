//! Agents over HTTP: shapes, validation, owner scoping, status commands and deletion.

use serde_json::json;

use crate::helpers::{TestApp, backend_tests};

fn agent_body(id: &str) -> serde_json::Value {
    json!({"id": id, "name": "Writer", "role_prompt": "You write weekly updates.", "channel": "general"})
}

backend_tests! { app;
    creating_an_agent_answers_201_with_every_field,
    agent_creation_refuses_each_invalid_field,
    agent_ids_are_unique_per_user_not_globally,
    creating_the_same_agent_twice_at_once_yields_one_agent_and_one_conflict,
    the_list_holds_only_the_callers_agents_oldest_first_with_filters,
    backlog_summary_counts_tasks_in_each_state,
    the_single_agent_view_holds_the_backlog_in_run_order,
    another_users_agent_is_simply_not_found,
    patch_changes_only_the_supplied_fields_and_logs_them,
    start_stop_and_patch_status_move_the_agent_as_documented,
    vacation_toggles_and_restores_the_status_before_it,
    deleting_an_agent_removes_its_tasks_and_activity,
}

async fn creating_an_agent_answers_201_with_every_field(app: TestApp) {
    let user = app.register("create@example.com").await;
    let body = json!({"id": "writer-1", "name": "Writer", "role_prompt": "You write.", "channel": "updates",
        "workspace": "marketing", "throttle_seconds": 1.5, "model": "openai:gpt-4o-mini", "unknown_field": true});
    let reply = app.post("/api/agents", &user, body).await;
    let agent = reply.assert_status(201);
    assert_eq!(agent["id"], "writer-1");
    assert_eq!(agent["name"], "Writer");
    assert_eq!(agent["status"], "idle");
    assert_eq!(agent["channel"], "updates");
    assert_eq!(agent["role_prompt"], "You write.");
    assert_eq!(agent["workspace"], "marketing");
    assert_eq!(agent["throttle_seconds"], 1.5);
    assert_eq!(agent["model"], "openai:gpt-4o-mini");
    assert_eq!(
        agent["backlog_summary"],
        json!({"queued": 0, "in_progress": 0, "awaiting_approval": 0, "complete": 0, "failed": 0,
            "cancelled": 0})
    );
    let created = agent["created_at"].as_str().unwrap();
    assert!(
        created.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(created).is_ok(),
        "{created}"
    );

    let defaults = app.post("/api/agents", &user, agent_body("plain")).await;
    let defaults = defaults.assert_status(201);
    assert_eq!(
        (defaults["throttle_seconds"].as_f64(), &defaults["workspace"], &defaults["model"]),
        (Some(0.0), &json!(null), &json!(null))
    );
}

async fn agent_creation_refuses_each_invalid_field(app: TestApp) {
    let user = app.register("invalid@example.com").await;
    let with = |field: &str, value: serde_json::Value| {
        let mut body = agent_body("valid-id");
        body[field] = value;
        (body, field.to_owned())
    };
    let cases = [
        with("id", json!("Bad Slug")),
        with("id", json!("-leading")),
        with("id", json!("a".repeat(64))),
        with("id", json!(7)),
        with("name", json!("")),
        with("name", json!("n".repeat(101))),
        with("role_prompt", json!("p".repeat(32_001))),
        with("role_prompt", json!(null)),
        with("channel", json!("c".repeat(101))),
        with("workspace", json!("w".repeat(101))),
        with("throttle_seconds", json!(-1)),
        with("throttle_seconds", json!(86_401)),
        with("throttle_seconds", json!("10")),
        with("model", json!("gpt-4o")),
    ];
    for (body, field) in cases {
        let reply = app.post("/api/agents", &user, body.clone()).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"][&field].is_string(), "{field}: {}", reply.body);
    }
    let edge = json!({"id": "a".repeat(63), "name": "n".repeat(100), "role_prompt": "p".repeat(32_000), "channel": "c".repeat(100), "throttle_seconds": 86_400});
    app.post("/api/agents", &user, edge).await.assert_status(201);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents", &[]).await, 1);
}

async fn agent_ids_are_unique_per_user_not_globally(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let bob = app.register("bob@example.com").await;
    app.create_agent(&ada, "writer").await;
    app.post("/api/agents", &ada, agent_body("writer")).await.assert_error(409, "agent_exists");
    app.create_agent(&bob, "writer").await;
}

async fn creating_the_same_agent_twice_at_once_yields_one_agent_and_one_conflict(app: TestApp) {
    let user = app.register("race@example.com").await;
    let (first, second) = tokio::join!(
        app.post("/api/agents", &user, agent_body("racer")),
        app.post("/api/agents", &user, agent_body("racer")),
    );
    let mut statuses = [first.status.as_u16(), second.status.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409]);
    let conflict = if first.status == 409 { first } else { second };
    conflict.assert_error(409, "agent_exists");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents WHERE id = 'racer'", &[]).await, 1);
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM activity WHERE action = 'agent_created'", &[]).await,
        1
    );
}

async fn the_list_holds_only_the_callers_agents_oldest_first_with_filters(app: TestApp) {
    let user = app.register("list@example.com").await;
    let other = app.register("other@example.com").await;
    app.create_agent(&other, "not-mine").await;
    for (id, workspace) in [("c-first", Some("ops")), ("a-second", None), ("b-third", Some("ops"))]
    {
        let mut body = agent_body(id);
        if let Some(workspace) = workspace {
            body["workspace"] = json!(workspace);
        }
        app.post("/api/agents", &user, body).await.assert_status(201);
    }
    app.post_empty("/api/agents/a-second/start", &user).await.assert_status(200);

    let ids = |reply: &crate::helpers::Reply| -> Vec<String> {
        reply.body["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = app.get("/api/agents", &user).await;
    assert_eq!(ids(&all), ["c-first", "a-second", "b-third"]);
    let item = &all.body["agents"][0];
    for field in [
        "id",
        "name",
        "status",
        "channel",
        "backlog_summary",
        "created_at",
        "workspace",
        "throttle_seconds",
        "model",
    ] {
        assert!(item.get(field).is_some(), "list item lacks {field}: {item}");
    }
    assert_eq!(ids(&app.get("/api/agents?workspace=ops", &user).await), ["c-first", "b-third"]);
    assert_eq!(ids(&app.get("/api/agents?status=active", &user).await), ["a-second"]);
    assert_eq!(
        ids(&app.get("/api/agents?status=idle&workspace=ops", &user).await),
        ["c-first", "b-third"]
    );
    assert!(ids(&app.get("/api/agents?workspace=none", &user).await).is_empty());
    app.get("/api/agents?status=sleeping", &user).await.assert_error(400, "validation_failed");
    // A workspace no agent can have is refused by the same rules as on create, not sent to
    // the database (PostgreSQL cannot even compare a text with a NUL in it).
    for bad in ["%00", "a%00b", "", "a%0Ab"] {
        let reply = app.get(&format!("/api/agents?workspace={bad}"), &user).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"]["workspace"].is_string(), "{bad}: {}", reply.body);
    }
}

async fn backlog_summary_counts_tasks_in_each_state(app: TestApp) {
    let user = app.register("summary@example.com").await;
    app.create_agent(&user, "counter").await;
    app.create_agent(&user, "empty").await;
    let mut ids = Vec::new();
    for i in 0..8 {
        ids.push(
            app.add_task(&user, "counter", &format!("task {i}"), 0).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    app.force_task_status(&ids[0], "in_progress").await;
    app.force_task_status(&ids[1], "complete").await;
    app.force_task_status(&ids[2], "complete").await;
    app.force_task_status(&ids[3], "failed").await;
    app.force_task_status(&ids[4], "awaiting_approval").await;
    app.force_task_status(&ids[7], "cancelled").await;

    let expected = json!({"queued": 2, "in_progress": 1, "awaiting_approval": 1, "complete": 2,
        "failed": 1, "cancelled": 1});
    let list = app.get("/api/agents", &user).await;
    assert_eq!(list.body["agents"][0]["backlog_summary"], expected);
    assert_eq!(
        list.body["agents"][1]["backlog_summary"],
        json!({"queued": 0, "in_progress": 0, "awaiting_approval": 0, "complete": 0, "failed": 0,
            "cancelled": 0})
    );
    assert_eq!(app.get("/api/agents/counter", &user).await.body["backlog_summary"], expected);
}

async fn the_single_agent_view_holds_the_backlog_in_run_order(app: TestApp) {
    let user = app.register("detail@example.com").await;
    app.create_agent(&user, "planner").await;
    let low = app.add_task(&user, "planner", "low", 0).await;
    let high = app.add_task(&user, "planner", "high", 5).await;
    let low_later = app.add_task(&user, "planner", "low later", 0).await;
    let running = app.add_task(&user, "planner", "running", 0).await;
    let done_first = app.add_task(&user, "planner", "done first", 0).await;
    let done_second = app.add_task(&user, "planner", "done second", 0).await;
    app.force_task_status(running["id"].as_str().unwrap(), "in_progress").await;
    app.force_task_status(done_first["id"].as_str().unwrap(), "complete").await;
    app.force_task_status(done_second["id"].as_str().unwrap(), "failed").await;

    let reply = app.get("/api/agents/planner", &user).await;
    let agent = reply.assert_status(200);
    for field in [
        "id",
        "name",
        "status",
        "channel",
        "role_prompt",
        "throttle_seconds",
        "workspace",
        "model",
        "created_at",
        "backlog_summary",
        "backlog",
    ] {
        assert!(agent.get(field).is_some(), "detail lacks {field}");
    }
    let titles: Vec<&str> =
        agent["backlog"].as_array().unwrap().iter().map(|t| t["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["running", "high", "low", "low later", "done second", "done first"]);
    let _ = (low, high, low_later);
}

async fn another_users_agent_is_simply_not_found(app: TestApp) {
    let owner = app.register("owner@example.com").await;
    let intruder = app.register("intruder@example.com").await;
    app.create_agent(&owner, "private").await;
    let task = app.add_task(&owner, "private", "secret task", 0).await;
    let task_path = format!("/api/agents/private/backlog/{}", task["id"].as_str().unwrap());

    app.get("/api/agents/private", &intruder).await.assert_error(404, "agent_not_found");
    app.patch("/api/agents/private", &intruder, json!({"name": "Mine"}))
        .await
        .assert_error(404, "agent_not_found");
    app.delete("/api/agents/private", &intruder).await.assert_error(404, "agent_not_found");
    for action in ["start", "stop", "vacation"] {
        app.post_empty(&format!("/api/agents/private/{action}"), &intruder)
            .await
            .assert_error(404, "agent_not_found");
    }
    app.get("/api/agents/private/activity", &intruder).await.assert_error(404, "agent_not_found");
    app.get("/api/agents/private/backlog", &intruder).await.assert_error(404, "agent_not_found");
    app.post("/api/agents/private/backlog", &intruder, json!({"title": "x"}))
        .await
        .assert_error(404, "agent_not_found");
    app.get(&task_path, &intruder).await.assert_error(404, "agent_not_found");
    app.patch(&task_path, &intruder, json!({"title": "x"}))
        .await
        .assert_error(404, "agent_not_found");
    app.delete(&task_path, &intruder).await.assert_error(404, "agent_not_found");
    app.post_empty(&format!("{task_path}/retry"), &intruder)
        .await
        .assert_error(404, "agent_not_found");

    let mine = app.get("/api/agents/private", &owner).await;
    assert_eq!(mine.assert_status(200)["name"], "Agent private");
    assert_eq!(mine.body["backlog"].as_array().unwrap().len(), 1);
    app.get("/api/agents/no-such-agent", &owner).await.assert_error(404, "agent_not_found");
    app.get("/api/agents/Not%20A%20Slug", &owner).await.assert_error(404, "agent_not_found");
}

async fn patch_changes_only_the_supplied_fields_and_logs_them(app: TestApp) {
    let user = app.register("patch@example.com").await;
    app.create_agent(&user, "editor").await;
    let reply = app.patch("/api/agents/editor", &user, json!({"name": "Chief Editor", "throttle_seconds": 30, "model": "anthropic:claude-sonnet-4"})).await;
    let agent = reply.assert_status(200);
    assert_eq!(agent["id"], "editor");
    assert_eq!(agent["name"], "Chief Editor");
    assert_eq!(agent["throttle_seconds"], 30.0);
    assert_eq!(agent["model"], "anthropic:claude-sonnet-4");
    assert_eq!(agent["channel"], "general");
    assert_eq!(agent["status"], "idle");

    let cleared =
        app.patch("/api/agents/editor", &user, json!({"model": null, "workspace": "press"})).await;
    assert_eq!(cleared.body["model"], json!(null));
    assert_eq!(cleared.body["workspace"], "press");

    let unchanged = app.patch("/api/agents/editor", &user, json!({})).await;
    assert_eq!(unchanged.assert_status(200)["name"], "Chief Editor");

    app.patch("/api/agents/editor", &user, json!({"status": "sleeping"}))
        .await
        .assert_error(400, "validation_failed");
    app.patch("/api/agents/editor", &user, json!({"name": ""}))
        .await
        .assert_error(400, "validation_failed");
    app.patch("/api/agents/editor", &user, json!({"throttle_seconds": 90_000}))
        .await
        .assert_error(400, "validation_failed");
    app.patch("/api/agents/editor", &user, json!({"role_prompt": 5}))
        .await
        .assert_error(400, "validation_failed");

    let actions = app.actions(&user, "editor").await;
    assert_eq!(actions, ["agent_updated", "agent_updated", "agent_created"]);
    let entries = app.get("/api/agents/editor/activity", &user).await;
    let details = entries.body["entries"][1]["details"].as_str().unwrap();
    assert!(
        details.contains("name")
            && details.contains("throttle_seconds")
            && details.contains("model"),
        "{details}"
    );
}

async fn start_stop_and_patch_status_move_the_agent_as_documented(app: TestApp) {
    let user = app.register("states@example.com").await;
    app.create_agent(&user, "worker").await;
    let status = |reply: crate::helpers::Reply| reply.assert_status(200).clone();
    let current = || async { app.get("/api/agents/worker", &user).await.body["status"].clone() };

    assert_eq!(
        status(app.post_empty("/api/agents/worker/start", &user).await),
        json!({"status": "started", "agent_id": "worker"})
    );
    assert_eq!(current().await, "active");
    assert_eq!(
        status(app.post_empty("/api/agents/worker/start", &user).await),
        json!({"status": "started", "agent_id": "worker"})
    );
    assert_eq!(
        status(app.post_empty("/api/agents/worker/stop", &user).await),
        json!({"status": "stopped", "agent_id": "worker"})
    );
    assert_eq!(current().await, "idle");
    assert_eq!(
        status(app.post_empty("/api/agents/worker/stop", &user).await),
        json!({"status": "stopped", "agent_id": "worker"})
    );

    let patched = app.patch("/api/agents/worker", &user, json!({"status": "error"})).await;
    assert_eq!(patched.assert_status(200)["status"], "error");
    app.post_empty("/api/agents/worker/start", &user).await.assert_status(200);
    assert_eq!(current().await, "active", "start clears error");

    assert_eq!(
        app.actions(&user, "worker").await,
        ["agent_started", "status_changed", "agent_stopped", "agent_started", "agent_created"]
    );
}

async fn vacation_toggles_and_restores_the_status_before_it(app: TestApp) {
    let user = app.register("vacation@example.com").await;
    app.create_agent(&user, "rester").await;
    let vacation = |body: Option<serde_json::Value>| async {
        let reply = match body {
            Some(body) => app.post("/api/agents/rester/vacation", &user, body).await,
            None => app.post_empty("/api/agents/rester/vacation", &user).await,
        };
        reply.assert_status(200)["status"].as_str().unwrap().to_owned()
    };
    let current = || async {
        app.get("/api/agents/rester", &user).await.body["status"].as_str().unwrap().to_owned()
    };

    app.post_empty("/api/agents/rester/start", &user).await.assert_status(200);
    assert_eq!(vacation(None).await, "vacation");
    assert_eq!(current().await, "vacation");
    assert_eq!(vacation(None).await, "active", "toggled off restores active");
    assert_eq!(current().await, "active");

    app.post_empty("/api/agents/rester/stop", &user).await.assert_status(200);
    assert_eq!(vacation(None).await, "vacation");
    assert_eq!(vacation(None).await, "idle", "toggled off restores idle");

    assert_eq!(vacation(Some(json!({"enabled": true}))).await, "vacation");
    assert_eq!(
        vacation(Some(json!({"enabled": true}))).await,
        "vacation",
        "enabled: true is idempotent"
    );
    assert_eq!(vacation(Some(json!({"enabled": false}))).await, "idle");
    assert_eq!(
        vacation(Some(json!({"enabled": false}))).await,
        "idle",
        "enabled: false is idempotent"
    );

    app.patch("/api/agents/rester", &user, json!({"status": "error"})).await.assert_status(200);
    assert_eq!(vacation(None).await, "vacation");
    assert_eq!(vacation(None).await, "idle", "an agent in error comes back idle");

    app.post_empty("/api/agents/rester/start", &user).await.assert_status(200);
    app.patch("/api/agents/rester", &user, json!({"status": "vacation"})).await.assert_status(200);
    assert_eq!(vacation(None).await, "active", "vacation set by PATCH remembers the status before");

    let reply = app.post("/api/agents/rester/vacation", &user, json!({"enabled": "yes"})).await;
    reply.assert_error(400, "validation_failed");

    let actions = app.actions(&user, "rester").await;
    assert_eq!(actions.iter().filter(|a| *a == "vacation_started").count(), 4);
    assert_eq!(actions.iter().filter(|a| *a == "vacation_ended").count(), 5);
}

async fn deleting_an_agent_removes_its_tasks_and_activity(app: TestApp) {
    let user = app.register("delete@example.com").await;
    app.create_agent(&user, "doomed").await;
    app.create_agent(&user, "kept").await;
    for i in 0..3 {
        app.add_task(&user, "doomed", &format!("t{i}"), 0).await;
    }
    app.add_task(&user, "kept", "survivor", 0).await;

    let reply = app.delete("/api/agents/doomed", &user).await;
    assert_eq!(reply.assert_status(200), &json!({"deleted": "doomed"}));
    app.get("/api/agents/doomed", &user).await.assert_error(404, "agent_not_found");
    app.delete("/api/agents/doomed", &user).await.assert_error(404, "agent_not_found");

    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents WHERE id = 'doomed'", &[]).await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks WHERE agent_id = 'doomed'", &[]).await, 0);
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM activity WHERE agent_id = 'doomed'", &[]).await,
        0
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks WHERE agent_id = 'kept'", &[]).await, 1);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM activity WHERE agent_id = 'kept'", &[]).await, 2);

    app.create_agent(&user, "doomed").await;
    assert_eq!(
        app.actions(&user, "doomed").await,
        ["agent_created"],
        "a new agent with the old id starts clean"
    );
}
