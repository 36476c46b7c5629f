//! Conditional reads: a polled read that has not changed is answered `304 Not Modified`
//! without its body, by the API and by the dashboard's pages.

use reqwest::Method;
use serde_json::json;

use crate::dashboard::Visitor;
use crate::helpers::{TestApp, User, backend_tests};

backend_tests! { app;
    an_unchanged_list_is_answered_304_and_a_change_makes_a_new_tag,
    an_unchanged_dashboard_page_is_answered_304_whatever_its_time,
}

/// GET `path` as `user` with `If-None-Match: tag` when given: the status, the `ETag` and the
/// body's length.
async fn get(app: &TestApp, user: &User, path: &str, tag: Option<&str>) -> (u16, String, usize) {
    let mut request =
        app.client.request(Method::GET, format!("{}{path}", app.address)).bearer_auth(&user.token);
    if let Some(tag) = tag {
        request = request.header("if-none-match", tag);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let etag = response.headers().get("etag").map(|t| t.to_str().unwrap().to_owned());
    if status == 200 {
        let cache = response.headers().get("cache-control").unwrap().to_str().unwrap();
        assert_eq!(cache, "private, no-cache", "{path}");
    }
    let body = response.bytes().await.unwrap();
    (status, etag.unwrap_or_default(), body.len())
}

async fn an_unchanged_list_is_answered_304_and_a_change_makes_a_new_tag(app: TestApp) {
    let user = app.register("poll@example.com").await;
    app.create_agent(&user, "first").await;
    let (status, tag, length) = get(&app, &user, "/api/agents", None).await;
    assert_eq!(status, 200);
    assert!(tag.starts_with("W/\"") && length > 0, "{tag}");

    let (status, again, length) = get(&app, &user, "/api/agents", Some(&tag)).await;
    assert_eq!((status, length), (304, 0), "unchanged: no body");
    assert_eq!(again, tag, "the 304 names the tag");
    let (status, ..) = get(&app, &user, "/api/agents", Some(&format!("\"x\", {tag}"))).await;
    assert_eq!(status, 304, "a list of tags");
    let (status, _, length) = get(&app, &user, "/api/agents/first", Some(&tag)).await;
    assert_eq!(status, 200, "another read's tag does not match");
    assert!(length > 0);

    app.add_task(&user, "first", "Something to do", 0).await;
    let (status, changed, length) = get(&app, &user, "/api/agents", Some(&tag)).await;
    assert_eq!(status, 200, "the list changed: its backlog count");
    assert!(length > 0 && changed != tag, "{changed}");

    // Writes are not conditional: a POST answers as always.
    let body = json!({"title": "More"});
    app.post("/api/agents/first/backlog", &user, body).await.assert_status(201);
}

async fn an_unchanged_dashboard_page_is_answered_304_whatever_its_time(app: TestApp) {
    let mut visitor = Visitor::with_writer(&app, "pages@example.com").await;
    // The first view shows the creation's flash message, once.
    assert!(visitor.get("/agents/writer").await.body.contains("Agent Writer created."));
    let page = visitor.get("/agents/writer").await;
    assert_eq!(page.status, 200);
    let tag = page.headers.get("etag").expect("an ETag").to_str().unwrap().to_owned();
    let made_at = |body: &str| body.split("data-now=\"").nth(1).map(|r| r[..24].to_owned());
    let first_time = made_at(&page.body).expect("the page's time");

    // Made again later, with another time in it, the page says the same: 304.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let page = visitor.get("/agents/writer").await;
        if made_at(&page.body).is_some_and(|at| at != first_time) {
            assert_eq!(page.headers.get("etag").unwrap().to_str().unwrap(), tag);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "every page was made at {first_time}");
    }
    let unchanged = visitor.get_unless("/agents/writer", &tag).await;
    assert_eq!((unchanged.status, unchanged.body.as_str()), (304, ""));

    let added = visitor.post("/agents/writer/tasks", &[("title", "Draft the note")]).await;
    assert_eq!(added.status, 303, "{}", added.body);
    let changed = visitor.get_unless("/agents/writer", &tag).await;
    assert_eq!(changed.status, 200, "the backlog changed");
    assert!(changed.body.contains("Draft the note"));
}
