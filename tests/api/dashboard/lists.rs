//! Lists that grow without end, in Chromium at desktop and phone size: an agent's backlog a
//! page at a time with a status filter and a search (links and a GET form: nothing needs
//! JavaScript), its activity paged both ways landing on its section, and the usage page's
//! names, money and phone labels.

use serde_json::Value;
use support::browser::{Browser, PHONE, SIZES};

use crate::helpers::{TestApp, TestDb, User, app_with, backend_tests};

backend_tests! { db;
    a_long_backlog_comes_a_page_at_a_time_with_a_status_filter_and_a_search,
    activity_pages_newer_and_older_and_lands_on_its_section,
    the_usage_page_names_echo_shows_one_money_format_and_labels_every_cell_on_a_phone,
}

/// Registers `email` through the dashboard's form in `browser`; the session as an API user.
pub(super) async fn sign_up(app: &TestApp, browser: &Browser, email: &str) -> User {
    browser.goto(&format!("{}/register", app.address)).await;
    browser.fill("name", "Dana").await;
    browser.fill("email", email).await;
    browser.fill("password", "correct horse battery").await;
    browser.click("form[action='/register'] button[type=submit]").await;
    browser.wait_for_path("/").await;
    let session = browser.client.get_named_cookie("agentd_session").await.expect("a session");
    User { id: String::new(), token: session.value().to_owned() }
}

/// The titles of the backlog's rows, top to bottom.
async fn rows(browser: &Browser) -> Vec<String> {
    let titles = browser
        .eval(
            "return Array.from(document.querySelectorAll('#backlog tr[data-task] td:first-child a'))\
             .map(a => a.textContent)",
        )
        .await;
    titles.as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
}

async fn until_rows(browser: &Browser, what: &str, expected: &[String]) {
    browser.until(what, || async { rows(browser).await == expected }).await;
}

fn titles(numbers: impl Iterator<Item = usize>) -> Vec<String> {
    numbers.map(|n| format!("Task {n:02}")).collect()
}

/// The browser's address: its query and its fragment.
async fn url(browser: &Browser) -> (String, Option<String>) {
    let url = browser.client.current_url().await.expect("the browser's address");
    (url.query().unwrap_or_default().to_owned(), url.fragment().map(str::to_owned))
}

async fn a_long_backlog_comes_a_page_at_a_time_with_a_status_filter_and_a_search(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let user = sign_up(&app, &browser, "pages@example.com").await;
    app.create_agent(&user, "writer").await;
    let mut ids = Vec::new();
    for n in 0..41 {
        let task = app.add_task(&user, "writer", &format!("Task {n:02}"), 0).await;
        ids.push(task["id"].as_str().unwrap().to_owned());
    }
    app.force_task_status(&ids[3], "failed").await;
    app.force_task_status(&ids[30], "failed").await;
    let page = format!("{}/agents/writer", app.address);

    for (width, height) in SIZES {
        browser.set_size(width, height).await;
        // Twenty a page, newest first, and a link to the next page that lands on the list.
        browser.goto(&page).await;
        until_rows(&browser, "the first page", &titles((21..41).rev())).await;
        browser.click("#backlog-next").await;
        until_rows(&browser, "the second page", &titles((1..21).rev())).await;
        let (query, fragment) = url(&browser).await;
        assert!(query.contains("cursor="), "{query}");
        assert_eq!(fragment.as_deref(), Some("backlog-filter"));
        browser.click("#backlog-next").await;
        until_rows(&browser, "the last page", &titles(0..1)).await;
        assert_eq!(
            browser.eval("return document.getElementById('backlog-next')").await,
            Value::Null
        );
        browser.click("a[rel=first]").await;
        until_rows(&browser, "the first page again", &titles((21..41).rev())).await;

        // A status: the two failed tasks only; the address carries the filter (a GET form).
        browser.click("#backlog-filter select[name=status] option[value='failed']").await;
        browser.click("#backlog-filter button[type=submit]").await;
        until_rows(&browser, "the failed tasks", &titles([30, 3].into_iter())).await;
        assert!(url(&browser).await.0.contains("status=failed"));

        // A search, letter case aside, within any status.
        browser.goto(&page).await;
        browser.type_into("#backlog-filter [name='search']", "ASK 07").await;
        browser.click("#backlog-filter button[type=submit]").await;
        until_rows(&browser, "the search's one task", &titles(7..8)).await;
        browser.type_into("#backlog-filter [name='search']", "nothing like it").await;
        browser.click("#backlog-filter button[type=submit]").await;
        browser
            .until("no task matches", || async {
                browser.text("#backlog").await.contains("No task matches this filter.")
            })
            .await;

        // A search over the bound is refused beside its field, keeping what was typed.
        let long = "x".repeat(101);
        browser.goto(&format!("{page}?search={long}")).await;
        browser
            .until("the search refused", || async {
                browser.text("[data-field=search]").await.contains("at most 100 characters")
            })
            .await;
        let kept = browser.find("#backlog-filter [name='search']").await.prop("value").await;
        assert_eq!(kept.unwrap().as_deref(), Some(long.as_str()));
        assert_eq!(rows(&browser).await, titles((21..41).rev()), "the first page, unfiltered");
    }
}

async fn activity_pages_newer_and_older_and_lands_on_its_section(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let user = sign_up(&app, &browser, "log@example.com").await;
    app.create_agent(&user, "writer").await;
    for n in 0..35 {
        app.add_task(&user, "writer", &format!("Task {n:02}"), 0).await;
    }
    let page = format!("{}/agents/writer", app.address);
    let newest = "Task 'Task 34' added";
    let oldest = "Task 'Task 00' added";
    // The window scrolled down to the section, its heading in view (at the top, unless the
    // page ends first).
    let on_section = "const top = document.getElementById('activity-section')\
                      .getBoundingClientRect().top; \
                      return window.scrollY > 0 && top >= 0 && top < window.innerHeight - 60";

    for (width, height) in SIZES {
        browser.set_size(width, height).await;
        browser.goto(&page).await;
        browser
            .until("the newest entries", || async {
                let shown = browser.text("#activity").await;
                shown.contains(newest) && !shown.contains(oldest)
            })
            .await;
        assert_eq!(
            browser.eval("return document.getElementById('activity-newer')").await,
            Value::Null
        );

        browser.click("#activity-older").await;
        browser
            .until("the older entries", || async {
                let shown = browser.text("#activity").await;
                shown.contains(oldest) && !shown.contains(newest)
            })
            .await;
        let (query, fragment) = url(&browser).await;
        assert!(query.contains("before="), "{query}");
        assert_eq!(fragment.as_deref(), Some("activity-section"));
        browser
            .until("the older page shown at its section", || async {
                browser.eval(on_section).await == Value::Bool(true)
            })
            .await;
        assert_eq!(
            browser.eval("return document.getElementById('activity-older')").await,
            Value::Null
        );

        // Newer: back up to the entries just above, the newest among them, at the section.
        browser.click("#activity-newer").await;
        browser
            .until("the newer entries", || async {
                let shown = browser.text("#activity").await;
                shown.contains(newest) && !shown.contains(oldest)
            })
            .await;
        assert!(url(&browser).await.0.contains("after="));
        browser
            .until("the newer page shown at its section", || async {
                browser.eval(on_section).await == Value::Bool(true)
            })
            .await;
        browser.find("#activity-older").await;
        assert_eq!(
            browser.eval("return document.getElementById('activity-newer')").await,
            Value::Null
        );
    }
}

async fn the_usage_page_names_echo_shows_one_money_format_and_labels_every_cell_on_a_phone(
    db: TestDb,
) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let user = sign_up(&app, &browser, "usage@example.com").await;
    // An agent on the offline `echo` model runs one task: a model call with no model name.
    let body = serde_json::json!({"id": "echoer", "name": "Echoer", "role_prompt": "Echo.",
                                  "channel": "general", "model": "echo", "throttle_seconds": 0});
    app.post("/api/agents", &user, body).await.assert_status(201);
    app.add_task(&user, "echoer", "Say something", 0).await;
    app.post_empty("/api/agents/echoer/start", &user).await.assert_status(200);
    crate::helpers::eventually(
        std::time::Duration::from_secs(20),
        "the task completes",
        || async {
            let backlog = app.get("/api/agents/echoer/backlog", &user).await;
            backlog.body["tasks"][0]["status"] == "complete"
        },
    )
    .await;
    let usage = format!("{}/usage", app.address);

    // A budget of $25 reads in the same format as every other sum.
    browser.goto(&usage).await;
    browser.fill("monthly_usd", "25").await;
    browser.click("form[action='/usage/budget'] button[type=submit]").await;
    browser
        .until("the budget saved", || async { browser.text("main").await.contains("of $25.00") })
        .await;

    for (width, height) in SIZES {
        browser.set_size(width, height).await;
        browser.goto(&usage).await;
        let model = browser.text("#usage-model tbody tr:first-child td:first-child").await;
        assert!(model.contains("echo"), "the echo model is named: {model:?}");
        let money = browser
            .eval(
                "return Array.from(document.querySelectorAll('main')).map(m => m.innerText).join('')\
                 .match(/\\$[0-9.,]+/g)",
            )
            .await;
        for sum in money.as_array().unwrap() {
            let sum = sum.as_str().unwrap().trim_end_matches(['.', ',']);
            let cents = sum.rsplit_once('.').map(|(_, cents)| cents.len());
            assert!(matches!(cents, Some(2 | 4)), "one money format: {sum}");
        }
        // Every cell says what it is, the totals too: on a phone the labels are all there is.
        let unlabelled = browser
            .eval(
                "return document.querySelectorAll('table[id^=usage-] td:not([data-label])').length",
            )
            .await;
        assert_eq!(unlabelled, Value::from(0));
        if (width, height) == PHONE {
            let label = browser
                .eval(
                    "return getComputedStyle(document.querySelector('#usage-model tr.total td'), \
                     '::before').content",
                )
                .await;
            assert_eq!(label, Value::from("\"Model\""));
            let wide = browser
                .eval("return document.documentElement.scrollWidth <= window.innerWidth")
                .await;
            assert_eq!(wide, Value::Bool(true), "no sideways scrolling");
        }
    }
}
