//! Plans: the agent limit of each plan, enforced where agents are created, and
//! `GET /api/billing`.

use serde_json::json;

use crate::helpers::backend_tests;

backend_tests! { app;

async fn a_new_user_is_on_free_and_its_fourth_agent_is_refused(app) {
    let user = app.register("free@example.com").await;
    let billing = app.get("/api/billing", &user).await.assert_status(200).clone();
    assert_eq!(billing, json!({"plan": "free", "agent_limit": 3, "agents_used": 0, "subscription_status": null}));
    for id in ["one", "two", "three"] {
        app.create_agent(&user, id).await;
    }
    let body = json!({"id": "four", "name": "Four", "role_prompt": "Work.", "channel": "c"});
    let refused = app.post("/api/agents", &user, body.clone()).await;
    refused.assert_error(402, "plan_limit_reached");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("free") && message.contains('3'), "{message}");
    app.get("/api/agents/four", &user).await.assert_error(404, "agent_not_found");
    assert_eq!(app.get("/api/billing", &user).await.assert_status(200)["agents_used"], 3);

    // Deleting one makes room again; other users have their own allowance.
    app.delete("/api/agents/one", &user).await.assert_status(200);
    app.post("/api/agents", &user, body.clone()).await.assert_status(201);
    let other = app.register("other@example.com").await;
    app.post("/api/agents", &other, body).await.assert_status(201);
    app.request(reqwest::Method::GET, "/api/billing", None, None).await.assert_error(401, "unauthorized");
}

async fn twenty_concurrent_creations_on_free_create_exactly_three(app) {
    let user = app.register("race@example.com").await;
    let creations = (0..20).map(|n| {
        let body = json!({"id": format!("agent-{n}"), "name": "Racer", "role_prompt": "Race.", "channel": "c"});
        let (app, user) = (&app, &user);
        async move { app.post("/api/agents", user, body).await }
    });
    let replies = futures::future::join_all(creations).await;
    let created = replies.iter().filter(|r| r.status.as_u16() == 201).count();
    let refused = replies.iter().filter(|r| r.status.as_u16() == 402).count();
    assert_eq!((created, refused), (3, 17));
    let list = app.get("/api/agents", &user).await.assert_status(200).clone();
    assert_eq!(list["agents"].as_array().unwrap().len(), 3);
}

}
