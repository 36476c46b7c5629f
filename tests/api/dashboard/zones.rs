//! Times and schedules in Chromium at desktop and phone size: every time carries its zone, in
//! the browser's own zone once `live.js` has told it (UTC, labelled, before and without it);
//! an idle agent's schedule says its runs are skipped; a schedule's twin is refused beside
//! its field.

use serde_json::Value;
use support::browser::{Browser, SIZES};

use crate::helpers::{TestDb, app_with, backend_tests};

use super::lists::sign_up;

backend_tests! { db;
    times_are_shown_in_the_browsers_zone_with_its_label,
    an_idle_agents_schedule_says_its_runs_are_skipped_until_it_is_started,
    a_schedules_twin_is_refused_beside_its_field,
}

/// The text of the newest activity entry's time.
const FIRST_TIME: &str = "#activity li:first-child span.muted";

async fn times_are_shown_in_the_browsers_zone_with_its_label(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start_in_zone("Asia/Tokyo").await else { return };
    let user = sign_up(&app, &browser, "zone@example.com").await;
    app.create_agent(&user, "writer").await;
    let page = format!("{}/agents/writer", app.address);

    for (width, height) in SIZES {
        browser.set_size(width, height).await;
        // The first page a browser loads may be made before live.js set the cookie: reload.
        browser
            .until("the activity's time in Tokyo", || async {
                browser.goto(&page).await;
                browser.find(FIRST_TIME).await.text().await.unwrap_or_default().ends_with(" JST")
            })
            .await;
        browser.goto(&format!("{}/", app.address)).await;
        let last = browser.find("tr[data-agent='writer'] td[data-label='Last activity']").await;
        let last = last.text().await.unwrap();
        assert!(last.ends_with(" JST"), "the overview's last activity in Tokyo: {last}");
    }
    let zone = browser.client.get_named_cookie("tz").await.expect("the zone cookie");
    assert_eq!(zone.value(), "Asia/Tokyo");

    // Without the cookie (a first visit, no JavaScript) or with a zone the server does not
    // know, the same page is in UTC, and says so.
    for cookie in ["tz=; max-age=0; path=/", "tz=Mars/Olympus_Mons; path=/"] {
        let html = browser
            .eval(&format!(
                "document.cookie = '{cookie}'; \
                 return fetch('/agents/writer').then(r => r.text())"
            ))
            .await;
        let html = html.as_str().unwrap();
        let time = html.split("<li><span class=\"muted\">").nth(1).unwrap_or_default();
        let time = time.split('<').next().unwrap_or_default();
        assert!(time.ends_with(" UTC"), "{cookie}: {time:?}");
    }
}

/// Adds a schedule through the agent page's form.
async fn add_schedule(browser: &Browser, cron: &str, zone: &str, title: &str) {
    browser.type_into("form[action$='/schedules'] [name='cron']", cron).await;
    browser.type_into("form[action$='/schedules'] [name='timezone']", zone).await;
    browser.type_into("form[action$='/schedules'] [name='title']", title).await;
    browser.click("form[action$='/schedules'] button[type=submit]").await;
}

async fn an_idle_agents_schedule_says_its_runs_are_skipped_until_it_is_started(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let user = sign_up(&app, &browser, "idle@example.com").await;
    app.create_agent(&user, "writer").await;
    let page = format!("{}/agents/writer", app.address);
    browser.goto(&page).await;
    add_schedule(&browser, "0 9 * * *", "Asia/Tokyo", "Daily brief").await;
    browser.find(".schedule").await;

    for (width, height) in SIZES {
        browser.set_size(width, height).await;
        browser.goto(&page).await;
        let note = browser.find(".schedule [data-skipped]").await.text().await.unwrap();
        assert!(note.contains("Skipped while the agent is idle"), "{note}");
        assert!(note.contains("Start the agent"), "{note}");
        // The next runs are in the schedule's zone, each labelled.
        let runs = browser.text(".schedule p.muted").await;
        assert_eq!(runs.matches("09:00:00 JST").count(), 5, "{runs}");
    }

    browser.click("form[action$='/do/start'] button").await;
    browser
        .until("the agent active", || async { browser.text("#agent-status").await == "active" })
        .await;
    browser.goto(&page).await;
    browser.find(".schedule").await;
    let notes = browser.eval("return document.querySelectorAll('[data-skipped]').length").await;
    assert_eq!(notes, Value::from(0), "an active agent's runs are not skipped");
}

async fn a_schedules_twin_is_refused_beside_its_field(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let user = sign_up(&app, &browser, "twin@example.com").await;
    app.create_agent(&user, "writer").await;
    let page = format!("{}/agents/writer", app.address);

    for (n, (width, height)) in SIZES.into_iter().enumerate() {
        browser.set_size(width, height).await;
        browser.goto(&page).await;
        let title = format!("Brief {n}");
        add_schedule(&browser, "0 9 * * MON-FRI", "Europe/Berlin", &title).await;
        browser
            .until("the schedule added", || async { browser.text("main").await.contains(&title) })
            .await;
        add_schedule(&browser, "0 9 * * mon-fri", "Europe/Berlin", &title).await;
        browser
            .until("the twin refused beside the cron field", || async {
                browser
                    .text("form[action$='/schedules'] [data-field=cron]")
                    .await
                    .contains("already")
            })
            .await;
        let kept =
            browser.find("form[action$='/schedules'] [name='title']").await.prop("value").await;
        assert_eq!(kept.unwrap().as_deref(), Some(title.as_str()), "the form keeps its input");
        let listed = app.get("/api/agents/writer/schedules", &user).await;
        assert_eq!(listed.assert_status(200)["schedules"].as_array().unwrap().len(), n + 1);
    }
}
