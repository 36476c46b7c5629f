//! `/api/triggers`: what a trigger shows (its secret once, its URL), the list and its filter,
//! changes, deletion (its URL then answers 404), bad input named by field with nothing stored,
//! and roles: a viewer reads but cannot create, another workspace's trigger is not found.

use reqwest::Method;
use serde_json::json;

use super::{call, create, signed};
use crate::helpers::{TestApp, backend_tests};
use crate::teams::{in_ws, join, team};

backend_tests! { app;
    a_trigger_shows_its_secret_once_and_is_listed_changed_and_deleted,
    bad_input_is_400_naming_the_field_and_stores_nothing,
    a_viewer_cannot_create_a_trigger_and_another_workspace_does_not_see_it,
}

async fn a_trigger_shows_its_secret_once_and_is_listed_changed_and_deleted(app: TestApp) {
    let user = app.register("manage@example.com").await;
    app.create_agent(&user, "alpha").await;
    app.create_agent(&user, "beta").await;
    let body = json!({"name": "CI", "title": "Build {{build.id}} failed", "priority": 3});
    let created = create(&app, &user, "alpha", body).await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(created["secret"].as_str().unwrap().starts_with("whsec_"), "{created}");
    assert_eq!(created["url"], format!("https://agents.example/hooks/{id}"));
    assert_eq!(
        (&created["agent"], &created["name"], &created["priority"], &created["enabled"]),
        (&json!("alpha"), &json!("CI"), &json!(3), &json!(true))
    );
    assert_eq!((&created["calls"], &created["last_called_at"]), (&json!(0), &json!(null)));
    let other = create(&app, &user, "beta", json!({})).await;

    let path = format!("/api/triggers/{id}");
    let shown = app.get(&path, &user).await.assert_status(200).clone();
    assert!(shown.get("secret").is_none(), "the secret is shown only once: {shown}");
    let mut without_secret = created.clone();
    without_secret.as_object_mut().unwrap().remove("secret");
    assert_eq!(shown, without_secret);
    let mut other = other;
    other.as_object_mut().unwrap().remove("secret");
    let all = app.get("/api/triggers", &user).await.assert_status(200)["triggers"].clone();
    assert_eq!(all, json!([shown.clone(), other]));
    let of_alpha = app.get("/api/triggers?agent=alpha", &user).await;
    assert_eq!(of_alpha.assert_status(200)["triggers"], json!([shown]));
    app.get("/api/triggers?agent=nobody", &user).await.assert_error(404, "agent_not_found");

    let changed = app
        .patch(
            &path,
            &user,
            json!({"title": "Build {{build.id}}", "enabled": false, "description": "{{log}}"}),
        )
        .await;
    let changed = changed.assert_status(200).clone();
    assert_eq!(
        (&changed["title"], &changed["enabled"], &changed["description"]),
        (&json!("Build {{build.id}}"), &json!(false), &json!("{{log}}"))
    );
    let cleared = app.patch(&path, &user, json!({"description": null})).await;
    assert!(cleared.assert_status(200)["description"].is_null());

    app.delete(&path, &user).await.assert_status(200);
    app.get(&path, &user).await.assert_error(404, "trigger_not_found");
    app.delete(&path, &user).await.assert_error(404, "trigger_not_found");
    let secret = created["secret"].as_str().unwrap();
    call(&app, &id, &signed(secret, "msg_1", super::now(), "{}"), "{}")
        .await
        .assert_error(404, "trigger_not_found");
    // Deleting the agent deletes its triggers.
    app.delete("/api/agents/beta", &user).await.assert_status(200);
    let all = app.get("/api/triggers", &user).await;
    assert_eq!(all.assert_status(200)["triggers"], json!([]));
}

async fn bad_input_is_400_naming_the_field_and_stores_nothing(app: TestApp) {
    let user = app.register("bad@example.com").await;
    app.create_agent(&user, "alpha").await;
    let cases = [
        (json!({"title": "t"}), "agent"),
        (json!({"agent": "alpha"}), "title"),
        (json!({"agent": "alpha", "title": "Alert {{name"}), "title"),
        (json!({"agent": "alpha", "title": "two\nlines"}), "title"),
        (json!({"agent": "alpha", "title": "t".repeat(201)}), "title"),
        (json!({"agent": "alpha", "title": "t", "description": "{{ }}"}), "description"),
        (json!({"agent": "alpha", "title": "t", "description": "{{a b}}"}), "description"),
        (json!({"agent": "alpha", "title": "t", "name": "n".repeat(101)}), "name"),
        (json!({"agent": "alpha", "title": "t", "priority": 1_i64 << 40}), "priority"),
        (json!({"agent": "alpha", "title": "{{a}}".repeat(33)}), "title"),
    ];
    for (body, field) in cases {
        let reply = app.post("/api/triggers", &user, body.clone()).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"][field].is_string(), "{body}: {}", reply.body);
    }
    let unknown = app.post("/api/triggers", &user, json!({"agent": "nobody", "title": "t"})).await;
    unknown.assert_error(404, "agent_not_found");
    let trigger = create(&app, &user, "alpha", json!({})).await;
    let path = format!("/api/triggers/{}", trigger["id"].as_str().unwrap());
    let reply = app.patch(&path, &user, json!({"title": "{{", "priority": "high"})).await;
    reply.assert_error(400, "validation_failed");
    let reply = app.patch(&path, &user, json!({"title": "{{"})).await;
    reply.assert_error(400, "validation_failed");
    assert!(reply.body["error"]["details"]["title"].is_string());
    let listed = app.get("/api/triggers", &user).await;
    assert_eq!(listed.assert_status(200)["triggers"].as_array().unwrap().len(), 1);
    assert_eq!(app.get(&path, &user).await.assert_status(200)["title"], "Call");
}

async fn a_viewer_cannot_create_a_trigger_and_another_workspace_does_not_see_it(app: TestApp) {
    let ada = app.register("ada@example.com").await;
    let ops = team(&app, &ada, "Ops").await;
    let agent = json!({"id": "alpha", "name": "Alpha", "role_prompt": "Help.", "channel": "ops"});
    in_ws(&app, &ops, &ada, Method::POST, "/api/agents", Some(agent)).await.assert_status(201);
    let body = json!({"agent": "alpha", "title": "Alert"});
    let created = in_ws(&app, &ops, &ada, Method::POST, "/api/triggers", Some(body.clone())).await;
    let id = created.assert_status(201)["id"].as_str().unwrap().to_owned();
    let path = format!("/api/triggers/{id}");

    let viewer = app.register("viewer@example.com").await;
    join(&app, &ops, &ada, &viewer, "viewer").await;
    in_ws(&app, &ops, &viewer, Method::POST, "/api/triggers", Some(body))
        .await
        .assert_error(403, "forbidden");
    in_ws(&app, &ops, &viewer, Method::POST, &format!("{path}/rotate"), None)
        .await
        .assert_error(403, "forbidden");
    let seen = in_ws(&app, &ops, &viewer, Method::GET, &path, None).await;
    assert_eq!(seen.assert_status(200)["id"], id.as_str());
    let listed = in_ws(&app, &ops, &viewer, Method::GET, "/api/triggers", None).await;
    assert_eq!(listed.assert_status(200)["triggers"].as_array().unwrap().len(), 1);

    // Ada's personal workspace, and another person's, do not see Ops' trigger.
    app.get(&path, &ada).await.assert_error(404, "trigger_not_found");
    let bob = app.register("bob@example.com").await;
    app.get(&path, &bob).await.assert_error(404, "trigger_not_found");
    app.patch(&path, &bob, json!({"enabled": false})).await.assert_error(404, "trigger_not_found");
    app.delete(&path, &bob).await.assert_error(404, "trigger_not_found");
    app.post_empty(&format!("{path}/rotate"), &bob).await.assert_error(404, "trigger_not_found");
    let listed = app.get("/api/triggers", &bob).await;
    assert_eq!(listed.assert_status(200)["triggers"], json!([]));
    let still = in_ws(&app, &ops, &ada, Method::GET, &path, None).await;
    assert_eq!(still.assert_status(200)["enabled"], true, "unchanged");
}
