//! Issue 41, points 4, 5 and 7, in Chromium at desktop and phone size: a browser never sees
//! JSON (an unknown address, a method a route does not take, an API error: a page in words
//! with the navigation), a wrong password and a bad usage date say so on their own page, the
//! header says who is signed in and signs out, and the agent limit is shown before the form
//! is filled in, worded as the server's limit without billing and as a plan's with it.

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use support::browser::{Browser, DESKTOP, PHONE};

use crate::helpers::{TestApp, TestDb, app_with, backend_tests};

backend_tests! { db;
    a_browser_gets_pages_in_words_and_an_api_client_keeps_json,
    the_header_shows_who_is_signed_in_and_signs_out,
    the_agent_limit_is_shown_before_the_form_in_the_words_of_who_sets_it,
}

const PASSWORD: &str = "correct horse";

/// Signs `email` in through the sign-in form.
async fn sign_in(browser: &Browser, app: &TestApp, email: &str) {
    browser.goto(&format!("{}/login", app.address)).await;
    browser.fill("email", email).await;
    browser.fill("password", PASSWORD).await;
    browser.click("form[action='/login'] button[type=submit]").await;
    browser.wait_for_path("/").await;
}

/// The page's heading, once the error page is shown.
async fn error_heading(browser: &Browser) -> String {
    browser.find("#error h1").await.text().await.unwrap()
}

async fn a_browser_gets_pages_in_words_and_an_api_client_keeps_json(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let at = |path: &str| format!("{}{path}", app.address);
    app.register("dana@example.com").await;

    // An API client keeps the JSON contract; a browser's request for the same gets a page.
    let api = app.client.get(at("/no/such/page")).send().await.unwrap();
    assert_eq!(api.status(), 404);
    assert!(api.headers()[CONTENT_TYPE].to_str().unwrap().starts_with("application/json"));
    // The body depends on what the request accepts: a cache must not serve one for the other.
    assert_eq!(api.headers()["vary"], "accept, hx-request");
    let body: serde_json::Value = api.json().await.unwrap();
    assert_eq!(body["error"]["code"], "route_not_found");
    let page = app.client.get(at("/api/agents")).header(ACCEPT, "text/html").send().await.unwrap();
    assert_eq!(page.status(), 401);
    assert!(page.headers()[CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    assert!(page.headers().contains_key("content-security-policy"));
    assert!(page.text().await.unwrap().contains("href=\"/login\""));

    for (width, height) in [DESKTOP, PHONE] {
        browser.set_size(width, height).await;
        // Signed out: the words, and the ways to sign in.
        browser.goto(&at("/no/such/page")).await;
        assert_eq!(error_heading(&browser).await, "Page not found");
        browser.find("header nav a[href='/login']").await;
        assert!(!browser.text("body").await.contains("\"error\""), "no JSON shown");

        // A wrong password, in plain words.
        browser.goto(&at("/login")).await;
        browser.fill("email", "dana@example.com").await;
        browser.fill("password", "not the password").await;
        browser.click("form[action='/login'] button[type=submit]").await;
        browser
            .until("the refusal", || async { !browser.text("[role=alert]").await.is_empty() })
            .await;
        let said = browser.text("[role=alert]").await;
        assert!(said.contains("e-mail address or the password is wrong"), "{said}");
        assert!(!said.contains("token"), "no API words: {said}");
        assert_eq!(browser.path().await, "/login");

        // Signed in: every status is a page with the navigation of the signed-in.
        sign_in(&browser, &app, "dana@example.com").await;
        for (path, heading) in [
            ("/no/such/page", "Page not found"),
            // A dashboard form's address goes back to its form (post, redirect, get); an API
            // route that only takes a POST is refused in words.
            ("/auth/login", "This page cannot be opened that way"),
            ("/agents/nobody", "Not found"),
            ("/api/nothing-here", "Page not found"),
        ] {
            browser.goto(&at(path)).await;
            assert_eq!(error_heading(&browser).await, heading, "{path}");
            browser.find("header nav a[href='/usage']").await;
            assert_eq!(browser.text("#signed-in-as").await, "Test User", "{path}");
            assert!(browser.fits_width().await, "{path} fits {width} px");
        }
        browser.click("header nav a[href='/']").await;
        browser.wait_for_path("/").await;

        // A bad date on the usage page: the usage page, the field's error and the format.
        browser.goto(&at("/usage?from=yesterday&to=")).await;
        let problem = browser.find(".field-error[data-field=from]").await.text().await.unwrap();
        assert!(problem.contains("2026-11-01"), "the expected format: {problem}");
        assert!(browser.text("#period-error").await.contains("this month's usage is shown"));
        let typed = browser.find("input[name=from]").await.prop("value").await.unwrap();
        assert_eq!(typed.as_deref(), Some("yesterday"), "the field keeps what was typed");
        browser.find("#usage-agent").await;
        browser.find("header nav a[href='/usage'][aria-current=page]").await;
        assert!(browser.fits_width().await, "the usage page fits {width} px");
        browser.click("#sign-out").await;
        browser.wait_for_path("/login").await;
    }
}

async fn the_header_shows_who_is_signed_in_and_signs_out(db: TestDb) {
    let app = app_with(db, |_| {}).await;
    let Some(browser) = Browser::start().await else { return };
    let at = |path: &str| format!("{}{path}", app.address);
    app.register("dana@example.com").await;
    for (width, height) in [DESKTOP, PHONE] {
        browser.set_size(width, height).await;
        sign_in(&browser, &app, "dana@example.com").await;
        for path in ["/", "/onboarding", "/discord", "/usage", "/team", "/models"] {
            browser.goto(&at(path)).await;
            assert_eq!(browser.text("header #signed-in-as").await, "Test User", "{path}");
            let email = browser.find("#signed-in-as").await.attr("title").await.unwrap();
            assert_eq!(email.as_deref(), Some("dana@example.com"));
            assert!(browser.fits_width().await, "{path} fits {width} px");
        }
        browser.click("header #sign-out").await;
        browser.wait_for_path("/login").await;
        browser.goto(&at("/usage")).await;
        browser.wait_for_path("/login").await;
        assert_eq!(browser.text("#signed-in-as").await, "", "nobody is signed in");
    }
}

async fn the_agent_limit_is_shown_before_the_form_in_the_words_of_who_sets_it(db: TestDb) {
    let backend = db.backend;
    // Without billing: this server's own limit, and the operator's setting.
    let app = app_with(db, |o| {
        o.webhook_secrets.clear();
        o.quotas.agents_per_user = 1;
    })
    .await;
    let Some(browser) = Browser::start().await else { return };
    let dana = app.register("dana@example.com").await;
    app.create_agent(&dana, "writer").await;
    for (width, height) in [DESKTOP, PHONE] {
        browser.set_size(width, height).await;
        sign_in(&browser, &app, "dana@example.com").await;
        for path in ["/", "/onboarding"] {
            browser.goto(&format!("{}{path}", app.address)).await;
            let limit = browser.find("#agent-limit").await.text().await.unwrap();
            assert!(limit.contains("1 of 1 agents, this server's limit"), "{path}: {limit}");
            assert!(limit.contains("quotas.agents_per_user"), "{limit}");
            assert!(limit.contains("AGENTD_QUOTAS__AGENTS_PER_USER"), "{limit}");
            assert!(!limit.contains("plan"), "no plan without billing: {limit}");
            browser.find("#agent-form-closed").await;
            let forms = browser
                .eval("return document.querySelectorAll(\"form[action='/agents'], form[action='/onboarding']\").length")
                .await;
            assert_eq!(forms.as_u64(), Some(0), "{path}: no form to fill in for nothing");
        }
        browser.click("#sign-out").await;
        browser.wait_for_path("/login").await;
    }
    drop(app);

    // With billing: the plan's limit, and the way to a larger plan.
    let Some(db) = TestDb::create(backend).await else { return };
    let app = app_with(db, |_| {}).await;
    let ada = app.register("ada@example.com").await;
    app.create_agent(&ada, "one").await;
    app.create_agent(&ada, "two").await;
    sign_in(&browser, &app, "ada@example.com").await;
    let limit = browser.find("#agent-limit").await.text().await.unwrap();
    assert!(limit.contains("2 of 3 agents on the free plan."), "{limit}");
    browser.find("form[action='/agents']").await;
    app.create_agent(&ada, "three").await;
    for (width, height) in [DESKTOP, PHONE] {
        browser.set_size(width, height).await;
        browser.goto(&format!("{}/", app.address)).await;
        let limit = browser.find("#agent-limit").await.text().await.unwrap();
        assert!(limit.contains("3 of 3 agents on the free plan."), "{limit}");
        assert!(limit.contains("larger plan"), "{limit}");
        assert!(limit.contains("ada@example.com"), "{limit}");
        assert!(!limit.contains("quotas."), "no server setting with billing: {limit}");
        browser.find("#agent-form-closed").await;
        assert!(browser.fits_width().await, "the overview fits {width} px");
    }
}
