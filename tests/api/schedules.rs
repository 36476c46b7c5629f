//! Schedules through the HTTP API: what a schedule shows (its next runs in UTC and its zone),
//! bad input named by field, changes, deletion with the agent, and the firing: one task per
//! fire time, `skip_if_active` while a slow task runs, an agent that is not active.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_models::Script;
use crate::helpers::{TestApp, TestDb, User, app_with, backend_tests, eventually};

const WAIT: Duration = Duration::from_secs(20);

backend_tests! { app;
    a_schedule_shows_its_next_runs_in_utc_and_in_its_zone,
    bad_input_is_400_naming_the_field_and_changes_nothing,
    deleting_an_agent_deletes_its_schedules,
    each_fire_time_queues_one_task_which_the_agent_runs,
    skip_if_active_queues_nothing_while_the_schedules_task_runs,
    an_agent_that_is_not_active_gets_nothing_queued_and_it_is_logged_once,
    a_schedules_twin_is_refused_by_field_and_nothing_is_stored,
}

backend_tests! { db;
    a_seconds_field_is_refused_unless_the_operator_allows_it,
}

fn path(agent: &str) -> String {
    format!("/api/agents/{agent}/schedules")
}

async fn add(app: &TestApp, user: &User, agent: &str, body: Value) -> Value {
    app.post(&path(agent), user, body).await.assert_status(201).clone()
}

async fn entries(app: &TestApp, user: &User, agent: &str, action: &str) -> Vec<Value> {
    let reply = app.get(&format!("/api/agents/{agent}/activity?limit=1000"), user).await;
    let all = reply.assert_status(200)["entries"].as_array().unwrap().clone();
    all.into_iter().filter(|e| e["action"] == action).collect()
}

async fn tasks(app: &TestApp, user: &User, agent: &str) -> Vec<Value> {
    let reply = app.get(&format!("/api/agents/{agent}/backlog"), user).await;
    reply.assert_status(200)["tasks"].as_array().unwrap().clone()
}

async fn a_schedule_shows_its_next_runs_in_utc_and_in_its_zone(app: TestApp) {
    let user = app.register("sched@example.com").await;
    app.create_agent(&user, "briefer").await;
    let body = json!({
        "cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin", "title": "Daily brief",
        "description": "Summarise yesterday.", "priority": 3
    });
    let schedule = add(&app, &user, "briefer", body).await;
    assert_eq!(schedule["agent_id"], "briefer");
    assert_eq!(schedule["cron"], "0 9 * * MON-FRI");
    assert_eq!(schedule["timezone"], "Europe/Berlin");
    assert_eq!(
        (&schedule["catch_up"], &schedule["overlap"]),
        (&json!("skip"), &json!("skip_if_active"))
    );
    assert_eq!(schedule["enabled"], true);
    assert!(schedule["last_fired_at"].is_null());
    let runs = schedule["next_runs"].as_array().unwrap();
    assert_eq!(runs.len(), 5, "{schedule}");
    let mut previous = chrono::DateTime::<chrono::Utc>::MIN_UTC;
    for run in runs {
        let at: chrono::DateTime<chrono::Utc> = run["at"].as_str().unwrap().parse().unwrap();
        let local = chrono::DateTime::parse_from_rfc3339(run["local"].as_str().unwrap()).unwrap();
        assert_eq!(local, at, "the same instant: {run}");
        assert!(at > previous && at > chrono::Utc::now());
        previous = at;
        let shown = run["local"].as_str().unwrap();
        assert!(shown.contains("T09:00:00+01:00") || shown.contains("T09:00:00+02:00"), "{shown}");
        use chrono::Datelike;
        assert!(local.weekday().number_from_monday() <= 5, "a weekday: {shown}");
    }

    let id = schedule["id"].as_str().unwrap();
    let one = format!("{}/{id}", path("briefer"));
    assert_eq!(app.get(&one, &user).await.assert_status(200), &schedule);
    let listed = app.get(&path("briefer"), &user).await;
    assert_eq!(listed.assert_status(200)["schedules"], json!([schedule.clone()]));

    let off = app.patch(&one, &user, json!({"enabled": false, "title": "Brief"})).await;
    let off = off.assert_status(200).clone();
    assert_eq!((&off["enabled"], &off["title"]), (&json!(false), &json!("Brief")));
    assert_eq!(off["next_runs"], json!([]), "a disabled schedule has no next runs");
    let hourly = app
        .patch(
            &one,
            &user,
            json!({"enabled": true, "cron": "30 * * * *", "timezone": "Asia/Kolkata"}),
        )
        .await;
    let hourly = hourly.assert_status(200).clone();
    let first = hourly["next_runs"][0]["local"].as_str().unwrap();
    // Kolkata is UTC+05:30: half past in Kolkata is on the hour in UTC.
    assert!(first.ends_with(":30:00+05:30"), "{first}");
    assert!(hourly["next_runs"][0]["at"].as_str().unwrap().contains(":00:00"), "{hourly}");
    assert_eq!(hourly["description"], "Summarise yesterday.");
    let cleared = app.patch(&one, &user, json!({"description": null})).await;
    assert!(cleared.assert_status(200)["description"].is_null());

    app.delete(&one, &user).await.assert_status(200);
    app.get(&one, &user).await.assert_error(404, "schedule_not_found");
    app.delete(&one, &user).await.assert_error(404, "schedule_not_found");
}

async fn bad_input_is_400_naming_the_field_and_changes_nothing(app: TestApp) {
    let user = app.register("bad@example.com").await;
    app.create_agent(&user, "briefer").await;
    let cases = [
        (json!({"cron": "61 * * * *", "title": "t"}), "cron"),
        (json!({"cron": "* * *", "title": "t"}), "cron"),
        (json!({"cron": "0 0 30 2 *", "title": "t"}), "cron"),
        (json!({"title": "t"}), "cron"),
        (json!({"cron": "0 9 * * *", "title": "t", "timezone": "Mars/Olympus_Mons"}), "timezone"),
        (json!({"cron": "0 9 * * *"}), "title"),
        (json!({"cron": "0 9 * * *", "title": "t", "catch_up": "twice"}), "catch_up"),
        (json!({"cron": "0 9 * * *", "title": "t", "overlap": "sometimes"}), "overlap"),
        (json!({"cron": "0 9 * * *", "title": "t", "priority": 3_000_000_000i64}), "priority"),
        (json!({"cron": 9, "title": "t"}), "cron"),
    ];
    for (body, field) in cases {
        let reply = app.post(&path("briefer"), &user, body.clone()).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"][field].is_string(), "{body}: {}", reply.body);
    }
    app.post(&path("nobody"), &user, json!({"cron": "0 9 * * *", "title": "t"}))
        .await
        .assert_error(404, "agent_not_found");

    let schedule =
        add(&app, &user, "briefer", json!({"cron": "0 9 * * *", "title": "Brief"})).await;
    let one = format!("{}/{}", path("briefer"), schedule["id"].as_str().unwrap());
    for (body, field) in [
        (json!({"cron": "not cron"}), "cron"),
        (json!({"timezone": "Nowhere"}), "timezone"),
        (json!({"title": ""}), "title"),
    ] {
        let reply = app.patch(&one, &user, body).await;
        reply.assert_error(400, "validation_failed");
        assert!(reply.body["error"]["details"][field].is_string(), "{}", reply.body);
    }
    assert_eq!(app.get(&one, &user).await.assert_status(200), &schedule, "nothing changed");
    app.get(&format!("{}/no-such-id", path("briefer")), &user)
        .await
        .assert_error(404, "schedule_not_found");
}

async fn deleting_an_agent_deletes_its_schedules(app: TestApp) {
    let user = app.register("gone@example.com").await;
    app.create_agent(&user, "briefer").await;
    add(&app, &user, "briefer", json!({"cron": "* * * * * *", "title": "Tick"})).await;
    app.delete("/api/agents/briefer", &user).await.assert_status(200);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM schedules", &[]).await, 0);
    app.create_agent(&user, "briefer").await;
    let listed = app.get(&path("briefer"), &user).await;
    assert_eq!(listed.assert_status(200)["schedules"], json!([]), "the old schedule is gone");
}

async fn each_fire_time_queues_one_task_which_the_agent_runs(app: TestApp) {
    let user = app.register("tick@example.com").await;
    app.create_agent(&user, "ticker").await;
    app.post_empty("/api/agents/ticker/start", &user).await.assert_status(200);
    let body = json!({"cron": "* * * * * *", "title": "Tick", "overlap": "enqueue"});
    let schedule = add(&app, &user, "ticker", body).await;
    eventually(WAIT, "three scheduled tasks complete", || async {
        tasks(&app, &user, "ticker").await.iter().filter(|t| t["status"] == "complete").count() >= 3
    })
    .await;
    let one = format!("{}/{}", path("ticker"), schedule["id"].as_str().unwrap());
    app.patch(&one, &user, json!({"enabled": false})).await.assert_status(200);
    let queued = tasks(&app, &user, "ticker").await;
    let fired = entries(&app, &user, "ticker", "schedule_fired").await;
    assert_eq!(fired.len(), queued.len(), "one schedule_fired entry per task");
    for task in &queued {
        assert_eq!(task["title"], "Tick");
        assert!(fired.iter().any(|e| e["task_id"] == task["id"]), "{task}");
    }
    let fires = app.db.count("SELECT COUNT(DISTINCT fire_at) FROM schedule_fires", &[]).await;
    assert_eq!(fires as usize, queued.len(), "one task per fire time");
    let shown = app.get(&one, &user).await;
    assert!(shown.assert_status(200)["last_fired_at"].is_string(), "{}", shown.body);
}

async fn skip_if_active_queues_nothing_while_the_schedules_task_runs(app: TestApp) {
    let user = app.register("slow@example.com").await;
    let agent = json!({"id": "slow", "name": "Slow", "role_prompt": "Work.", "channel": "c", "model": "openai:gpt-test"});
    app.post("/api/agents", &user, agent).await.assert_status(201);
    app.options.models.script([Script::Hang(Duration::from_secs(30))]);
    app.post_empty("/api/agents/slow/start", &user).await.assert_status(200);
    let schedule =
        add(&app, &user, "slow", json!({"cron": "* * * * * *", "title": "Slow work"})).await;
    let one = format!("{}/{}", path("slow"), schedule["id"].as_str().unwrap());
    eventually(WAIT, "the first task runs and a later fire time is skipped", || async {
        !entries(&app, &user, "slow", "schedule_skipped").await.is_empty()
    })
    .await;
    let skipped = entries(&app, &user, "slow", "schedule_skipped").await;
    assert!(skipped[0]["details"].as_str().unwrap().contains("overlap"), "{skipped:?}");
    // Three more fire times pass while the first task still runs.
    let since: chrono::DateTime<chrono::Utc> =
        app.get(&one, &user).await.body["next_runs"][0]["at"].as_str().unwrap().parse().unwrap();
    eventually(WAIT, "three more fire times pass", || async {
        let next =
            app.get(&one, &user).await.body["next_runs"][0]["at"].as_str().unwrap().to_owned();
        next.parse::<chrono::DateTime<chrono::Utc>>().unwrap()
            >= since + chrono::Duration::seconds(3)
    })
    .await;
    let queued = tasks(&app, &user, "slow").await;
    assert_eq!(queued.len(), 1, "no second task while the first runs: {queued:?}");
    assert_eq!(queued[0]["status"], "in_progress");
    assert_eq!(entries(&app, &user, "slow", "schedule_skipped").await.len(), 1, "logged once");
}

async fn an_agent_that_is_not_active_gets_nothing_queued_and_it_is_logged_once(app: TestApp) {
    let user = app.register("idle@example.com").await;
    app.create_agent(&user, "idler").await;
    let schedule = add(&app, &user, "idler", json!({"cron": "* * * * * *", "title": "Tick"})).await;
    let one = format!("{}/{}", path("idler"), schedule["id"].as_str().unwrap());
    let first: chrono::DateTime<chrono::Utc> =
        schedule["next_runs"][0]["at"].as_str().unwrap().parse().unwrap();
    eventually(WAIT, "three fire times pass", || async {
        let next =
            app.get(&one, &user).await.body["next_runs"][0]["at"].as_str().unwrap().to_owned();
        next.parse::<chrono::DateTime<chrono::Utc>>().unwrap()
            >= first + chrono::Duration::seconds(3)
    })
    .await;
    assert!(tasks(&app, &user, "idler").await.is_empty(), "nothing queued for an idle agent");
    let skipped = entries(&app, &user, "idler", "schedule_skipped").await;
    assert_eq!(skipped.len(), 1, "logged once, not per fire time: {skipped:?}");
    assert!(skipped[0]["details"].as_str().unwrap().contains("agent_not_active"));
    let shown = app.get(&one, &user).await;
    assert!(shown.assert_status(200)["last_fired_at"].is_null());

    // Started, it gets the next fire time's task.
    app.post_empty("/api/agents/idler/start", &user).await.assert_status(200);
    eventually(WAIT, "a task is queued once the agent is active", || async {
        !tasks(&app, &user, "idler").await.is_empty()
    })
    .await;
}

async fn a_seconds_field_is_refused_unless_the_operator_allows_it(db: TestDb) {
    let app = app_with(db, |options| options.schedules.seconds_field = false).await;
    let user = app.register("minutes@example.com").await;
    app.create_agent(&user, "briefer").await;
    let reply =
        app.post(&path("briefer"), &user, json!({"cron": "*/5 * * * * *", "title": "t"})).await;
    reply.assert_error(400, "validation_failed");
    let problem = reply.body["error"]["details"]["cron"].as_str().unwrap();
    assert!(problem.contains("5 fields"), "{problem}");
    add(&app, &user, "briefer", json!({"cron": "*/5 * * * *", "title": "t"})).await;
}

/// A twin: the same agent, cron (as written, spacing and case aside), zone, title and
/// description; a different priority does not make it another schedule.
async fn a_schedules_twin_is_refused_by_field_and_nothing_is_stored(app: TestApp) {
    let user = app.register("twin@example.com").await;
    app.create_agent(&user, "briefer").await;
    let first = json!({"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin",
                       "title": "Daily brief", "description": "Summarise."});
    let first = add(&app, &user, "briefer", first).await;
    let id = first["id"].as_str().unwrap();
    let twin = json!({"cron": "0  9 * * mon-fri", "timezone": "Europe/Berlin",
                      "title": "Daily brief", "description": "Summarise.", "priority": 5});
    let reply = app.post(&path("briefer"), &user, twin).await;
    reply.assert_error(400, "validation_failed");
    let problem = reply.body["error"]["details"]["cron"].as_str().unwrap_or_default().to_owned();
    assert!(problem.contains(id) && problem.contains("Daily brief"), "{}", reply.body);
    let listed = app.get(&path("briefer"), &user).await.assert_status(200).clone();
    assert_eq!(listed["schedules"].as_array().unwrap().len(), 1, "the twin was not stored");

    // Another zone, title or description is another schedule; patching one into a twin is
    // refused the same way and changes nothing.
    let other_zone = json!({"cron": "0 9 * * MON-FRI", "timezone": "UTC",
                            "title": "Daily brief", "description": "Summarise."});
    let other_zone = add(&app, &user, "briefer", other_zone).await;
    add(
        &app,
        &user,
        "briefer",
        json!({"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin",
                                        "title": "Daily brief"}),
    )
    .await;
    let one = format!("{}/{}", path("briefer"), other_zone["id"].as_str().unwrap());
    let patched = app.patch(&one, &user, json!({"timezone": "Europe/Berlin"})).await;
    patched.assert_error(400, "validation_failed");
    assert!(patched.body["error"]["details"]["cron"].is_string(), "{}", patched.body);
    assert_eq!(app.get(&one, &user).await.assert_status(200), &other_zone, "nothing changed");
}
