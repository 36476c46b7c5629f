//! Every dashboard form does what the API's own request does: each is posted as a browser
//! would, and the result read back through the JSON API.

use serde_json::Value;

use super::Visitor;
use crate::helpers::{TestApp, TestDb, app_with, backend_tests};

backend_tests! { app;
    backlog_forms_edit_retry_and_delete_tasks,
    agent_forms_change_settings_memory_schedules_and_status,
    activity_pages_go_back_in_time,
    discord_forms_connect_map_test_unmap_install_and_disconnect,
    the_usage_page_and_the_budget_form,
    onboarding_checks_everything_before_creating_anything,
}

backend_tests! { db;
    a_task_awaiting_approval_is_approved_from_its_page,
    an_agents_mcp_servers_are_ticked_in_its_settings,
}

async fn api(app: &TestApp, visitor: &Visitor, path: &str) -> Value {
    app.get(path, &visitor.api_user()).await.assert_status(200).clone()
}

async fn backlog_forms_edit_retry_and_delete_tasks(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let added = dana
        .post("/agents/writer/tasks", &[("title", "Draft"), ("priority", "2"), ("description", "")])
        .await;
    assert_eq!(added.location.as_deref(), Some("/agents/writer#add-task"));
    let tasks = api(&app, &dana, "/api/agents/writer/backlog").await;
    let task = tasks["tasks"][0].clone();
    assert_eq!((task["title"].as_str(), task["priority"].as_i64()), (Some("Draft"), Some(2)));
    let id = task["id"].as_str().unwrap().to_owned();
    let path = format!("/agents/writer/tasks/{id}");

    let page = dana.get(&path).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("value=\"Draft\""), "the edit form is filled in");
    let edited = dana
        .post(&path, &[("title", "Final draft"), ("priority", "1"), ("description", "By Friday")])
        .await;
    assert_eq!(edited.location.as_deref(), Some(path.as_str()));
    let task = api(&app, &dana, &format!("/api/agents/writer/backlog/{id}")).await;
    assert_eq!(task["title"], "Final draft");
    assert_eq!(task["description"], "By Friday");
    assert_eq!(task["priority"], 1);
    let refused = dana.post(&path, &[("title", ""), ("priority", "1")]).await;
    assert_eq!(refused.status, 400);
    assert!(refused.body.contains("data-field=\"title\""), "{}", refused.body);

    app.force_task_status(&id, "failed").await;
    assert!(
        dana.get(&path).await.body.contains(&format!("{path}/retry")),
        "a failed task offers retry"
    );
    assert_eq!(dana.post(&format!("{path}/retry"), &[]).await.status, 303);
    assert_eq!(
        api(&app, &dana, &format!("/api/agents/writer/backlog/{id}")).await["status"],
        "queued"
    );
    assert_eq!(
        dana.post(&format!("{path}/delete"), &[]).await.location.as_deref(),
        Some("/agents/writer#backlog")
    );
    app.get(&format!("/api/agents/writer/backlog/{id}"), &dana.api_user())
        .await
        .assert_error(404, "task_not_found");
    assert_eq!(dana.post(&format!("{path}/explode"), &[]).await.status, 404);
}

async fn agent_forms_change_settings_memory_schedules_and_status(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let settings = dana
        .post(
            "/agents/writer/settings",
            &[
                ("name", "Chief Writer"),
                ("channel", "news"),
                ("model", ""),
                ("max_steps", "7"),
                ("throttle_seconds", "1.5"),
                ("budget_monthly_usd", "12.5"),
                ("tools", "http_fetch"),
                ("tools", "memory"),
                ("role_prompt", "Writes the news."),
            ],
        )
        .await;
    assert_eq!(settings.location.as_deref(), Some("/agents/writer#settings"), "{}", settings.body);
    let agent = api(&app, &dana, "/api/agents/writer").await;
    assert_eq!(agent["name"], "Chief Writer");
    assert_eq!(agent["channel"], "news");
    assert_eq!(agent["max_steps"], 7);
    assert_eq!(agent["throttle_seconds"], 1.5);
    assert_eq!(agent["budget_monthly_usd"], 12.5);
    assert_eq!(agent["role_prompt"], "Writes the news.");
    assert_eq!(agent["tools"], serde_json::json!(["http_fetch", "memory"]));
    let cleared = dana
        .post(
            "/agents/writer/settings",
            &[
                ("name", "Chief Writer"),
                ("channel", "news"),
                ("role_prompt", "Writes."),
                ("budget_monthly_usd", ""),
            ],
        )
        .await;
    assert_eq!(cleared.status, 303);
    let agent = api(&app, &dana, "/api/agents/writer").await;
    assert!(agent["budget_monthly_usd"].is_null());
    assert_eq!(agent["tools"], serde_json::json!([]), "no box ticked is no tools");
    let refused = dana
        .post(
            "/agents/writer/settings",
            &[("name", "W"), ("channel", "news"), ("max_steps", "lots")],
        )
        .await;
    assert_eq!(refused.status, 400);
    assert!(refused.body.contains("data-field=\"max_steps\""), "{}", refused.body);

    assert_eq!(
        dana.post("/agents/writer/memory", &[("memory", "Customer: Acme.")]).await.status,
        303
    );
    assert_eq!(api(&app, &dana, "/api/agents/writer/memory").await["memory"], "Customer: Acme.");
    assert!(dana.get("/agents/writer").await.body.contains("Customer: Acme."));

    let schedule = dana
        .post(
            "/agents/writer/schedules",
            &[
                ("cron", "0 9 * * 1-5"),
                ("timezone", "Europe/Berlin"),
                ("title", "Morning news"),
                ("catch_up", "skip"),
                ("overlap", "skip_if_active"),
            ],
        )
        .await;
    assert_eq!(schedule.status, 303, "{}", schedule.body);
    let schedules = api(&app, &dana, "/api/agents/writer/schedules").await["schedules"].clone();
    let id = schedules[0]["id"].as_str().unwrap().to_owned();
    let next = schedules[0]["next_runs"][0]["local"].as_str().unwrap();
    let page = dana.get("/agents/writer").await.body;
    assert!(
        page.contains("Morning news") && page.contains(&next[..16].replace('T', " ")),
        "next runs shown"
    );
    assert_eq!(dana.post(&format!("/agents/writer/schedules/{id}/disable"), &[]).await.status, 303);
    assert_eq!(
        api(&app, &dana, &format!("/api/agents/writer/schedules/{id}")).await["enabled"],
        false
    );
    assert_eq!(dana.post(&format!("/agents/writer/schedules/{id}/delete"), &[]).await.status, 303);
    assert_eq!(
        api(&app, &dana, "/api/agents/writer/schedules").await["schedules"],
        serde_json::json!([])
    );

    for (command, fields, status) in [
        ("start", vec![], "active"),
        ("vacation", vec![("enabled", "true")], "vacation"),
        ("vacation", vec![("enabled", "false")], "active"),
        ("stop", vec![], "idle"),
    ] {
        let done = dana.post(&format!("/agents/writer/do/{command}"), &fields).await;
        assert_eq!(done.status, 303, "{command}: {}", done.body);
        assert_eq!(api(&app, &dana, "/api/agents/writer").await["status"], status, "{command}");
    }
    assert_eq!(dana.post("/agents/writer/do/delete", &[]).await.location.as_deref(), Some("/"));
    app.get("/api/agents/writer", &dana.api_user()).await.assert_error(404, "agent_not_found");
}

async fn activity_pages_go_back_in_time(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    for n in 0..35 {
        app.add_task(&dana.api_user(), "writer", &format!("Task {n}"), 0).await;
    }
    let first = dana.get("/agents/writer").await.body;
    assert!(first.contains("Task &#39;Task 34&#39; added"), "newest first");
    assert!(!first.contains("Agent &#39;Writer&#39; created."), "the oldest is on a later page");
    let older =
        first.split("href=\"/agents/writer?before=").nth(1).expect("a link to older entries");
    let before = older.split('"').next().unwrap().replace("&amp;", "&");
    let second = dana.get(&format!("/agents/writer?before={before}")).await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert!(second.body.contains("Agent &#39;Writer&#39; created."), "{}", second.body);
    assert!(
        !second.body.contains("href=\"/agents/writer?before="),
        "nothing older than the first entry"
    );
    assert_eq!(dana.get("/agents/writer?before=yesterday").await.status, 400);
}

async fn discord_forms_connect_map_test_unmap_install_and_disconnect(app: TestApp) {
    const BOT: &str = "user-bot-token.1";
    app.discord.add_bot(BOT, "AcmeBot");
    app.discord.add_guild("111", "Acme", &[BOT]);
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;

    let wrong = dana
        .post("/discord/connect", &[("guild_id", "111"), ("bot_token", "not-a-real-token")])
        .await;
    assert_eq!(wrong.status, 400);
    assert!(!wrong.body.contains("not-a-real-token"), "a token is never shown back");
    let connected = dana.post("/discord/connect", &[("guild_id", "111"), ("bot_token", BOT)]).await;
    assert_eq!(connected.location.as_deref(), Some("/discord/111"), "{}", connected.body);
    let guild = dana.get("/discord/111").await.body;
    assert!(
        guild.contains("#general") && guild.contains("#updates") && !guild.contains("#voice"),
        "{guild}"
    );

    assert_eq!(
        dana.post("/discord/111/map", &[("agent_id", "writer"), ("channel_id", "1111")])
            .await
            .status,
        303
    );
    let mappings = api(&app, &dana, "/api/chat/mappings").await["mappings"].clone();
    assert_eq!(mappings[0]["channel_name"], "general");
    let bad =
        dana.post("/discord/111/map", &[("agent_id", "writer"), ("channel_id", "1113")]).await;
    assert_eq!(bad.status, 400, "a voice channel is refused: {}", bad.body);
    let tested = dana.post("/discord/111/test", &[]).await;
    assert!(tested.body.contains("The bot can reach Acme."), "{}", tested.body);
    assert_eq!(
        dana.post("/discord/unmap", &[("agent_id", "writer")]).await.location.as_deref(),
        Some("/discord")
    );
    assert_eq!(api(&app, &dana, "/api/chat/mappings").await["mappings"], serde_json::json!([]));

    // The OAuth install: the page links to Discord; Discord sends the browser back here.
    let page = dana.get("/discord").await.body;
    assert!(page.contains("Add the service's bot to a server"), "{page}");
    let state = api(&app, &dana, "/api/chat/oauth-url").await["state"].as_str().unwrap().to_owned();
    app.discord.add_guild("444", "Installed Guild", &[]);
    app.discord.issue_code("code-1", "444");
    let back = dana.get(&format!("/discord/callback?code=code-1&state={state}&guild_id=444")).await;
    assert_eq!(back.location.as_deref(), Some("/discord/444"), "{}", back.body);
    let forged = dana.get("/discord/callback?code=code-1&state=forged").await;
    assert_eq!(forged.status, 200);
    assert!(forged.body.contains("class=\"notice\""), "the refusal is said: {}", forged.body);
    // A cross-site link with someone else's code and no state connects nothing.
    app.discord.add_guild("555", "Attacker Guild", &[]);
    app.discord.issue_code("code-2", "555");
    let planted = dana.get("/discord/callback?code=code-2&guild_id=555").await;
    assert_eq!(planted.status, 200);
    assert!(planted.body.contains("class=\"notice\""), "{}", planted.body);
    let connections = api(&app, &dana, "/api/chat/connections").await["connections"].clone();
    let guilds: Vec<&str> =
        connections.as_array().unwrap().iter().filter_map(|c| c["guild_id"].as_str()).collect();
    assert!(!guilds.contains(&"555"), "{connections}");

    assert_eq!(
        dana.post("/discord/111/disconnect", &[]).await.location.as_deref(),
        Some("/discord")
    );
    let connections = api(&app, &dana, "/api/chat/connections").await["connections"].clone();
    assert_eq!(connections.as_array().unwrap().len(), 1, "{connections}");
    assert_eq!(dana.get("/discord/111").await.status, 404);
}

async fn the_usage_page_and_the_budget_form(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let page = dana.get("/usage").await;
    assert_eq!(page.status, 200);
    for id in ["usage-agent", "usage-model", "usage-day", "plan"] {
        assert!(page.body.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert!(page.body.contains("1 of"), "the plan's agent count: {}", page.body);
    assert_eq!(dana.post("/usage/budget", &[("monthly_usd", "25")]).await.status, 303);
    assert_eq!(api(&app, &dana, "/api/budget").await["monthly_usd"], 25.0);
    let refused = dana.post("/usage/budget", &[("monthly_usd", "-3")]).await;
    assert_eq!(refused.status, 400);
    assert!(refused.body.contains("data-field=\"monthly_usd\""), "{}", refused.body);
    assert_eq!(dana.post("/usage/budget", &[("monthly_usd", "")]).await.status, 303);
    assert!(api(&app, &dana, "/api/budget").await["monthly_usd"].is_null());
    assert_eq!(dana.get("/usage?from=last+week").await.status, 400);
}

async fn onboarding_checks_everything_before_creating_anything(app: TestApp) {
    const BOT: &str = "user-bot-token.1";
    app.discord.add_bot(BOT, "AcmeBot");
    app.discord.add_guild("111", "Acme", &[BOT]);
    let mut dana = Visitor::new(&app);
    dana.register("dana@example.com").await;
    dana.post("/discord/connect", &[("guild_id", "111"), ("bot_token", BOT)]).await;

    let refused = dana
        .post(
            "/onboarding",
            &[
                ("role_template", "support"),
                ("company_name", "Acme"),
                ("task_title", ""),
                ("guild_id", "111"),
                ("channel_id", "general"),
            ],
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("data-field=\"channel_id\""), "{}", refused.body);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents", &[]).await, 0, "nothing was created");

    let done = dana
        .post(
            "/onboarding",
            &[
                ("role_template", "support"),
                ("company_name", "Acme"),
                ("task_title", "Answer the backlog"),
                ("task_description", "Oldest first"),
                ("guild_id", "111"),
                ("channel_id", "1112"),
                ("start", "on"),
            ],
        )
        .await;
    let agent =
        done.location.expect("to the agent's page").trim_start_matches("/agents/").to_owned();
    let detail = api(&app, &dana, &format!("/api/agents/{agent}")).await;
    assert_eq!(detail["status"], "active");
    assert_eq!(detail["backlog"][0]["title"], "Answer the backlog");
    let mappings = api(&app, &dana, "/api/chat/mappings").await["mappings"].clone();
    assert_eq!(
        (mappings[0]["agent_id"].as_str(), mappings[0]["channel_id"].as_str()),
        (Some(agent.as_str()), Some("1112"))
    );
}

async fn an_agents_mcp_servers_are_ticked_in_its_settings(db: TestDb) {
    use agentcore::mcp::{McpConfig, McpServerConfig, McpTransport};
    let mut config = McpConfig::default();
    // Never connected: the settings only name the server.
    let transport =
        McpTransport::Http { url: "http://127.0.0.1:9/mcp".into(), headers: Default::default() };
    config.servers.insert(
        agentcore::domain::mcp::McpServerName::parse("docs").unwrap(),
        McpServerConfig { transport, timeout: McpServerConfig::DEFAULT_TIMEOUT },
    );
    let app = app_with(db, |o| o.mcp = config).await;
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let page = dana.get("/agents/writer").await.body;
    assert!(page.contains("name=\"mcp_servers\" value=\"docs\" >"), "offered, not ticked: {page}");
    let base = [("name", "Writer"), ("channel", "writing"), ("role_prompt", "Writes.")];
    let ticked = dana
        .post("/agents/writer/settings", &[base.as_slice(), &[("mcp_servers", "docs")]].concat())
        .await;
    assert_eq!(ticked.status, 303, "{}", ticked.body);
    assert_eq!(
        api(&app, &dana, "/api/agents/writer").await["mcp_servers"],
        serde_json::json!(["docs"])
    );
    assert!(dana.get("/agents/writer").await.body.contains("value=\"docs\" checked"));
    let unknown = dana
        .post("/agents/writer/settings", &[base.as_slice(), &[("mcp_servers", "nowhere")]].concat())
        .await;
    assert_eq!(unknown.status, 400, "{}", unknown.body);
    assert_eq!(dana.post("/agents/writer/settings", &base).await.status, 303);
    assert_eq!(api(&app, &dana, "/api/agents/writer").await["mcp_servers"], serde_json::json!([]));
}

async fn a_task_awaiting_approval_is_approved_from_its_page(db: TestDb) {
    let app = app_with(db, |o| o.tools.http.allow_private = true).await;
    let mut dana = Visitor::new(&app);
    dana.register("approver@example.com").await;
    let (task, page) =
        crate::interactions::approvals::waiting_fetch_for(&app, &dana.api_user()).await;
    let path = format!("/agents/ops/tasks/{task}");
    let shown = dana.get(&path).await;
    assert!(shown.body.contains("awaiting_approval"), "{}", shown.body);
    assert!(shown.body.contains(&format!("{path}/approve")), "the page offers approve");
    assert_eq!(dana.post(&format!("{path}/approve"), &[]).await.status, 303);
    crate::helpers::eventually(
        std::time::Duration::from_secs(20),
        "the task completes",
        || async {
            api(&app, &dana, &format!("/api/agents/ops/backlog/{task}")).await["status"]
                == "complete"
        },
    )
    .await;
    assert_eq!(page.hits(), 1, "approved: the fetch ran once");
    let again = dana.post(&format!("{path}/deny"), &[]).await;
    assert_eq!(again.status, 409, "decided already");
}
