//! A task's "Working on" post and its Cancel button: posted once when the task first starts
//! (not again when its run resumes), a click by a member allowed to change things cancels the
//! task and stops its run, anyone else is refused, and a click after the end says how it ended.

use std::time::Duration;

use serde_json::{Value, json};

use super::{CHANNEL, WAIT, command, connect, connected};
use crate::fake_discord::{Member, Posted, button};
use crate::fake_models::Script;
use crate::helpers::{TestApp, TestDb, User, app_with, backend_tests, eventually};

backend_tests! { app;
    a_click_after_the_task_completed_answers_that_it_is_complete,
}

backend_tests! { db;
    a_click_by_an_allowed_member_cancels_the_running_task_and_its_run_stops,
    a_run_resumed_after_a_restart_does_not_post_working_on_again,
}

const MODEL: &str = "patient";

async fn task(app: &TestApp, user: &User, id: &str) -> Value {
    let reply = app.get(&format!("/api/agents/ops/backlog/{id}"), user).await;
    reply.assert_status(200).clone()
}

async fn status(app: &TestApp, user: &User, id: &str) -> String {
    task(app, user, id).await["status"].as_str().unwrap().to_owned()
}

/// Model calls made for [`MODEL`].
fn calls(app: &TestApp) -> usize {
    app.options.models.calls().into_iter().filter(|c| c.body["model"] == MODEL).count()
}

fn is_working_on(message: &Posted, title: &str) -> bool {
    message.body["embeds"][0]["title"] == format!("Working on: {title}").as_str()
}

/// The "Working on" posts for `title` in the channel.
fn working_on(app: &TestApp, title: &str) -> Vec<Posted> {
    app.discord.messages_in(CHANNEL).into_iter().filter(|m| is_working_on(m, title)).collect()
}

/// The task's "Working on" post, once the outbox delivered it.
async fn posted_working_on(app: &TestApp, title: &str) -> Posted {
    eventually(WAIT, "the Working on post", || async { !working_on(app, title).is_empty() }).await;
    working_on(app, title).remove(0)
}

/// The Cancel click on the task's post.
fn cancel_click(task: &str, message: &Posted) -> Value {
    button(&format!("task:cancel:{task}"), &message.id)
}

async fn a_click_by_an_allowed_member_cancels_the_running_task_and_its_run_stops(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let user = app.register("cancel-click@example.com").await;
    let path = connect(&app, &user, "ops", &format!("openai:{MODEL}")).await;
    app.options.models.script_for(
        MODEL,
        [Script::Hang(Duration::from_secs(120)), Script::Answer("The next one is done.".into())],
    );
    let added = app.add_task(&user, "ops", "Rotate the keys", 0).await;
    let id = added["id"].as_str().unwrap().to_owned();
    app.post_empty("/api/agents/ops/start", &user).await.assert_status(200);
    let message = posted_working_on(&app, "Rotate the keys").await;
    assert_eq!(
        message.body["components"],
        json!([{"type": 1, "components": [{"type": 2, "style": 4, "label": "Cancel",
            "custom_id": format!("task:cancel:{id}")}]}])
    );
    eventually(WAIT, "the model call is in flight", || async { calls(&app) == 1 }).await;

    // A member without Manage Server or an allowed role: refused, nothing cancelled.
    let refused =
        command(&app, &path, &Member::plain("gus", &[]), cancel_click(&id, &message)).await;
    assert_eq!((refused["type"].as_i64(), refused["data"]["flags"].as_i64()), (Some(4), Some(64)));
    assert!(refused["data"]["content"].as_str().unwrap().contains("Manage Server"), "{refused}");
    assert_eq!(status(&app, &user, &id).await, "in_progress");

    let clicked = command(&app, &path, &Member::manager("ivy"), cancel_click(&id, &message)).await;
    assert_eq!(clicked["type"], 7, "the clicked post is updated: {clicked}");
    assert_eq!(clicked["data"]["components"], json!([]), "without its button");
    let embed = &clicked["data"]["embeds"][0];
    assert_eq!(embed["title"], "Cancelled: Rotate the keys");
    assert_eq!(embed["description"], "Cancelled by ivy.");
    let cancelled = task(&app, &user, &id).await;
    assert_eq!(
        (&cancelled["status"], &cancelled["cancelled_by"]),
        (&json!("cancelled"), &json!("discord:ivy"))
    );

    // The run stopped: the agent goes on with its next task at once (its worker is not held by
    // the dropped call), and the cancelled run made no call after the one in flight.
    let next = app.add_task(&user, "ops", "Next", 0).await;
    let next = next["id"].as_str().unwrap().to_owned();
    eventually(WAIT, "the next task completes", || async {
        status(&app, &user, &next).await == "complete"
    })
    .await;
    assert_eq!(calls(&app), 2, "one more call, the next task's");
    assert_eq!(status(&app, &user, &id).await, "cancelled");
    let activity = app.get("/api/agents/ops/activity", &user).await;
    let entries = activity.body["entries"].as_array().unwrap().clone();
    let entry = entries.iter().find(|e| e["action"] == "task_cancelled").unwrap();
    assert!(entry["details"].as_str().unwrap().contains("discord:ivy"), "{entry}");

    // Another click on the old post (its button still shows elsewhere): how the task ended.
    let late = command(&app, &path, &Member::manager("jo"), cancel_click(&id, &message)).await;
    assert_eq!((late["type"].as_i64(), late["data"]["flags"].as_i64()), (Some(4), Some(64)));
    let said = late["data"]["content"].as_str().unwrap();
    assert_eq!(said, "\"Rotate the keys\" was cancelled already, by ivy (Discord).");
}

async fn a_click_after_the_task_completed_answers_that_it_is_complete(app: TestApp) {
    let (user, path) = connected(&app, "late-click@example.com", "ops", "echo").await;
    let added = app.add_task(&user, "ops", "Quick one", 0).await;
    let id = added["id"].as_str().unwrap().to_owned();
    app.post_empty("/api/agents/ops/start", &user).await.assert_status(200);
    eventually(WAIT, "the task completes", || async {
        status(&app, &user, &id).await == "complete"
    })
    .await;
    let message = posted_working_on(&app, "Quick one").await;
    // The result follows the "Working on" post in the channel.
    eventually(WAIT, "the result is posted", || async {
        app.discord.messages_in(CHANNEL).iter().any(|m| m.body["embeds"][0]["title"] == "Quick one")
    })
    .await;
    let titles: Vec<String> = app
        .discord
        .messages_in(CHANNEL)
        .iter()
        .filter_map(|m| m.body["embeds"][0]["title"].as_str().map(str::to_owned))
        .filter(|t| t.contains("Quick one"))
        .collect();
    assert_eq!(titles, ["Working on: Quick one", "Quick one"]);

    let late = command(&app, &path, &Member::manager("kim"), cancel_click(&id, &message)).await;
    assert_eq!((late["type"].as_i64(), late["data"]["flags"].as_i64()), (Some(4), Some(64)));
    let said = late["data"]["content"].as_str().unwrap();
    assert_eq!(said, "\"Quick one\" is complete already: there is nothing to cancel.");
    let done = task(&app, &user, &id).await;
    assert_eq!(done["status"], "complete");
    assert!(done.get("cancelled_by").is_none(), "{done}");
    let unknown =
        command(&app, &path, &Member::manager("kim"), button("task:cancel:nope", "1")).await;
    assert!(unknown["data"]["content"].as_str().unwrap().contains("not known"), "{unknown}");
}

async fn a_run_resumed_after_a_restart_does_not_post_working_on_again(db: TestDb) {
    let app = app_with(db, |o| o.runtime.shutdown_grace = Duration::from_millis(100)).await;
    let user = app.register("resumed@example.com").await;
    connect(&app, &user, "ops", &format!("openai:{MODEL}")).await;
    app.options.models.script_for(
        MODEL,
        [Script::Hang(Duration::from_secs(120)), Script::Answer("Done after the restart.".into())],
    );
    let added = app.add_task(&user, "ops", "Survive a restart", 0).await;
    let id = added["id"].as_str().unwrap().to_owned();
    app.post_empty("/api/agents/ops/start", &user).await.assert_status(200);
    posted_working_on(&app, "Survive a restart").await;
    eventually(WAIT, "the model call is in flight", || async { calls(&app) == 1 }).await;

    // The stop cuts the run off; the restarted server claims the task again and finishes it.
    let (db, options) = app.stop().await;
    let app = TestApp::start(db, options).await;
    eventually(WAIT, "the task completes after the restart", || async {
        status(&app, &user, &id).await == "complete"
    })
    .await;
    assert_eq!(task(&app, &user, &id).await["attempts"], 2, "claimed twice");
    eventually(WAIT, "the result is posted", || async {
        app.discord
            .messages_in(CHANNEL)
            .iter()
            .any(|m| m.body["embeds"][0]["description"] == "Done after the restart.")
    })
    .await;
    assert_eq!(working_on(&app, "Survive a restart").len(), 1, "posted at the first start only");
}
