//! The live pages in Chromium: a task's page follows its run as it happens (a retry with the
//! provider's status, the steps, the step running now with its time moving) and cancels it;
//! the agent's page and the overview follow the backlog and the activity; all without reloading.

use std::time::Duration;

use serde_json::json;
use support::browser::Browser;
use support::fake_models::Script;

use crate::helpers::{TestDb, User, app_with, backend_tests};

const EMAIL: &str = "live@example.com";

backend_tests! { db;
    the_pages_follow_a_run_as_it_happens_and_cancel_it,
}

fn append(text: &str) -> Script {
    Script::Call { name: "memory".into(), arguments: json!({"action": "append", "text": text}) }
}

/// How many elements match `css` on the page.
async fn count(browser: &Browser, css: &str) -> u64 {
    let script = format!("return document.querySelectorAll(\"{css}\").length");
    browser.eval(&script).await.as_u64().unwrap()
}

/// The seconds an elapsed time reads ("12 s", "1 min 3 s").
fn seconds(text: &str) -> u64 {
    let numbers: Vec<u64> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    match numbers.as_slice() {
        [s] => *s,
        [m, s] => m * 60 + s,
        _ => panic!("not an elapsed time: {text:?}"),
    }
}

async fn the_pages_follow_a_run_as_it_happens_and_cancel_it(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let at = |path: &str| format!("{}{path}", app.address);
    browser.goto(&at("/register")).await;
    browser.fill("name", "Lee").await;
    browser.fill("email", EMAIL).await;
    browser.fill("password", "correct horse battery").await;
    browser.click("form[action='/register'] button[type=submit]").await;
    browser.wait_for_path("/").await;
    let session = browser.client.get_named_cookie("agentd_session").await.expect("signed in");
    let user = User { id: String::new(), token: session.value().to_owned() };
    let agent = json!({"id": "scribe", "name": "Scribe", "role_prompt": "Takes notes.",
        "channel": "notes", "model": "openai:scribe", "tools": ["memory"]});
    app.post("/api/agents", &user, agent).await.assert_status(201);
    let models = &app.options.models;
    models.set_latency_for("scribe", Duration::from_millis(800));
    models.script_for(
        "scribe",
        [
            Script::Status(429, Some(2)),
            append("first"),
            append("second"),
            Script::Hang(Duration::from_secs(120)),
        ],
    );
    let task = app.add_task(&user, "scribe", "Take notes slowly", 0).await;
    let task = task["id"].as_str().unwrap().to_owned();

    // The task's page, queued; its stream open, then the agent starts.
    browser.goto(&at(&format!("/agents/scribe/tasks/{task}"))).await;
    browser.find("main[data-stream=open]").await;
    browser.eval("window.__same_page = 'task'; return null;").await;
    app.post_empty("/api/agents/scribe/start", &user).await.assert_status(200);

    // The provider's 429 shows with the next attempt's time; then the steps come in.
    browser
        .until("the retry shown", || async {
            let retry = browser.text("#retry").await;
            retry.contains("HTTP 429") && retry.contains("Next attempt at")
        })
        .await;
    browser
        .until("the steps appear", || async { count(&browser, "#steps li.step").await >= 2 })
        .await;
    browser
        .until("step 5, the last model call, running", || async {
            let running = browser.text("#running").await;
            running.starts_with("Step 5 running: model call, for")
        })
        .await;
    // The region holding it may be in the middle of being replaced by a refresh: read it
    // until a whole one answers.
    browser
        .until("the status in_progress", || async {
            browser.text("#task-status").await == "in_progress"
        })
        .await;
    browser
        .until("steps 1 to 4 shown", || async { count(&browser, "#steps li.step").await == 4 })
        .await;
    assert!(
        browser.eval("return document.querySelector('#retry').hidden").await.as_bool().unwrap()
    );
    // Its elapsed time moves.
    let first = seconds(&browser.text("#running time").await);
    browser
        .until("the elapsed time grows", || async {
            seconds(&browser.text("#running time").await) > first
        })
        .await;
    assert_eq!(browser.eval("return window.__same_page").await, "task", "not reloaded");

    browser.click("#task-live a[href$='/cancel?to=task']").await;
    browser.click("#confirm-yes").await;
    browser
        .until("the task cancelled", || async { browser.text("#task-status").await == "cancelled" })
        .await;
    let by = browser.text("#task-cancelled-by").await;
    assert!(by.starts_with(&format!("Cancelled by {EMAIL}")), "{by}");
    assert!(
        browser.eval("return document.querySelector('#running').hidden").await.as_bool().unwrap()
    );

    // The agent's page: a new task's activity, its run and its cancel from its row.
    models.script_for("scribe", [Script::Hang(Duration::from_secs(120))]);
    browser.click("a[href='/agents/scribe']").await;
    browser.wait_for_path("/agents/scribe").await;
    browser.find("main[data-events='/events?agent=scribe'][data-stream=open]").await;
    browser.eval("window.__same_page = 'agent'; return null;").await;
    let next = app.add_task(&user, "scribe", "Next in line", 0).await;
    let next = next["id"].as_str().unwrap().to_owned();
    let row = format!("#backlog tr[data-task='{next}']");
    browser
        .until("the activity and the backlog follow", || async {
            browser.text("#activity").await.contains("Task 'Next in line' added")
                && count(&browser, &format!("{row}[data-status=in_progress]")).await > 0
        })
        .await;
    assert_eq!(browser.eval("return window.__same_page").await, "agent", "not reloaded");
    browser.click(&format!("{row} a[href$='/cancel']")).await;
    browser.click("#confirm-yes").await;
    browser
        .until("the row cancelled and counted", || async {
            count(&browser, &format!("{row}[data-status=cancelled]")).await > 0
                && browser.text("#cancelled-count").await == "2"
        })
        .await;

    // The overview: a task done elsewhere shows in its counts.
    models.script_for("scribe", [Script::Answer("Done.".into())]);
    browser.click("nav a[href='/']").await;
    browser.wait_for_path("/").await;
    browser.find("main[data-events='/events'][data-stream=open]").await;
    browser.eval("window.__same_page = 'overview'; return null;").await;
    app.add_task(&user, "scribe", "Quick one", 0).await;
    browser
        .until("the overview counts it", || async {
            browser.text("tr[data-agent='scribe'] .done-count").await == "1"
        })
        .await;
    assert_eq!(browser.eval("return window.__same_page").await, "overview", "not reloaded");
}
