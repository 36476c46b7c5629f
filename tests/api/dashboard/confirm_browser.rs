//! Issue 41's dashboard points 2, 3 and 6 in Chromium, each at desktop and at phone size: a
//! delete asks first and a cancel keeps everything; a refused form keeps what was entered, a
//! reload shows the form and a save says so; a task waiting for approval shows its call first
//! and is approved from its backlog row.

use support::browser::Browser;

use super::lists::sign_up;
use crate::helpers::{TestDb, app_with, backend_tests};

backend_tests! { db;
    deleting_asks_first_and_a_cancel_keeps_everything,
    a_refused_form_keeps_its_input_and_a_reload_shows_the_form,
    a_waiting_task_shows_its_call_first_and_is_approved_from_its_row,
}

/// The two window sizes every point is checked at.
const SIZES: [(&str, u32, u32); 2] = [("desktop", 1280, 900), ("phone", 390, 844)];

/// Waits until the page's message region says `text`.
async fn says(browser: &Browser, text: &str) {
    browser
        .until(&format!("the message '{text}'"), || async {
            browser.text("#flash[role=status]").await.contains(text)
        })
        .await;
}

/// Opens the agent page's settings when they are closed.
async fn open_settings(browser: &Browser) {
    let open = browser.eval("return document.querySelector('main details').open").await;
    if open.as_bool() != Some(true) {
        browser.click("main details summary").await;
    }
}

async fn deleting_asks_first_and_a_cancel_keeps_everything(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let user = sign_up(&app, &browser, "dana@example.com").await;
    for (size, width, height) in SIZES {
        browser.set_size(width, height).await;
        let agent = format!("writer-{size}");
        app.create_agent(&user, &agent).await;
        let task = app.add_task(&user, &agent, "Draft", 0).await["id"].as_str().unwrap().to_owned();
        let page = format!("/agents/{agent}");
        browser.goto(&format!("{}{page}", app.address)).await;

        // A task's Delete asks; Cancel keeps it; confirming deletes it and says so.
        let row = format!("#backlog tr[data-task='{task}']");
        browser.click(&format!("{row} a.delete")).await;
        browser.wait_for_path(&format!("{page}/tasks/{task}/delete")).await;
        assert!(browser.text("#confirm h1").await.contains("Delete the task “Draft”?"), "{size}");
        browser.click("#confirm-no").await;
        browser.wait_for_path(&page).await;
        browser.find(&row).await;
        assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks WHERE id = $1", &[&task]).await, 1);
        browser.click(&format!("{row} a.delete")).await;
        browser.click("#confirm-yes").await;
        says(&browser, "The task “Draft” was deleted.").await;
        assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks WHERE id = $1", &[&task]).await, 0);

        // The agent's Delete asks, saying what goes with it; Cancel keeps it.
        app.add_task(&user, &agent, "Kept", 0).await;
        browser.goto(&format!("{}{page}", app.address)).await;
        open_settings(&browser).await;
        browser.click("#delete-agent").await;
        browser.wait_for_path(&format!("{page}/do/delete")).await;
        let lost = browser.text("#confirm-lost").await;
        assert!(lost.contains("1 task in its backlog"), "{size}: {lost}");
        browser.click("#confirm-no").await;
        browser.wait_for_path(&page).await;
        let kept = app.db.count("SELECT COUNT(*) FROM agents WHERE id = $1", &[&agent]).await;
        assert_eq!(kept, 1, "{size}: cancelled, the agent stays");
        open_settings(&browser).await;
        browser.click("#delete-agent").await;
        browser.click("#confirm-yes").await;
        browser.wait_for_path("/").await;
        says(&browser, &format!("The agent {agent} was deleted")).await;
        let gone = app.db.count("SELECT COUNT(*) FROM agents WHERE id = $1", &[&agent]).await;
        assert_eq!(gone, 0, "{size}");
    }
}

async fn a_refused_form_keeps_its_input_and_a_reload_shows_the_form(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let user = sign_up(&app, &browser, "dana@example.com").await;
    let ticked = "return document.querySelector(\"#settings input[value='http_fetch']\").checked";
    for (size, width, height) in SIZES {
        browser.set_size(width, height).await;
        let agent = format!("writer-{size}");
        app.create_agent(&user, &agent).await;
        let page = format!("/agents/{agent}");
        browser.goto(&format!("{}{page}", app.address)).await;

        open_settings(&browser).await;
        browser.click("#settings input[value='http_fetch']").await;
        browser.type_into("#settings [name='max_steps']", "many").await;
        browser.click("#settings button[type=submit]").await;
        browser
            .until("the refusal beside its field", || async {
                !browser.text("#settings .field-error[data-field=max_steps]").await.is_empty()
            })
            .await;
        assert_eq!(browser.eval(ticked).await.as_bool(), Some(true), "{size}: still ticked");
        let field = browser.find("#settings [name='max_steps']").await;
        assert_eq!(field.prop("value").await.unwrap().as_deref(), Some("many"), "{size}");

        // A reload, and the form's own address visited, show the page with the form.
        browser.client.refresh().await.expect("reload");
        browser.find("#settings").await;
        browser.goto(&format!("{}{page}/settings", app.address)).await;
        browser.wait_for_path(&page).await;
        browser.find("#settings").await;
        let html = browser.eval("return document.contentType").await;
        assert_eq!(html.as_str(), Some("text/html"), "{size}: a page, not JSON");

        // A save goes back to the settings and says so.
        open_settings(&browser).await;
        if browser.eval(ticked).await.as_bool() != Some(true) {
            browser.click("#settings input[value='http_fetch']").await;
        }
        browser.type_into("#settings [name='max_steps']", "5").await;
        browser.click("#settings button[type=submit]").await;
        says(&browser, "Settings saved.").await;
        let hash = browser.eval("return window.location.hash").await;
        assert_eq!(hash.as_str(), Some("#settings"), "{size}: back at the settings");
        let saved = app.get(&format!("/api/agents/{agent}"), &user).await;
        let saved = saved.assert_status(200);
        assert_eq!(saved["max_steps"], 5, "{size}");
        assert!(saved["tools"].as_array().unwrap().iter().any(|t| t == "http_fetch"), "{size}");
    }
}

async fn a_waiting_task_shows_its_call_first_and_is_approved_from_its_row(db: TestDb) {
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let Some(browser) = Browser::start().await else { return };
    let user = sign_up(&app, &browser, "dana@example.com").await;
    let (task, fetched) = crate::interactions::approvals::waiting_fetch_for(&app, &user).await;
    let row = format!("#backlog tr[data-task='{task}']");
    let first = "const call = document.querySelector('#approval-call'); \
                 const button = document.querySelector(\".actions form[action$='/approve']\"); \
                 return !!call && !!button && \
                 !!(call.compareDocumentPosition(button) & Node.DOCUMENT_POSITION_FOLLOWING)";
    for (size, width, height) in SIZES {
        browser.set_size(width, height).await;
        browser.goto(&format!("{}/agents/ops/tasks/{task}", app.address)).await;
        assert!(browser.text("#approval-tool").await.contains("http_fetch"), "{size}");
        assert!(browser.text("#approval-arguments").await.contains("/status"), "{size}");
        assert_eq!(browser.eval(first).await.as_bool(), Some(true), "{size}: the call first");
        browser.goto(&format!("{}/agents/ops", app.address)).await;
        for button in ["approve", "deny"] {
            let shown = browser.find(&format!("{row} form[action$='/{button}'] button")).await;
            assert!(shown.is_displayed().await.unwrap(), "{size}: {button} on the row");
        }
    }
    // Approved from its row (at phone size, the last one checked): the task goes on.
    browser.click(&format!("{row} form[action$='/approve'] button")).await;
    says(&browser, "Approved").await;
    browser.find(&format!("{row}[data-status=complete]")).await;
    assert_eq!(fetched.hits(), 1, "the approved call ran once");
}
