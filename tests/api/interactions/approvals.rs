//! Tool approvals: a call named in `approval_tools` stops the run, the task waits in
//! `awaiting_approval` with a message carrying Approve and Deny buttons; a click, the API or
//! the timeout decides, and the run goes on from that call, once.

use std::time::Duration;

use serde_json::{Value, json};

use super::{CHANNEL, WAIT, command, path_of};
use crate::fake_discord::{Member, Posted, button};
use crate::fake_models::{Call, Script};
use crate::helpers::{TestApp, TestDb, User, app_with, backend_tests, eventually};
use crate::runtime::fetch::{PageServer, page_server};

backend_tests! { db;
    approve_resumes_the_run_and_the_fetch_happens_once,
    deny_reaches_the_model_as_a_tool_error_and_the_message_says_who,
    a_decision_while_the_request_is_being_sent_edits_it_once_delivered,
    a_decision_before_a_timed_out_request_is_sent_again_edits_the_first_message,
    a_restart_while_waiting_loses_nothing,
    an_unanswered_call_is_denied_at_the_timeout,
}

const MODEL: &str = "guarded";

/// An agent allowed `http_fetch` only with approval, scripted to fetch the page and answer
/// with what it read; started, with one task. Returns the user, the task's id and the page.
async fn waiting_fetch(app: &TestApp, email: &str) -> (User, String, PageServer) {
    let user = app.register(email).await;
    let (task, page) = waiting_fetch_for(app, &user).await;
    (user, task, page)
}

/// [`waiting_fetch`] for an existing user: the task's id and the page.
pub(crate) async fn waiting_fetch_for(app: &TestApp, user: &User) -> (String, PageServer) {
    let user = user.clone();
    let page = page_server("<p>All systems go.</p>").await;
    super::connect(app, &user, "ops", &format!("openai:{MODEL}")).await;
    let settings = json!({"tools": ["http_fetch"], "approval_tools": ["http_fetch"]});
    let agent = app.patch("/api/agents/ops", &user, settings).await;
    assert_eq!(agent.assert_status(200)["approval_tools"], json!(["http_fetch"]));
    let url = format!("http://{}/status", page.address);
    app.options.models.script_for(
        MODEL,
        [
            Script::Call { name: "http_fetch".into(), arguments: json!({"url": url}) },
            Script::AnswerFromToolResult,
        ],
    );
    let task = app.add_task(&user, "ops", "Check the status page", 0).await;
    app.post_empty("/api/agents/ops/start", &user).await.assert_status(200);
    let id = task["id"].as_str().unwrap().to_owned();
    eventually(WAIT, "the task waits for approval", || async {
        status(app, &user, &id).await == "awaiting_approval"
    })
    .await;
    (id, page)
}

async fn status(app: &TestApp, user: &User, task: &str) -> String {
    let reply = app.get(&format!("/api/agents/ops/backlog/{task}"), user).await;
    reply.assert_status(200)["status"].as_str().unwrap().to_owned()
}

async fn finished(app: &TestApp, user: &User, task: &str) -> Value {
    eventually(WAIT, "the task finishes", || async {
        matches!(status(app, user, task).await.as_str(), "complete" | "failed")
    })
    .await;
    app.get(&format!("/api/agents/ops/backlog/{task}"), user).await.body
}

fn calls(app: &TestApp) -> Vec<Call> {
    app.options.models.calls().into_iter().filter(|c| c.body["model"] == MODEL).collect()
}

/// Whether `message` asks for an approval (the task's "Working on" post has a button too).
fn asks_approval(message: &Posted) -> bool {
    message.body["embeds"][0]["title"].as_str().is_some_and(|t| t.starts_with("Approval needed"))
}

/// The approval's message in the channel, once the outbox delivered it.
async fn approval_message(app: &TestApp) -> Posted {
    eventually(WAIT, "the approval's message is posted", || async {
        app.discord.messages_in(CHANNEL).iter().any(asks_approval)
    })
    .await;
    app.discord.messages_in(CHANNEL).into_iter().find(asks_approval).unwrap()
}

/// Waits for the task's result in the channel: every post queued before it arrived too.
async fn result_posted(app: &TestApp) {
    eventually(WAIT, "the result is posted", || async {
        let posted = app.discord.messages_in(CHANNEL);
        posted.iter().any(|m| m.body["embeds"][0]["title"] == "Check the status page")
    })
    .await;
}

/// How many "Working on" posts the channel got.
fn working_on_posts(app: &TestApp) -> usize {
    let title = "Working on: Check the status page";
    app.discord
        .messages_in(CHANNEL)
        .iter()
        .filter(|m| m.body["embeds"][0]["title"] == title)
        .count()
}

/// The `custom_id` of the message's button labelled `label`.
fn button_id(message: &Posted, label: &str) -> String {
    let buttons = message.body["components"][0]["components"].as_array().unwrap();
    let found = buttons.iter().find(|b| b["label"] == label).unwrap();
    found["custom_id"].as_str().unwrap().to_owned()
}

async fn actions(app: &TestApp, user: &User) -> Vec<String> {
    app.actions(user, "ops").await
}

async fn approve_resumes_the_run_and_the_fetch_happens_once(db: TestDb) {
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let (user, task, page) = waiting_fetch(&app, "approve@example.com").await;
    let message = approval_message(&app).await;
    let embed = &message.body["embeds"][0];
    assert!(embed["title"].as_str().unwrap().contains("http_fetch"), "{embed}");
    assert!(embed["description"].as_str().unwrap().contains(&page.address), "the arguments shown");
    assert_eq!((calls(&app).len(), page.hits()), (1, 0), "nothing more until the approval");

    let plain = Member::plain("gus", &[]);
    let approve = button(&button_id(&message, "Approve"), &message.id);
    let refused = command(&app, &path_of(&app, &user).await, &plain, approve.clone()).await;
    assert_eq!(refused["data"]["flags"], 64, "{refused}");
    assert_eq!(status(&app, &user, &task).await, "awaiting_approval");

    let path = path_of(&app, &user).await;
    let clicked = command(&app, &path, &Member::manager("hal"), approve).await;
    assert_eq!(clicked["type"], 7, "the clicked message is updated: {clicked}");
    assert_eq!(clicked["data"]["components"], json!([]));
    let title = clicked["data"]["embeds"][0]["title"].as_str().unwrap();
    assert!(title.contains("Approved by hal (Discord)"), "{title}");
    // The audit log names the Discord member who decided.
    let audit = app.get("/api/audit?action=approval.approved", &user).await;
    let entry = &audit.assert_status(200)["entries"][0];
    assert_eq!(entry["actor_kind"], "discord", "{entry}");
    assert!(entry["actor_label"].as_str().unwrap().starts_with("discord:"), "{entry}");

    let done = finished(&app, &user, &task).await;
    assert_eq!(done["status"], "complete", "{done}");
    assert!(done["result"].as_str().unwrap().contains("All systems go."), "{done}");
    assert_eq!((page.hits(), calls(&app).len()), (1, 2), "the fetch ran once, then one answer");
    let actions = actions(&app, &user).await;
    for action in ["approval_requested", "tool_approved", "task_completed"] {
        assert!(actions.contains(&action.to_owned()), "{action} in {actions:?}");
    }
    result_posted(&app).await;
    assert_eq!(working_on_posts(&app), 1, "the run resumed after the approval posts nothing");
    let deny = button(&button_id(&message, "Deny"), &message.id);
    let late = command(&app, &path, &Member::manager("hal"), deny).await;
    assert!(late["data"]["content"].as_str().unwrap().contains("approved already"), "{late}");
}

async fn deny_reaches_the_model_as_a_tool_error_and_the_message_says_who(db: TestDb) {
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let (user, task, page) = waiting_fetch(&app, "deny@example.com").await;
    let message = approval_message(&app).await;
    let denied = app.post_empty(&format!("/api/agents/ops/backlog/{task}/deny"), &user).await;
    let denied = denied.assert_status(200).clone();
    assert_eq!(
        (&denied["status"], &denied["approval"]["tool"]),
        (&json!("denied"), &json!("http_fetch"))
    );
    assert_eq!(denied["approval"]["decided_by"], "the owner");

    let done = finished(&app, &user, &task).await;
    assert_eq!(done["status"], "complete", "{done}");
    let told = calls(&app).last().unwrap().tool_results();
    assert!(told.iter().any(|(_, content)| content.contains("denied by the owner")), "{told:?}");
    assert_eq!(page.hits(), 0, "a denied call is not run");
    edited_to_denied(&app, &message).await;
    app.post_empty(&format!("/api/agents/ops/backlog/{task}/approve"), &user)
        .await
        .assert_error(409, "not_awaiting_approval");
    assert!(actions(&app, &user).await.contains(&"tool_denied".to_owned()));
}

/// Denied between Discord taking the request and the outbox hearing its id: the decision sees
/// no message to edit and rewrites the post, so the delivery edits the message it made.
async fn a_decision_while_the_request_is_being_sent_edits_it_once_delivered(db: TestDb) {
    let app = app_with(db, |o| {
        o.tools.http.allow_private = true;
        // The held answer is never taken for a timeout.
        o.discord_timeout = Duration::from_secs(60);
    })
    .await;
    app.discord.hold_answer_to("Approval needed");
    let (user, task, _page) = waiting_fetch(&app, "midway@example.com").await;
    let message = approval_message(&app).await;
    deny(&app, &user, &task).await;
    assert!(app.discord.edits().is_empty(), "nothing to edit before Discord answers");
    app.discord.release_answers();
    edited_to_denied(&app, &message).await;
    let done = finished(&app, &user, &task).await;
    assert_eq!(done["status"], "complete", "{done}");
}

/// The request's send times out after Discord took it, and the decision comes before the
/// retry: the retry sends the rewritten post with the same nonce and Discord answers with the
/// message it made first, buttons and all, so the delivery edits it.
async fn a_decision_before_a_timed_out_request_is_sent_again_edits_the_first_message(db: TestDb) {
    let app = app_with(db, |o| {
        o.tools.http.allow_private = true;
        // The retry waits 5 s, long enough for the decision to come first.
        o.outbox.base_backoff = Duration::from_secs(5);
        o.outbox.max_backoff = Duration::from_secs(5);
    })
    .await;
    app.discord.hold_answer_to("Approval needed");
    let (user, task, _page) = waiting_fetch(&app, "retried@example.com").await;
    let message = approval_message(&app).await;
    deny(&app, &user, &task).await;
    edited_to_denied(&app, &message).await;
    let nonce = &message.body["nonce"];
    let sent = app.discord.messages_in(CHANNEL).into_iter().filter(|m| m.body["nonce"] == *nonce);
    assert_eq!(sent.count(), 1, "the retry made no second message");
    app.discord.release_answers();
}

async fn deny(app: &TestApp, user: &User, task: &str) {
    let denied = app.post_empty(&format!("/api/agents/ops/backlog/{task}/deny"), user).await;
    assert_eq!(denied.assert_status(200)["status"], "denied");
}

/// Waits for `message` to be edited without buttons, saying the owner denied.
async fn edited_to_denied(app: &TestApp, message: &Posted) {
    eventually(WAIT, "the message is edited", || async {
        app.discord.edits().iter().any(|e| e.message_id == message.id)
    })
    .await;
    let edit = app.discord.edits().into_iter().find(|e| e.message_id == message.id).unwrap();
    assert_eq!(edit.body["components"], json!([]));
    let title = edit.body["embeds"][0]["title"].as_str().unwrap();
    assert!(title.contains("Denied by the owner"), "{title}");
}

async fn a_restart_while_waiting_loses_nothing(db: TestDb) {
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let (user, task, page) = waiting_fetch(&app, "restart@example.com").await;
    approval_message(&app).await;
    let (db, options) = app.stop().await;
    let app = TestApp::start(db, options).await;
    assert_eq!(status(&app, &user, &task).await, "awaiting_approval");
    app.post_empty(&format!("/api/agents/ops/backlog/{task}/approve"), &user)
        .await
        .assert_status(200);
    let done = finished(&app, &user, &task).await;
    assert_eq!(done["status"], "complete", "{done}");
    assert_eq!((page.hits(), calls(&app).len()), (1, 2));
    result_posted(&app).await;
    // The request, edited since to say who decided: the other post with a button is the
    // task's "Working on".
    let messages = app.discord.messages_in(CHANNEL);
    let asked = messages
        .iter()
        .filter(|m| m.body.get("components").is_some() && !crate::process::is_working_on(m))
        .count();
    assert_eq!(asked, 1, "asked once, across the restart");
    assert_eq!(working_on_posts(&app), 1, "announced once, across the restart");
}

async fn an_unanswered_call_is_denied_at_the_timeout(db: TestDb) {
    let app = app_with(db, |o| {
        o.tools.http.allow_private = true;
        o.runtime.approval_timeout = Duration::from_secs(1);
    })
    .await;
    let (user, task, page) = waiting_fetch(&app, "timeout@example.com").await;
    let done = finished(&app, &user, &task).await;
    assert_eq!(done["status"], "complete", "{done}");
    let told = calls(&app).last().unwrap().tool_results();
    assert!(told.iter().any(|(_, content)| content.contains("nobody approved")), "{told:?}");
    assert_eq!(page.hits(), 0);
    let activity = app.get("/api/agents/ops/activity", &user).await;
    let denied = activity.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "tool_denied")
        .map(|e| e["details"].as_str().unwrap().to_owned());
    assert_eq!(denied.as_deref(), Some("Call of http_fetch denied: nobody answered in time."));
}
