//! What a person does in the dashboard, in Chromium: register, onboard from a template, add a
//! task, start the agent and watch the task complete without reloading, read its steps,
//! connect Discord with a bot token and map a channel, then sign out and be refused. A model
//! result carrying markup shows as text and runs nothing. Screenshots of the main pages, at
//! desktop and phone width, go to `docs/screenshots/` (the README links them).

use std::path::PathBuf;

use support::browser::Browser;
use support::fake_models::Script;

use crate::helpers::{Backend, PRICED_MODEL, TestDb, app_with, backend_tests};

const BOT: &str = "user-bot-token.1";
const GUILD: &str = "111";
/// What the fake model answers: Markdown, with markup that must stay text.
const RESULT: &str =
    "**Launch note ready.**\n\n<script>alert(1)</script> <img src=x onerror=\"window.__xss=1\">";

backend_tests! { db;
    a_person_runs_an_agent_from_the_dashboard,
}

async fn a_person_runs_an_agent_from_the_dashboard(db: TestDb) {
    let backend = db.backend;
    let app = app_with(db, |o| o.default_model = Some(PRICED_MODEL.into())).await;
    let Some(browser) = Browser::start().await else { return };
    app.options.models.repeat_for("priced", Script::Answer(RESULT.into()));
    let at = |path: &str| format!("{}{path}", app.address);

    // Register: straight onto the (empty) overview.
    browser.goto(&at("/")).await;
    browser.wait_for_path("/login").await;
    browser.click("a[href='/register']").await;
    browser.wait_for_path("/register").await;
    browser.fill("name", "Dana").await;
    browser.fill("email", "dana@example.com").await;
    browser.fill("password", "correct horse battery").await;
    browser.click("form[action='/register'] button[type=submit]").await;
    browser.wait_for_path("/").await;
    browser.find("#agent-rows").await;

    // Onboard from the first template, not started yet.
    browser.click("nav a[href='/onboarding']").await;
    browser.wait_for_path("/onboarding").await;
    browser.fill("company_name", "Acme").await;
    browser.click("input[name=start]").await;
    browser.click("form[action='/onboarding'] button[type=submit]").await;
    browser
        .until("the onboarded agent's page", || async {
            browser.path().await.starts_with("/agents/")
        })
        .await;
    let agent_path = browser.path().await;
    let agent = agent_path.trim_start_matches("/agents/").to_owned();
    assert_eq!(browser.text("#agent-status").await, "idle");

    // Add a task, then start the agent; the page then only refreshes its live part.
    browser.fill("title", "Write the launch note").await;
    browser.click("form[action$='/tasks'] button[type=submit]").await;
    browser
        .until("the task in the backlog", || async {
            browser.text("#backlog").await.contains("Write the launch note")
        })
        .await;
    browser.click("form[action$='/do/start'] button").await;
    browser
        .until("the agent active", || async { browser.text("#agent-status").await == "active" })
        .await;
    browser.eval("window.__same_page = 'yes'; return null;").await;
    browser
        .until("both tasks complete on the page", || async {
            let done = browser
                .eval(
                    "return document.querySelectorAll('#backlog tr[data-status=complete]').length",
                )
                .await;
            done.as_u64() == Some(2)
        })
        .await;
    assert_eq!(browser.eval("return window.__same_page").await, "yes", "the page was not reloaded");

    // The result is Markdown made safe: bold rendered, markup shown as text, nothing run.
    let result = browser.text("#backlog tr[data-status=complete] .result").await;
    assert!(result.contains("Launch note ready."), "{result}");
    assert!(result.contains("<script>alert(1)</script>"), "the markup is shown as text: {result}");
    let in_result = browser
        .eval("return document.querySelectorAll('#backlog .result script, #backlog .result img, #backlog .result strong').length")
        .await;
    assert_eq!(in_result.as_u64(), Some(2), "two <strong>, no <script>, no <img>");
    assert!(browser.client.get_alert_text().await.is_err(), "no alert opened");
    assert!(browser.eval("return window.__xss === undefined").await.as_bool().unwrap());

    // A task's steps.
    let screenshots = screenshot_dir(backend);
    shoot(&browser, &screenshots, "agent").await;
    browser.click("#backlog tr[data-status=complete] td a").await;
    browser.find("#steps li.step-model").await;
    assert!(browser.text("#task-result").await.contains("Launch note ready."));
    assert_eq!(browser.text("#task-status").await, "complete");
    shoot(&browser, &screenshots, "task").await;

    // Discord: connect with a bot token, then map the agent to a channel.
    app.discord.add_bot(BOT, "AcmeBot");
    app.discord.add_guild(GUILD, "Acme", &[BOT]);
    browser.click("nav a[href='/discord']").await;
    browser.wait_for_path("/discord").await;
    browser.fill("guild_id", GUILD).await;
    browser.fill("bot_token", BOT).await;
    browser.click("form[action='/discord/connect'] button[type=submit]").await;
    browser.wait_for_path(&format!("/discord/{GUILD}")).await;
    browser.click(&format!("select[name=channel_id] option[value='{GUILD}2']")).await;
    browser.click("form[action$='/map'] button[type=submit]").await;
    browser
        .until("the mapping listed", || async {
            browser.text("#guild-mappings").await.contains(&format!("{agent} posts to #updates"))
        })
        .await;
    let mapped = app
        .db
        .count("SELECT COUNT(*) FROM chat_mappings WHERE channel_id = $1", &[&format!("{GUILD}2")])
        .await;
    assert_eq!(mapped, 1);
    browser.click("a[href='/discord']").await;
    browser.wait_for_path("/discord").await;
    shoot(&browser, &screenshots, "discord").await;

    browser.click("nav a[href='/usage']").await;
    browser.find("#plan").await;
    shoot(&browser, &screenshots, "usage").await;
    browser.click("nav a[href='/']").await;
    browser
        .until("the overview's counts", || async {
            browser.text(&format!("tr[data-agent='{agent}'] .done-count")).await == "2"
        })
        .await;
    shoot(&browser, &screenshots, "agents").await;
    if let Some(dir) = &screenshots {
        browser.set_size(390, 844).await;
        browser.goto(&at("/")).await;
        browser.find("#agent-rows").await;
        browser.screenshot(&dir.join("agents-phone.png")).await;
        browser.goto(&at(&agent_path)).await;
        browser.find("#backlog").await;
        browser.screenshot(&dir.join("agent-phone.png")).await;
        browser.set_size(1280, 900).await;
    }

    // A form posted from the page without its CSRF token is refused and creates nothing; another
    // user's agent is not found.
    let forged = browser
        .eval(
            "return fetch('/agents', {method: 'POST', headers: {'content-type': \
             'application/x-www-form-urlencoded'}, body: 'name=X&id=forged&channel=c&role_prompt=r'}) \
             .then(r => r.status)",
        )
        .await;
    assert_eq!(forged.as_u64(), Some(403));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents WHERE id = 'forged'", &[]).await, 0);
    let eve = app.register("eve@example.com").await;
    app.create_agent(&eve, "secret").await;
    browser.goto(&at("/agents/secret")).await;
    assert!(
        browser.text("main").await.contains("No agent with id 'secret'."),
        "{}",
        browser.text("main").await
    );
    assert_eq!(
        browser.eval("return document.querySelector('[data-code]').dataset.code").await,
        "agent_not_found"
    );
    browser.goto(&at("/")).await;
    browser.find("#agent-rows").await;

    // Sign out; the pages are then refused.
    let session =
        browser.client.get_named_cookie("agentd_session").await.expect("a session cookie");
    assert_eq!(session.http_only(), Some(true));
    browser.click("#sign-out").await;
    browser.wait_for_path("/login").await;
    browser.goto(&at(&agent_path)).await;
    browser.wait_for_path("/login").await;
    let reused = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(at(&agent_path))
        .header("cookie", format!("agentd_session={}", session.value()))
        .send()
        .await
        .unwrap();
    assert_eq!(reused.status(), 303, "the signed-out session is revoked");
}

/// Screenshots are written by the SQLite run only (the pages are the same on both backends).
fn screenshot_dir(backend: Backend) -> Option<PathBuf> {
    (backend == Backend::Sqlite).then(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

async fn shoot(browser: &Browser, dir: &Option<PathBuf>, name: &str) {
    if let Some(dir) = dir {
        browser.screenshot(&dir.join(format!("{name}.png"))).await;
    }
}
