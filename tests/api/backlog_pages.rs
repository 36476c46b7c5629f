//! Pages of a backlog: `?limit=` and `?cursor=` on the task list (creation order) and on the
//! agent view (every unfinished task, finished ones a page at a time).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{TestApp, User, backend_tests, eventually};

backend_tests! { app;
    paging_returns_every_task_exactly_once_while_tasks_are_added,
    the_agent_view_pages_finished_tasks_and_keeps_every_unfinished_one,
    a_bad_limit_or_cursor_is_refused_by_field,
    a_search_finds_tasks_by_title_or_description_letter_case_aside_and_is_bounded,
    newest_first_is_the_creation_order_reversed_whole_or_in_pages,
}

/// Every page of `path` from the start, following `next_cursor`: the ids of `field`.
async fn all_pages(app: &TestApp, user: &User, path: &str, field: &str) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(cursor) => format!("{path}&cursor={cursor}"),
            None => path.to_owned(),
        };
        let page = app.get(&url, user).await.assert_status(200).clone();
        pages.push(ids(&page[field]));
        match page.get("next_cursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => return pages,
        }
    }
}

fn ids(tasks: &Value) -> Vec<String> {
    tasks.as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect()
}

async fn paging_returns_every_task_exactly_once_while_tasks_are_added(app: TestApp) {
    let user = app.register("pages@example.com").await;
    app.create_agent(&user, "pager").await;
    for n in 0..20 {
        app.add_task(&user, "pager", &format!("before {n}"), 0).await;
    }
    // Four clients add 40 more side by side while another reads three at a time.
    let adders = futures::future::join_all((0..4).map(|client| {
        let (app, user) = (&app, &user);
        async move {
            for n in 0..10 {
                app.add_task(user, "pager", &format!("during {client}/{n}"), 0).await;
            }
        }
    }));
    let (_, pages) =
        tokio::join!(adders, all_pages(&app, &user, "/api/agents/pager/backlog?limit=3", "tasks"));
    assert!(pages.iter().all(|page| page.len() <= 3), "{pages:?}");
    let read: Vec<String> = pages.concat();
    let unique: HashSet<&String> = read.iter().collect();
    assert_eq!(unique.len(), read.len(), "a task was on two pages");

    // What was read is the start of the whole list, in its order: nothing was skipped.
    let whole = ids(&app.get("/api/agents/pager/backlog", &user).await.assert_status(200)["tasks"]);
    assert_eq!(whole.len(), 60);
    assert!(read.len() >= 20, "every task there before paging started is read");
    assert_eq!(read, whole[..read.len()], "pages skipped a task added meanwhile");

    // Paged again once nobody adds: every task exactly once, as in the whole list.
    let again = all_pages(&app, &user, "/api/agents/pager/backlog?limit=7", "tasks").await;
    assert_eq!(again.len(), 9, "60 tasks, 7 a page");
    assert_eq!(again.concat(), whole);
    let queued =
        all_pages(&app, &user, "/api/agents/pager/backlog?status=queued&limit=50", "tasks").await;
    assert_eq!(queued.concat(), whole, "a status and a limit together");
}

async fn the_agent_view_pages_finished_tasks_and_keeps_every_unfinished_one(app: TestApp) {
    let user = app.register("view@example.com").await;
    let body = json!({"id": "runner", "name": "Runner", "role_prompt": "Echo.", "channel": "general",
                      "model": "echo", "throttle_seconds": 0});
    app.post("/api/agents", &user, body).await.assert_status(201);
    for n in 0..5 {
        app.add_task(&user, "runner", &format!("done {n}"), 0).await;
    }
    app.post_empty("/api/agents/runner/start", &user).await.assert_status(200);
    eventually(Duration::from_secs(20), "five tasks complete", || async {
        app.get("/api/agents/runner", &user).await.body["backlog_summary"]["complete"] == 5
    })
    .await;
    app.post_empty("/api/agents/runner/stop", &user).await.assert_status(200);
    let mut waiting = Vec::new();
    for priority in [0, 1] {
        let task = app.add_task(&user, "runner", "waits", priority).await;
        waiting.push(task["id"].as_str().unwrap().to_owned());
    }

    let whole = app.get("/api/agents/runner", &user).await.assert_status(200).clone();
    assert!(whole.get("next_cursor").is_none(), "the whole backlog has no next page");
    let whole = ids(&whole["backlog"]);
    assert_eq!(whole.len(), 7);
    let finished = &whole[2..];

    let pages = all_pages(&app, &user, "/api/agents/runner?limit=2", "backlog").await;
    assert_eq!(pages.len(), 3, "{pages:?}");
    let mut seen = Vec::new();
    for page in &pages {
        // Every page starts with the unfinished tasks in run order, then finished ones.
        let (unfinished, rest) = page.split_at(2);
        let mut expected = waiting.clone();
        expected.sort_by_key(|id| whole.iter().position(|w| w == id));
        assert_eq!(unfinished, expected.as_slice(), "the queued ones, in run order");
        seen.extend_from_slice(rest);
    }
    assert_eq!(seen, finished, "finished tasks newest first, each once");
    assert_eq!(pages.iter().map(|p| p.len() - 2).collect::<Vec<_>>(), [2, 2, 1]);
}

async fn a_bad_limit_or_cursor_is_refused_by_field(app: TestApp) {
    let user = app.register("bad-pages@example.com").await;
    app.create_agent(&user, "pager").await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("cursor=nonsense", "cursor"),
        ("limit=5&cursor=12.", "cursor"),
    ] {
        for path in ["/api/agents/pager/backlog", "/api/agents/pager"] {
            let reply = app.get(&format!("{path}?{query}"), &user).await;
            reply.assert_error(400, "validation_failed");
            let details = &reply.body["error"]["details"];
            assert!(details.get(field).is_some(), "{path}?{query}: {}", reply.body);
        }
    }
    app.get("/api/agents/nobody/backlog?limit=5", &user).await.assert_error(404, "agent_not_found");
    app.get("/api/agents/nobody?limit=5", &user).await.assert_error(404, "agent_not_found");
}

async fn a_search_finds_tasks_by_title_or_description_letter_case_aside_and_is_bounded(
    app: TestApp,
) {
    let user = app.register("search@example.com").await;
    app.create_agent(&user, "finder").await;
    let mut all = Vec::new();
    for (title, description) in [
        ("Quarterly REPORT", None),
        ("Weekly update", Some("Include the report numbers.")),
        ("50% off sale", None),
        ("500 offers", None),
        ("Plan the offsite", None),
    ] {
        let body = json!({"title": title, "description": description});
        let task = app.post("/api/agents/finder/backlog", &user, body).await;
        all.push(task.assert_status(201)["id"].as_str().unwrap().to_owned());
    }
    let found = |query: &'static str| {
        let (app, user) = (&app, &user);
        async move {
            let path = format!("/api/agents/finder/backlog?{query}");
            ids(&app.get(&path, user).await.assert_status(200)["tasks"])
        }
    };
    assert_eq!(found("search=report").await, all[..2], "title or description, any case");
    // `%` and `_` are the text itself, not wildcards.
    assert_eq!(found("search=50%25").await, all[2..3]);
    assert_eq!(found("search=0_o").await, Vec::<String>::new());
    assert_eq!(found("search=%20%20").await, all, "a blank search is none");
    // With a status and in pages: the same search on every page.
    let pages =
        all_pages(&app, &user, "/api/agents/finder/backlog?search=o&limit=2", "tasks").await;
    assert_eq!(pages.concat(), all, "every title holds an o");
    assert!(pages.iter().all(|page| page.len() <= 2));
    assert_eq!(found("search=report&status=complete").await, Vec::<String>::new());

    let long = "x".repeat(101);
    let reply = app.get(&format!("/api/agents/finder/backlog?search={long}"), &user).await;
    reply.assert_error(400, "validation_failed");
    assert!(reply.body["error"]["details"]["search"].is_string(), "{}", reply.body);
}

async fn newest_first_is_the_creation_order_reversed_whole_or_in_pages(app: TestApp) {
    let user = app.register("newest@example.com").await;
    app.create_agent(&user, "pager").await;
    for n in 0..7 {
        // Priorities that disagree with creation order: the order is not the run order.
        app.add_task(&user, "pager", &format!("task {n}"), n % 3).await;
    }
    let oldest = app.get("/api/agents/pager/backlog", &user).await.assert_status(200).clone();
    let mut reversed = ids(&oldest["tasks"]);
    reversed.reverse();
    let newest = app.get("/api/agents/pager/backlog?order=newest", &user).await;
    assert_eq!(ids(&newest.assert_status(200)["tasks"]), reversed);
    let pages = all_pages(&app, &user, "/api/agents/pager/backlog?order=newest&limit=3", "tasks");
    assert_eq!(pages.await.concat(), reversed);
    let explicit = app.get("/api/agents/pager/backlog?order=oldest", &user).await;
    assert_eq!(explicit.assert_status(200)["tasks"], oldest["tasks"]);
    let bad = app.get("/api/agents/pager/backlog?order=priority", &user).await;
    bad.assert_error(400, "validation_failed");
    assert!(bad.body["error"]["details"].get("order").is_some(), "{}", bad.body);
}
