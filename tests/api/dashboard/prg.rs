//! Post, redirect, get: a GET on any form's address shows a page (never a 405), a save goes
//! back to its section with a message shown once, and a refused form comes back with every
//! field as entered. Also what a form says before a first try (the password rule) and a task's
//! description rendered like its result.

use agentcore::domain::user::Password;

use super::Visitor;
use crate::helpers::{TestApp, TestDb, app_with, backend_tests};

backend_tests! { app;
    a_get_on_a_forms_address_goes_back_to_the_form,
    a_save_goes_back_to_its_section_and_says_so_once,
    a_refused_settings_form_keeps_every_field_as_entered,
    the_register_form_states_the_password_rule_first,
    a_tasks_description_is_rendered_markdown_made_safe,
}

backend_tests! { db;
    a_waiting_task_offers_approve_and_deny_on_its_row_and_shows_its_call_first,
}

async fn a_get_on_a_forms_address_goes_back_to_the_form(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let task = app.add_task(&dana.api_user(), "writer", "Draft", 0).await;
    let task = format!("/agents/writer/tasks/{}", task["id"].as_str().unwrap());
    for (address, back) in [
        ("/agents", "/"),
        ("/agents/writer/settings", "/agents/writer#settings"),
        ("/agents/writer/memory", "/agents/writer#memory"),
        ("/agents/writer/schedules", "/agents/writer#schedules"),
        ("/agents/writer/tasks", "/agents/writer#add-task"),
        ("/agents/writer/do/start", "/agents/writer"),
        ("/agents/writer/do/vacation", "/agents/writer"),
        (&format!("{task}/retry"), &task),
        (&format!("{task}/approve"), &task),
        ("/discord/connect", "/discord"),
        ("/discord/111/test", "/discord/111"),
        ("/usage/budget", "/usage"),
        ("/workspace", "/"),
        ("/workspaces", "/team"),
        ("/team/name", "/team"),
        ("/team/invites", "/team"),
        ("/team/keys", "/team"),
        ("/logout", "/"),
    ] {
        let page = dana.get(address).await;
        assert_eq!((page.status, page.location.as_deref()), (303, Some(back)), "{address}");
    }
    let agent = app.get("/api/agents/writer", &dana.api_user()).await;
    assert_eq!(agent.assert_status(200)["status"], "idle", "a GET started nothing");
    assert_eq!(dana.get("/agents/writer/do/explode").await.status, 404);
}

async fn a_save_goes_back_to_its_section_and_says_so_once(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let saved = dana.post("/agents/writer/memory", &[("memory", "Customer: Acme.")]).await;
    assert_eq!((saved.status, saved.location.as_deref()), (303, Some("/agents/writer#memory")));
    let cookie = saved
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|v| v.starts_with("agentd_flash="))
        .expect("the message's cookie");
    assert!(cookie.contains("Max-Age=60") && cookie.contains("HttpOnly"), "bounded: {cookie}");
    let page = dana.get("/agents/writer").await;
    assert!(
        page.body.contains("id=\"flash\" role=\"status\"><p>Memory saved.</p></div>"),
        "{}",
        page.body
    );
    assert!(!dana.cookies.contains_key("agentd_flash"), "read once, then cleared");
    let again = dana.get("/agents/writer").await;
    assert!(again.body.contains("id=\"flash\" role=\"status\"></div>"), "{}", again.body);

    // htmx cannot follow a redirect to a section: it is told to go there itself.
    let token = dana.csrf.clone().unwrap();
    let answer = reqwest::Client::new()
        .post(format!("{}/agents/writer/memory", app.address))
        .header("cookie", format!("agentd_session={}", dana.cookies["agentd_session"]))
        .header("hx-request", "true")
        .header("x-csrf-token", token)
        .form(&[("memory", "Customer: Acme Corp.")])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["hx-location"], "/agents/writer#memory");
}

async fn a_refused_settings_form_keeps_every_field_as_entered(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let refused = dana
        .post(
            "/agents/writer/settings",
            &[
                ("name", "Chief Writer"),
                ("channel", "news"),
                ("model", ""),
                ("max_steps", "many"),
                ("throttle_seconds", "1.5"),
                ("budget_monthly_usd", ""),
                ("tools", "http_fetch"),
                ("role_prompt", "Writes the news."),
            ],
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let body = &refused.body;
    assert!(body.contains("data-field=\"max_steps\""), "{body}");
    assert!(body.contains("value=\"many\""), "{body}");
    assert!(body.contains("value=\"Chief Writer\""), "{body}");
    assert!(body.contains("value=\"http_fetch\" checked>"), "the ticked box stays ticked: {body}");
    assert!(!body.contains("value=\"memory\" checked>"), "an unticked one stays unticked");
    assert!(body.contains(">Writes the news.</textarea>"), "{body}");
    assert!(body.contains("<details id=\"settings\" open>"), "the settings stay open: {body}");
    let agent = app.get("/api/agents/writer", &dana.api_user()).await;
    assert_eq!(agent.assert_status(200)["name"], "Writer", "nothing saved");

    // A refused schedule keeps its selects.
    let schedule = dana
        .post(
            "/agents/writer/schedules",
            &[("cron", "not cron"), ("title", "Morning"), ("catch_up", "run_once")],
        )
        .await;
    assert_eq!(schedule.status, 400, "{}", schedule.body);
    assert!(schedule.body.contains("value=\"run_once\" selected"), "{}", schedule.body);
}

async fn the_register_form_states_the_password_rule_first(app: TestApp) {
    let mut visitor = Visitor::new(&app);
    let page = visitor.get("/register").await;
    let rule = format!("({} to {} characters)", Password::MIN_CHARS, Password::MAX_CHARS);
    assert!(page.body.contains(&rule), "{}", page.body);
    assert!(page.body.contains(&format!("minlength=\"{}\"", Password::MIN_CHARS)), "{}", page.body);
}

async fn a_tasks_description_is_rendered_markdown_made_safe(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let added = dana
        .post(
            "/agents/writer/tasks",
            &[
                ("title", "Draft"),
                ("description", "**Friday** please\n\n<script>alert(1)</script>"),
            ],
        )
        .await;
    assert_eq!(added.status, 303, "{}", added.body);
    let tasks = app.get("/api/agents/writer/backlog", &dana.api_user()).await;
    let id = tasks.assert_status(200)["tasks"][0]["id"].as_str().unwrap().to_owned();
    let page = dana.get(&format!("/agents/writer/tasks/{id}")).await;
    let description = page.body.split("id=\"task-description\">").nth(1).expect("shown");
    let description = description.split("</div>").next().unwrap();
    assert!(description.contains("<strong>Friday</strong> please"), "{description}");
    assert!(description.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{description}");
    assert!(!description.contains("<script"), "{description}");
}

async fn a_waiting_task_offers_approve_and_deny_on_its_row_and_shows_its_call_first(db: TestDb) {
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let mut dana = Visitor::new(&app);
    dana.register("approver@example.com").await;
    let (task, page) =
        crate::interactions::approvals::waiting_fetch_for(&app, &dana.api_user()).await;
    let path = format!("/agents/ops/tasks/{task}");

    let shown = dana.get(&path).await.body;
    let call = shown.find("id=\"approval-call\"").expect("the call is shown");
    let approve = shown.find(&format!("action=\"{path}/approve\"")).expect("approve");
    let deny = shown.find(&format!("action=\"{path}/deny\"")).expect("deny");
    assert!(call < approve && call < deny, "the call comes before its buttons");
    let tool = shown.split("id=\"approval-tool\">").nth(1).unwrap();
    assert!(tool.starts_with("http_fetch</code>"), "{tool}");
    let arguments = shown.split("id=\"approval-arguments\">").nth(1).unwrap();
    assert!(arguments.contains("/status"), "the arguments: {arguments}");

    let agent = dana.get("/agents/ops").await.body;
    let row = agent.split(&format!("data-task=\"{task}\"")).nth(1).unwrap();
    let row = row.split("</tr>").next().unwrap();
    assert!(row.contains(&format!("action=\"{path}/approve\"")), "{row}");
    assert!(row.contains(&format!("action=\"{path}/deny\"")), "{row}");
    let approved = dana.post(&format!("{path}/approve"), &[]).await;
    assert_eq!(approved.location.as_deref(), Some("/agents/ops#backlog"));
    crate::helpers::eventually(
        std::time::Duration::from_secs(20),
        "the task completes",
        || async {
            let reply = app.get(&format!("/api/agents/ops/backlog/{task}"), &dana.api_user()).await;
            reply.assert_status(200)["status"] == "complete"
        },
    )
    .await;
    assert_eq!(page.hits(), 1, "approved: the fetch ran once");
}
