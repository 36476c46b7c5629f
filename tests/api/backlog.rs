//! The backlog over HTTP: adding, listing, editing, deleting and retrying tasks.

use serde_json::json;

use crate::helpers::{TestApp, backend_tests};

backend_tests! { app;
    adding_a_task_answers_201_with_every_field,
    task_input_is_validated_field_by_field,
    the_task_list_filters_by_status,
    unknown_tasks_and_tasks_of_other_agents_are_not_found,
    only_queued_tasks_can_be_edited,
    tasks_in_progress_cannot_be_deleted_and_others_can,
    only_failed_tasks_can_be_retried_and_come_back_queued,
}

async fn adding_a_task_answers_201_with_every_field(app: TestApp) {
    let user = app.register("tasks@example.com").await;
    app.create_agent(&user, "writer").await;
    let reply = app.post("/api/agents/writer/backlog", &user, json!({"title": "Draft the launch post", "description": "Two paragraphs.", "priority": 3})).await;
    let task = reply.assert_status(201);
    assert!(uuid::Uuid::parse_str(task["id"].as_str().unwrap()).is_ok());
    assert_eq!(task["agent_id"], "writer");
    assert_eq!(task["title"], "Draft the launch post");
    assert_eq!(task["description"], "Two paragraphs.");
    assert_eq!(task["priority"], 3);
    assert_eq!(task["status"], "queued");
    assert_eq!(task["attempts"], 0);
    for field in ["result", "error", "started_at", "completed_at", "usage"] {
        assert_eq!(task[field], json!(null), "{field}");
    }
    assert!(task["created_at"].as_str().unwrap().ends_with('Z'));

    let minimal = app.post("/api/agents/writer/backlog", &user, json!({"title": "Minimal"})).await;
    assert_eq!(minimal.assert_status(201)["priority"], 0);
    assert_eq!(minimal.body["description"], json!(null));

    let fetched = app
        .get(&format!("/api/agents/writer/backlog/{}", task["id"].as_str().unwrap()), &user)
        .await;
    assert_eq!(fetched.assert_status(200), task);
}

async fn task_input_is_validated_field_by_field(app: TestApp) {
    let user = app.register("taskvalid@example.com").await;
    app.create_agent(&user, "writer").await;
    let cases = [
        (json!({}), "title"),
        (json!({"title": ""}), "title"),
        (json!({"title": "t".repeat(201)}), "title"),
        (json!({"title": "ok", "description": "d".repeat(20_001)}), "description"),
        (json!({"title": "ok", "priority": 1.5}), "priority"),
        (json!({"title": "ok", "priority": "high"}), "priority"),
        (json!({"title": "ok", "priority": 3_000_000_000i64}), "priority"),
        (json!({"title": ["ok"]}), "title"),
    ];
    for (body, field) in cases {
        let reply = app.post("/api/agents/writer/backlog", &user, body.clone()).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"][field].is_string(), "{body}: {}", reply.body);
    }
    app.send_raw(
        reqwest::Method::POST,
        "/api/agents/writer/backlog",
        Some(&user.token),
        "{\"title\": ",
    )
    .await
    .assert_error(400, "invalid_json");
    let edge = json!({"title": "t".repeat(200), "description": "d".repeat(20_000), "priority": -5});
    app.post("/api/agents/writer/backlog", &user, edge).await.assert_status(201);
    app.post("/api/agents/nobody/backlog", &user, json!({"title": "x"}))
        .await
        .assert_error(404, "agent_not_found");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks", &[]).await, 1);
}

async fn the_task_list_filters_by_status(app: TestApp) {
    let user = app.register("tasklist@example.com").await;
    app.create_agent(&user, "writer").await;
    let first = app.add_task(&user, "writer", "first", 0).await;
    let second = app.add_task(&user, "writer", "second", 0).await;
    app.add_task(&user, "writer", "third", 9).await;
    app.force_task_status(second["id"].as_str().unwrap(), "complete").await;

    let titles = |reply: crate::helpers::Reply| -> Vec<String> {
        reply.assert_status(200)["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        titles(app.get("/api/agents/writer/backlog", &user).await),
        ["first", "second", "third"]
    );
    assert_eq!(
        titles(app.get("/api/agents/writer/backlog?status=queued", &user).await),
        ["first", "third"]
    );
    assert_eq!(
        titles(app.get("/api/agents/writer/backlog?status=complete", &user).await),
        ["second"]
    );
    assert!(titles(app.get("/api/agents/writer/backlog?status=failed", &user).await).is_empty());
    app.get("/api/agents/writer/backlog?status=done", &user)
        .await
        .assert_error(400, "validation_failed");
    let _ = first;
}

async fn unknown_tasks_and_tasks_of_other_agents_are_not_found(app: TestApp) {
    let user = app.register("tasknf@example.com").await;
    app.create_agent(&user, "one").await;
    app.create_agent(&user, "two").await;
    let task = app.add_task(&user, "one", "belongs to one", 0).await;
    let id = task["id"].as_str().unwrap();
    app.get(&format!("/api/agents/two/backlog/{id}"), &user)
        .await
        .assert_error(404, "task_not_found");
    app.patch(&format!("/api/agents/two/backlog/{id}"), &user, json!({"title": "x"}))
        .await
        .assert_error(404, "task_not_found");
    app.delete(&format!("/api/agents/two/backlog/{id}"), &user)
        .await
        .assert_error(404, "task_not_found");
    app.post_empty(&format!("/api/agents/two/backlog/{id}/retry"), &user)
        .await
        .assert_error(404, "task_not_found");
    app.get("/api/agents/one/backlog/no-such-task", &user)
        .await
        .assert_error(404, "task_not_found");
    app.get(&format!("/api/agents/one/backlog/{}", uuid::Uuid::now_v7()), &user)
        .await
        .assert_error(404, "task_not_found");
}

async fn only_queued_tasks_can_be_edited(app: TestApp) {
    let user = app.register("taskedit@example.com").await;
    app.create_agent(&user, "writer").await;
    let task = app.add_task(&user, "writer", "draft", 0).await;
    let path = format!("/api/agents/writer/backlog/{}", task["id"].as_str().unwrap());

    let edited = app
        .patch(
            &path,
            &user,
            json!({"title": "final draft", "priority": 7, "description": "Longer."}),
        )
        .await;
    let edited = edited.assert_status(200);
    assert_eq!(
        (&edited["title"], &edited["priority"], &edited["description"]),
        (&json!("final draft"), &json!(7), &json!("Longer."))
    );
    let cleared = app.patch(&path, &user, json!({"description": null})).await;
    assert_eq!(cleared.assert_status(200)["description"], json!(null));
    assert_eq!(cleared.body["title"], "final draft");
    app.patch(&path, &user, json!({"title": ""})).await.assert_error(400, "validation_failed");

    for status in ["in_progress", "complete", "failed"] {
        app.force_task_status(task["id"].as_str().unwrap(), status).await;
        let reply = app.patch(&path, &user, json!({"title": "too late"})).await;
        reply.assert_error(409, "task_not_editable");
    }
    assert_eq!(app.get(&path, &user).await.body["title"], "final draft");
}

async fn tasks_in_progress_cannot_be_deleted_and_others_can(app: TestApp) {
    let user = app.register("taskdel@example.com").await;
    app.create_agent(&user, "writer").await;
    let running = app.add_task(&user, "writer", "running", 0).await;
    let done = app.add_task(&user, "writer", "done", 0).await;
    let queued = app.add_task(&user, "writer", "queued", 0).await;
    let id = |task: &serde_json::Value| task["id"].as_str().unwrap().to_owned();
    app.force_task_status(&id(&running), "in_progress").await;
    app.force_task_status(&id(&done), "complete").await;

    app.delete(&format!("/api/agents/writer/backlog/{}", id(&running)), &user)
        .await
        .assert_error(409, "task_not_editable");
    for task in [&done, &queued] {
        let reply = app.delete(&format!("/api/agents/writer/backlog/{}", id(task)), &user).await;
        assert_eq!(reply.assert_status(200), &json!({"deleted": id(task)}));
        app.get(&format!("/api/agents/writer/backlog/{}", id(task)), &user)
            .await
            .assert_error(404, "task_not_found");
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks", &[]).await, 1);
}

async fn only_failed_tasks_can_be_retried_and_come_back_queued(app: TestApp) {
    let user = app.register("taskretry@example.com").await;
    app.create_agent(&user, "writer").await;
    let task = app.add_task(&user, "writer", "flaky", 0).await;
    let id = task["id"].as_str().unwrap();
    let path = format!("/api/agents/writer/backlog/{id}/retry");

    app.post_empty(&path, &user).await.assert_error(409, "task_not_editable");
    app.db.execute("UPDATE tasks SET error = 'model timed out' WHERE id = $1", &[id]).await;
    app.force_task_status(id, "failed").await;
    let before = app.get(&format!("/api/agents/writer/backlog/{id}"), &user).await;
    assert_eq!((&before.body["status"], &before.body["attempts"]), (&json!("failed"), &json!(1)));

    let retried = app.post_empty(&path, &user).await;
    let retried = retried.assert_status(200);
    assert_eq!(retried["status"], "queued");
    assert_eq!(retried["attempts"], 0);
    assert_eq!(retried["error"], json!(null));
    assert_eq!(retried["completed_at"], json!(null));
    app.post_empty(&path, &user).await.assert_error(409, "task_not_editable");
    app.force_task_status(id, "complete").await;
    app.post_empty(&path, &user).await.assert_error(409, "task_not_editable");
}
