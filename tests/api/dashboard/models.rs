//! Issue 41, point 1, in Chromium at desktop and phone size: from the `echo` placeholder to a
//! real answer. The placeholder's link reaches the Models page, which says which provider has
//! no key and how the operator adds one; the model field offers only usable models, and its
//! error names only usable providers and links to the page.

use std::time::Duration;

use serde_json::json;
use support::browser::{Browser, DESKTOP, PHONE};

use crate::helpers::{PRICED_MODEL, TestDb, app_with, backend_tests, wait};

backend_tests! { db;
    the_placeholder_leads_to_the_models_page_and_the_model_field_offers_only_usable_models,
}

async fn the_placeholder_leads_to_the_models_page_and_the_model_field_offers_only_usable_models(
    db: TestDb,
) {
    // `anthropic` is configured without its key; `openai` has one; the default is `echo`.
    let app = app_with(db, |o| o.keyless = vec!["anthropic".into()]).await;
    let Some(browser) = Browser::start().await else { return };
    let at = |path: &str| format!("{}{path}", app.address);
    let dana = app.register("dana@example.com").await;
    app.create_agent(&dana, "writer").await;
    let task = app.add_task(&dana, "writer", "Write the launch note", 0).await;
    let task = task["id"].as_str().unwrap().to_owned();
    app.post_empty("/api/agents/writer/start", &dana).await.assert_status(200);
    let task_path = format!("/api/agents/writer/backlog/{task}");
    wait::eventually(Duration::from_secs(20), "the echo task completes", || {
        let (app, dana, task_path) = (&app, &dana, &task_path);
        async move { app.get(task_path, dana).await.body["status"] == "complete" }
    })
    .await;

    browser.goto(&at("/login")).await;
    browser.fill("email", "dana@example.com").await;
    browser.fill("password", "correct horse").await;
    browser.click("form[action='/login'] button[type=submit]").await;
    browser.wait_for_path("/").await;

    for (width, height) in [DESKTOP, PHONE] {
        browser.set_size(width, height).await;
        // The placeholder answer links to the Models page.
        browser.goto(&at(&format!("/agents/writer/tasks/{task}"))).await;
        assert!(browser.text("#task-result").await.contains("No model was called"));
        browser.click("#task-result a[href='/models']").await;
        browser.wait_for_path("/models").await;
        let keyless = browser.text("#providers tr[data-provider='anthropic']").await;
        assert!(keyless.contains("no key"), "the provider without its key says so: {keyless}");
        let usable = browser.find("#providers tr[data-provider='openai']").await;
        assert_eq!(usable.attr("data-usable").await.unwrap().as_deref(), Some("yes"));
        let how = browser.text("#add-a-key").await;
        assert!(how.contains("AGENTD_MODELS__PROVIDERS__"), "how to add a key: {how}");
        assert!(how.contains("ANTHROPIC_API_KEY"), "{how}");
        let wide = browser
            .eval("return [...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > window.innerWidth).map(e => e.tagName + '.' + e.className + ':' + e.textContent.slice(0, 40))")
            .await;
        assert!(browser.fits_width().await, "the Models page fits {width} px: {wide}");
        assert_eq!(
            browser.find("nav a[href='/models']").await.attr("aria-current").await.unwrap(),
            Some("page".into())
        );

        // The model field offers the usable models only.
        browser.goto(&at("/")).await;
        let offered = browser
            .eval(
                "return [...document.querySelectorAll('#usable-models option')].map(o => o.value)",
            )
            .await;
        let offered: Vec<String> = serde_json::from_value(offered).unwrap();
        assert!(offered.contains(&"echo".to_owned()), "{offered:?}");
        assert!(offered.contains(&PRICED_MODEL.to_owned()), "{offered:?}");
        assert!(!offered.iter().any(|m| m.starts_with("anthropic:")), "{offered:?}");
        let list = browser.find("input[name=model]").await.attr("list").await.unwrap();
        assert_eq!(list.as_deref(), Some("usable-models"));

        // A keyless provider's model is refused, naming the usable ones, with the way on.
        browser.fill("name", "Critic").await;
        browser.fill("id", "critic").await;
        browser.fill("channel", "reviews").await;
        browser.fill("model", "anthropic:claude-sonnet-4-5").await;
        browser.fill("role_prompt", "Reviews.").await;
        browser.click("form[action='/agents'] button[type=submit]").await;
        browser
            .until("the model field's error", || async {
                !browser.text(".field-error[data-field=model]").await.is_empty()
            })
            .await;
        let problem = browser.text(".field-error[data-field=model]").await;
        assert!(problem.contains("usable: echo, openai)"), "{problem}");
        assert!(problem.contains("no API key"), "{problem}");
        browser.click("#model-help a[href='/models']").await;
        browser.wait_for_path("/models").await;
    }
    let agents = app.get("/api/agents", &dana).await;
    assert_eq!(agents.assert_status(200)["agents"].as_array().unwrap().len(), 1, "none added");
    let listed = app.get("/api/models", &dana).await;
    assert_eq!(listed.assert_status(200)["usable_providers"], json!(["echo", "openai"]));
}
