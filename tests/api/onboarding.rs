//! Onboarding: the templates, and a ready agent with its sample task from each.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::helpers::{TestApp, backend_tests, eventually};

const TEMPLATES: [&str; 5] = ["marketing", "support", "engineering", "operations", "sales"];

backend_tests! { app;
    the_templates_are_public_and_complete,
    each_template_creates_its_agent_and_queued_task,
    taken_ids_are_numbered,
    bad_setups_are_refused_and_create_nothing,
    the_plan_limit_applies,
}

async fn the_templates_are_public_and_complete(app: TestApp) {
    let reply = app.request(Method::GET, "/api/onboarding/templates", None, None).await;
    let templates = reply.assert_status(200)["templates"].as_array().unwrap().clone();
    let ids: Vec<&str> = templates.iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, TEMPLATES);
    for template in &templates {
        for field in ["name", "description", "role_prompt", "channel"] {
            assert!(
                template[field].as_str().is_some_and(|v| !v.is_empty()),
                "{field} of {template}"
            );
        }
        let prompt = template["role_prompt"].as_str().unwrap();
        assert!(
            prompt.contains("{company}") && prompt.len() > 400,
            "a real prompt naming the company: {prompt}"
        );
        assert!(template["sample_task"]["title"].as_str().is_some_and(|v| !v.is_empty()));
        assert!(template["sample_task"]["description"].as_str().is_some_and(|v| !v.is_empty()));
    }
}

async fn each_template_creates_its_agent_and_queued_task(app: TestApp) {
    let user = app.register("onboard@example.com").await;
    app.db.execute("UPDATE workspaces SET plan = 'team' WHERE id = $1", &[&user.id]).await;
    let listed = app
        .request(Method::GET, "/api/onboarding/templates", None, None)
        .await
        .assert_status(200)
        .clone();
    for template in listed["templates"].as_array().unwrap() {
        let id = template["id"].as_str().unwrap();
        let reply = app
            .post(
                "/api/onboarding/setup",
                &user,
                json!({"company_name": "Acme Robotics", "role_template": id}),
            )
            .await;
        let body = reply.assert_status(201).clone();
        let agent_id = format!("{id}-lead");
        assert_eq!(body["agent"]["id"], agent_id.as_str());
        assert_eq!(body["agent"]["name"], template["name"]);
        assert_eq!(body["agent"]["status"], "idle");
        assert_eq!(body["agent"]["channel"], template["channel"]);
        assert!(body["agent"]["created_at"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert_eq!(body["task"]["agent_id"], agent_id.as_str());
        assert_eq!(body["task"]["status"], "queued");
        assert_eq!(body["task"]["title"], template["sample_task"]["title"]);
        assert_eq!(body["task"]["description"], template["sample_task"]["description"]);

        let detail =
            app.get(&format!("/api/agents/{agent_id}"), &user).await.assert_status(200).clone();
        let prompt = detail["role_prompt"].as_str().unwrap();
        assert!(prompt.contains("Acme Robotics") && !prompt.contains("{company}"), "{prompt}");
        assert_eq!(detail["backlog"].as_array().unwrap().len(), 1);
        assert_eq!(detail["backlog"][0]["id"], body["task"]["id"]);
        let activity = app
            .get(&format!("/api/agents/{agent_id}/activity"), &user)
            .await
            .assert_status(200)
            .clone();
        let actions: Vec<&str> = activity["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["action"].as_str().unwrap())
            .collect();
        assert_eq!(actions, ["task_added", "agent_created"]);
    }

    // The agent is ready: started, it runs its sample task.
    app.post_empty("/api/agents/sales-lead/start", &user).await.assert_status(200);
    eventually(Duration::from_secs(10), "the sample task completes", || async {
        let detail = app.get("/api/agents/sales-lead", &user).await.assert_status(200).clone();
        detail["backlog"][0]["status"] == "complete"
    })
    .await;
}

async fn taken_ids_are_numbered(app: TestApp) {
    let user = app.register("numbers@example.com").await;
    app.db.execute("UPDATE workspaces SET plan = 'starter' WHERE id = $1", &[&user.id]).await;
    let setup = |template: &'static str| {
        let (app, user) = (&app, &user);
        async move {
            let body = json!({"company_name": "Globex", "role_template": template});
            let reply = app.post("/api/onboarding/setup", user, body).await;
            reply.assert_status(201)["agent"]["id"].as_str().unwrap().to_owned()
        }
    };
    assert_eq!(setup("marketing").await, "marketing-lead");
    assert_eq!(setup("marketing").await, "marketing-lead-2");
    assert_eq!(setup("marketing").await, "marketing-lead-3");
    app.delete("/api/agents/marketing-lead-2", &user).await.assert_status(200);
    assert_eq!(setup("marketing").await, "marketing-lead-2", "the first free number");
    // An agent the user made by hand with the template's id counts as taken.
    app.create_agent(&user, "support-lead").await;
    assert_eq!(setup("support").await, "support-lead-2");
    // Ids are per user.
    let other = app.register("numbers2@example.com").await;
    let reply = app
        .post(
            "/api/onboarding/setup",
            &other,
            json!({"company_name": "Initech", "role_template": "marketing"}),
        )
        .await;
    assert_eq!(reply.assert_status(201)["agent"]["id"], "marketing-lead");
}

async fn bad_setups_are_refused_and_create_nothing(app: TestApp) {
    let user = app.register("bad-setup@example.com").await;
    let reply = app
        .post(
            "/api/onboarding/setup",
            &user,
            json!({"company_name": "Acme", "role_template": "legal"}),
        )
        .await;
    reply.assert_error(404, "template_not_found");
    let reply = app
        .post("/api/onboarding/setup", &user, json!({"company_name": "", "role_template": "sales"}))
        .await;
    reply.assert_error(400, "validation_failed");
    assert!(reply.body["error"]["details"]["company_name"].is_string());
    let long = "x".repeat(101);
    app.post(
        "/api/onboarding/setup",
        &user,
        json!({"company_name": long, "role_template": "sales"}),
    )
    .await
    .assert_error(400, "validation_failed");
    let reply = app.post("/api/onboarding/setup", &user, json!({"company_name": "Acme"})).await;
    assert_eq!(reply.body["error"]["details"]["role_template"], "is required");
    let reply = app
        .post_anonymous(
            "/api/onboarding/setup",
            json!({"company_name": "Acme", "role_template": "sales"}),
        )
        .await;
    reply.assert_error(401, "unauthorized");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents", &[]).await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks", &[]).await, 0);
}

async fn the_plan_limit_applies(app: TestApp) {
    let user = app.register("limited@example.com").await;
    for template in ["marketing", "support", "sales"] {
        app.post(
            "/api/onboarding/setup",
            &user,
            json!({"company_name": "Acme", "role_template": template}),
        )
        .await
        .assert_status(201);
    }
    let reply = app
        .post(
            "/api/onboarding/setup",
            &user,
            json!({"company_name": "Acme", "role_template": "engineering"}),
        )
        .await;
    reply.assert_error(402, "plan_limit_reached");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents", &[]).await, 3);
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM tasks", &[]).await,
        3,
        "no task without its agent"
    );
}
