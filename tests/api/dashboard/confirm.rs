//! Confirmation before every destructive action, without JavaScript: each destructive button
//! is a link to its action's own address, whose GET page says what will be lost and posts to
//! that address; nothing is lost until it is posted, and a message says what was done.

use serde_json::Value;

use super::{Page, Visitor};
use crate::helpers::{TestApp, backend_tests};

backend_tests! { app;
    deleting_an_agent_asks_first_and_says_what_it_removes,
    a_task_or_a_schedule_is_deleted_or_cancelled_only_once_confirmed,
    team_and_discord_removals_ask_first,
}

async fn api(app: &TestApp, visitor: &Visitor, path: &str) -> Value {
    app.get(path, &visitor.api_user()).await.assert_status(200).clone()
}

/// `page` links to `address` (no form posts there), and the address's GET asks: a form posting
/// to it with the CSRF token, and a way back to `back`.
async fn asks(visitor: &mut Visitor, page: &str, address: &str, back: &str) -> Page {
    let shown = visitor.get(page).await;
    assert!(shown.body.contains(&format!("href=\"{address}\"")), "{page} links: {}", shown.body);
    let action = address.split('?').next().unwrap();
    assert!(!shown.body.contains(&format!("action=\"{action}\"")), "no one-click form");
    let asked = visitor.get(address).await;
    assert_eq!(asked.status, 200, "{address}: {}", asked.body);
    let body = &asked.body;
    assert!(body.contains(&format!("action=\"{action}\"")), "{body}");
    assert!(body.contains("name=\"csrf\" value=\""), "{body}");
    assert!(body.contains("id=\"confirm-no\">"), "{body}");
    assert!(body.contains(&format!("href=\"{back}\"")), "back to {back}: {body}");
    asked
}

/// The message the next page shows once, in the `role=status` region.
async fn message(visitor: &mut Visitor, path: &str) -> String {
    let page = visitor.get(path).await;
    let region = page.body.split("id=\"flash\" role=\"status\">").nth(1).expect("a status region");
    let text = region.split("</div>").next().unwrap().to_owned();
    let again = visitor.get(path).await;
    assert!(again.body.contains("id=\"flash\" role=\"status\"></div>"), "shown once");
    text
}

async fn deleting_an_agent_asks_first_and_says_what_it_removes(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    for title in ["One", "Two"] {
        app.add_task(&dana.api_user(), "writer", title, 0).await;
    }
    let asked =
        asks(&mut dana, "/agents/writer", "/agents/writer/do/delete", "/agents/writer").await;
    assert!(asked.body.contains("Delete the agent Writer (writer)?"), "{}", asked.body);
    assert!(asked.body.contains("2 tasks in its backlog (2 queued"), "{}", asked.body);
    assert!(asked.body.contains("its whole activity log"), "{}", asked.body);
    assert_eq!(api(&app, &dana, "/api/agents/writer").await["id"], "writer", "asking kept it");

    let deleted = dana.post("/agents/writer/do/delete", &[]).await;
    assert_eq!((deleted.status, deleted.location.as_deref()), (303, Some("/")));
    let said = message(&mut dana, "/").await;
    assert!(said.contains("The agent writer was deleted"), "{said}");
    app.get("/api/agents/writer", &dana.api_user()).await.assert_error(404, "agent_not_found");
}

async fn a_task_or_a_schedule_is_deleted_or_cancelled_only_once_confirmed(app: TestApp) {
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let task = app.add_task(&dana.api_user(), "writer", "Draft", 0).await;
    let task = task["id"].as_str().unwrap().to_owned();
    let path = format!("/agents/writer/tasks/{task}");

    // From the backlog's row, and from the task's own page (which it goes back to).
    let asked =
        asks(&mut dana, "/agents/writer", &format!("{path}/delete"), "/agents/writer#backlog")
            .await;
    assert!(asked.body.contains("Delete the task “Draft”?"), "{}", asked.body);
    let cancel = format!("{path}/cancel?to=task");
    let asked = asks(&mut dana, &path, &cancel, &path).await;
    assert!(asked.body.contains("name=\"to\" value=\"task\""), "{}", asked.body);
    assert!(asked.body.contains("Keep the task"), "{}", asked.body);
    let status = api(&app, &dana, &format!("/api/agents/writer/backlog/{task}")).await;
    assert_eq!(status["status"], "queued", "asking changed nothing");
    let cancelled = dana.post(&format!("{path}/cancel"), &[("to", "task")]).await;
    assert_eq!(cancelled.location.as_deref(), Some(path.as_str()));
    assert!(message(&mut dana, &path).await.contains("“Draft” was cancelled"));
    let deleted = dana.post(&format!("{path}/delete"), &[]).await;
    assert_eq!(deleted.location.as_deref(), Some("/agents/writer#backlog"));
    assert!(message(&mut dana, "/agents/writer").await.contains("“Draft” was deleted"));

    let added =
        dana.post("/agents/writer/schedules", &[("cron", "0 9 * * *"), ("title", "Morning")]).await;
    assert_eq!(added.location.as_deref(), Some("/agents/writer#schedules"), "{}", added.body);
    let id = api(&app, &dana, "/api/agents/writer/schedules").await["schedules"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let address = format!("/agents/writer/schedules/{id}/delete");
    let asked = asks(&mut dana, "/agents/writer", &address, "/agents/writer#schedules").await;
    assert!(asked.body.contains("Delete the schedule “Morning”?"), "{}", asked.body);
    let kept = api(&app, &dana, "/api/agents/writer/schedules").await["schedules"].clone();
    assert_eq!(kept.as_array().unwrap().len(), 1);
    assert_eq!(dana.post(&address, &[]).await.status, 303);
    assert!(message(&mut dana, "/agents/writer").await.contains("“Morning” was deleted"));
}

async fn team_and_discord_removals_ask_first(app: TestApp) {
    const BOT: &str = "user-bot-token.1";
    app.discord.add_bot(BOT, "AcmeBot");
    app.discord.add_guild("111", "Acme", &[BOT]);
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let made = dana.post("/workspaces", &[("name", "Ops")]).await;
    assert_eq!(made.status, 303, "{}", made.body);
    dana.get("/team").await;

    let invite = dana.post("/team/invites", &[("role", "member"), ("email", "bob@example.com")]);
    assert_eq!(invite.await.status, 200);
    let invite = attribute(&dana.get("/team").await, "data-invite");
    let address = format!("/team/invites/{invite}/withdraw");
    let asked = asks(&mut dana, "/team", &address, "/team").await;
    assert!(asked.body.contains("Withdraw the invite for bob@example.com?"), "{}", asked.body);
    assert_eq!(dana.post(&address, &[]).await.status, 303);
    assert!(message(&mut dana, "/team").await.contains("The invite was withdrawn"));

    assert_eq!(dana.post("/team/keys", &[("name", "ci"), ("role", "member")]).await.status, 200);
    let key = attribute(&dana.get("/team").await, "data-key");
    let address = format!("/team/keys/{key}/revoke");
    let asked = asks(&mut dana, "/team", &address, "/team").await;
    assert!(asked.body.contains("Revoke the key ci ("), "{}", asked.body);
    assert_eq!(dana.post(&address, &[]).await.status, 303);
    assert!(message(&mut dana, "/team").await.contains("The key ci was revoked."));

    // Leaving asks too; back to the personal workspace for Discord.
    let me = dana.api_user();
    let me = app.get("/auth/me", &me).await.assert_status(200)["id"].as_str().unwrap().to_owned();
    let address = format!("/team/members/{me}/remove");
    let asked = asks(&mut dana, "/team", &address, "/team").await;
    assert!(asked.body.contains("Leave this workspace?"), "{}", asked.body);
    let personal = dana.post("/workspace", &[("workspace", me.as_str()), ("back", "/")]).await;
    assert_eq!(personal.status, 303, "{}", personal.body);
    dana.get("/").await;

    let connected = dana.post("/discord/connect", &[("guild_id", "111"), ("bot_token", BOT)]).await;
    assert_eq!(connected.status, 303, "{}", connected.body);
    let mapped = dana.post("/discord/111/map", &[("agent_id", "writer"), ("channel_id", "1111")]);
    assert_eq!(mapped.await.status, 303);
    let asked = asks(&mut dana, "/discord", "/discord/unmap?agent_id=writer", "/discord").await;
    assert!(asked.body.contains("Stop writer posting to #general?"), "{}", asked.body);
    assert!(asked.body.contains("name=\"agent_id\" value=\"writer\""), "{}", asked.body);
    assert_eq!(api(&app, &dana, "/api/chat/mappings").await["mappings"][0]["agent_id"], "writer");
    let asked = asks(&mut dana, "/discord", "/discord/111/disconnect", "/discord/111").await;
    assert!(asked.body.contains("Disconnect Acme?"), "{}", asked.body);
    assert!(
        asked.body.contains("1 channel mapping (writer to #general): those agents"),
        "{}",
        asked.body
    );
    assert_eq!(dana.post("/discord/111/disconnect", &[]).await.status, 303);
    assert!(message(&mut dana, "/discord").await.contains("The server 111 was disconnected."));
}

/// The first value of `name="…"` in `page`.
fn attribute(page: &Page, name: &str) -> String {
    let start = format!("{name}=\"");
    let from = page.body.split(&start).nth(1).unwrap_or_else(|| panic!("no {name}: {}", page.body));
    from.split('"').next().unwrap().to_owned()
}
