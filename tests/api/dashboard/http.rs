//! The dashboard over plain HTTP: CSRF, owner scoping, sign-out, the sign-in limit, the
//! browser security headers, the assets, errors beside their fields, and `http.ui = false`.

use super::Visitor;
use crate::helpers::{TestApp, TestDb, app_with, backend_tests};

backend_tests! { app;
    a_form_without_its_csrf_token_is_refused_and_changes_nothing,
    another_users_agent_is_not_found,
    signing_out_revokes_the_session_cookie,
    pages_carry_the_browser_security_headers_and_assets_are_cached_by_hash,
    a_refused_form_shows_the_api_errors_beside_their_fields,
}

backend_tests! { db;
    without_billing_the_pages_name_no_agent_limit,
    the_sign_in_limit_applies_to_the_dashboard,
    the_dashboard_can_be_turned_off,
}

async fn a_form_without_its_csrf_token_is_refused_and_changes_nothing(app: TestApp) {
    let mut dana = Visitor::new(&app);
    dana.register("dana@example.com").await;
    let token = dana.csrf.clone().unwrap();
    let agent =
        [("name", "Writer"), ("id", "writer"), ("channel", "writing"), ("role_prompt", "Writes.")];

    let missing = dana.post("/agents", &[agent.as_slice(), &[("csrf", "")]].concat()).await;
    assert_eq!(missing.status, 403, "{}", missing.body);
    assert!(missing.body.contains("not sent from this dashboard"), "{}", missing.body);
    let wrong = "0".repeat(64);
    let forged =
        dana.post("/agents", &[agent.as_slice(), &[("csrf", wrong.as_str())]].concat()).await;
    assert_eq!(forged.status, 403);
    // The token is the session's: another session's does not pass, and neither does a value
    // planted as the CSRF cookie and repeated in the form (a double submit would take it).
    let mut eve = Visitor::new(&app);
    eve.register("eve@example.com").await;
    let eves = eve.csrf.clone().unwrap();
    assert_ne!(eves, token);
    let foreign =
        dana.post("/agents", &[agent.as_slice(), &[("csrf", eves.as_str())]].concat()).await;
    assert_eq!(foreign.status, 403);
    let planted = "p".repeat(64);
    dana.cookies.insert("agentd_csrf".into(), planted.clone());
    let cross =
        dana.post("/agents", &[agent.as_slice(), &[("csrf", planted.as_str())]].concat()).await;
    assert_eq!(cross.status, 403, "a planted cookie was taken");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents", &[]).await, 0);

    let accepted = dana.post("/agents", &agent).await;
    assert_eq!((accepted.status, accepted.location.as_deref()), (303, Some("/agents/writer")));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents", &[]).await, 1);
}

async fn another_users_agent_is_not_found(app: TestApp) {
    let mut dana = Visitor::new(&app);
    dana.register("dana@example.com").await;
    dana.post(
        "/agents",
        &[("name", "Writer"), ("id", "writer"), ("channel", "writing"), ("role_prompt", "Writes.")],
    )
    .await;
    let task = dana.post("/agents/writer/tasks", &[("title", "Draft")]).await;
    assert_eq!(task.status, 303);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks", &[]).await, 1);

    let mut eve = Visitor::new(&app);
    eve.register("eve@example.com").await;
    let page = eve.get("/agents/writer").await;
    assert_eq!(page.status, 404, "{}", page.body);
    assert!(page.body.contains("agent_not_found"), "{}", page.body);
    assert_eq!(eve.get("/events?agent=writer").await.status, 404);
    assert_eq!(eve.post("/agents/writer/do/start", &[]).await.status, 404);
    assert_eq!(eve.post("/agents/writer/tasks", &[("title", "Mine now")]).await.status, 404);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM tasks", &[]).await, 1);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM agents WHERE status = 'active'", &[]).await, 0);
    // Dana still sees hers.
    assert_eq!(dana.get("/agents/writer").await.status, 200);
}

async fn signing_out_revokes_the_session_cookie(app: TestApp) {
    let mut dana = Visitor::new(&app);
    dana.register("dana@example.com").await;
    assert_eq!(dana.get("/").await.status, 200);
    let session = dana.cookies["agentd_session"].clone();

    let out = dana.post("/logout", &[]).await;
    assert_eq!((out.status, out.location.as_deref()), (303, Some("/login")));
    assert!(!dana.cookies.contains_key("agentd_session"), "the cookie is removed");

    // The old cookie, kept by someone who copied it, no longer works: not on pages, not on
    // their event stream (told to htmx as well), and not as a bearer token of the API.
    let mut copy = Visitor::new(&app);
    copy.cookies.insert("agentd_session".into(), session.clone());
    let page = copy.get("/").await;
    assert_eq!((page.status, page.location.as_deref()), (303, Some("/login")));
    let stream = copy.get("/events").await;
    assert_eq!((stream.status, stream.headers["hx-redirect"].to_str().unwrap()), (303, "/login"));
    let api = app
        .client
        .get(format!("{}/auth/me", app.address))
        .bearer_auth(&session)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 401);
}

async fn pages_carry_the_browser_security_headers_and_assets_are_cached_by_hash(app: TestApp) {
    let mut dana = Visitor::new(&app);
    let login = dana.get("/login").await;
    assert_eq!(login.status, 200);
    let csp = login.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(login.headers["x-frame-options"], "DENY");
    assert_eq!(login.headers["x-content-type-options"], "nosniff");
    assert_eq!(login.headers["cache-control"], "no-store");
    let csrf_cookie = login.headers["set-cookie"].to_str().unwrap();
    assert!(
        csrf_cookie.contains("HttpOnly") && csrf_cookie.contains("SameSite=Strict"),
        "{csrf_cookie}"
    );
    assert!(!login.body.contains("<script>"), "no inline script");

    let response = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/register", app.address))
        .header("cookie", format!("__Host-agentd_csrf={}", dana.cookies["agentd_csrf"]))
        .header("x-forwarded-proto", "https")
        .form(&[
            ("name", "D"),
            ("email", "d@example.com"),
            ("password", "correct horse battery"),
            ("csrf", dana.cookies["agentd_csrf"].as_str()),
        ])
        .send()
        .await
        .unwrap();
    let session = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|v| v.starts_with("__Host-agentd_session="))
        .expect("a session cookie named for this host only");
    for attribute in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/"] {
        assert!(session.contains(attribute), "{attribute} in {session}");
    }
    // Over https a session cookie without the prefix (one a sibling subdomain could set) is
    // not a session.
    let token = session.split(';').next().unwrap().split_once('=').unwrap().1.to_owned();
    let https_page = |cookie: String| {
        let client =
            reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let url = format!("{}/", app.address);
        async move {
            let answer = client
                .get(url)
                .header("cookie", cookie)
                .header("x-forwarded-proto", "https")
                .send()
                .await
                .unwrap();
            answer.status().as_u16()
        }
    };
    assert_eq!(https_page(format!("__Host-agentd_session={token}")).await, 200);
    assert_eq!(https_page(format!("agentd_session={token}")).await, 303);

    let htmx = login.body.split("src=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
    assert!(htmx.starts_with("/assets/htmx-2.0.11-") && htmx.ends_with(".js"), "{htmx}");
    let asset = dana.get(&htmx).await;
    assert_eq!(asset.status, 200);
    assert_eq!(asset.headers["cache-control"], "public, max-age=31536000, immutable");
    assert!(asset.body.contains("htmx"));
    assert_eq!(dana.get("/assets/htmx-2.0.11-000000000000.js").await.status, 404);
}

async fn a_refused_form_shows_the_api_errors_beside_their_fields(app: TestApp) {
    let mut dana = Visitor::new(&app);
    dana.register("dana@example.com").await;
    let refused =
        dana.post("/agents", &[("name", ""), ("id", "Not An Id"), ("role_prompt", "x")]).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("data-field=\"name\""), "{}", refused.body);
    assert!(refused.body.contains("data-field=\"id\""), "{}", refused.body);
    assert!(refused.body.contains("value=\"Not An Id\""), "the form keeps what was typed");

    dana.post(
        "/agents",
        &[("name", "Writer"), ("id", "writer"), ("channel", "writing"), ("role_prompt", "Writes.")],
    )
    .await;
    let bad_priority =
        dana.post("/agents/writer/tasks", &[("title", "Draft"), ("priority", "soon")]).await;
    assert_eq!(bad_priority.status, 400);
    assert!(bad_priority.body.contains("data-field=\"priority\""), "{}", bad_priority.body);
    let bad_cron =
        dana.post("/agents/writer/schedules", &[("cron", "every day"), ("title", "Daily")]).await;
    assert_eq!(bad_cron.status, 400);
    assert!(bad_cron.body.contains("data-field=\"cron\""), "{}", bad_cron.body);
    let wrong_login = Visitor::new(&app).post("/login", &[]).await;
    assert_eq!(wrong_login.status, 403, "no CSRF cookie yet");
    let mut stranger = Visitor::new(&app);
    stranger.get("/login").await;
    let wrong = stranger
        .post("/login", &[("email", "dana@example.com"), ("password", "wrong password")])
        .await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("role=\"alert\""), "{}", wrong.body);
}

async fn the_sign_in_limit_applies_to_the_dashboard(db: TestDb) {
    let app = app_with(db, |o| o.limits.auth_per_minute = 2).await;
    let mut visitor = Visitor::new(&app);
    visitor.get("/login").await;
    let form = [("email", "nobody@example.com"), ("password", "wrong password")];
    assert_eq!(visitor.post("/login", &form).await.status, 401);
    assert_eq!(visitor.post("/login", &form).await.status, 401);
    let limited = visitor.post("/login", &form).await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert!(limited.body.contains("Too many requests"), "{}", limited.body);
}

async fn the_dashboard_can_be_turned_off(db: TestDb) {
    let app = app_with(db, |o| o.http.ui = false).await;
    let mut visitor = Visitor::new(&app);
    for path in ["/", "/login", "/agents/writer"] {
        let page = visitor.get(path).await;
        assert_eq!(page.status, 404, "{path}");
        assert!(page.body.contains("route_not_found"), "{path}: {}", page.body);
    }
    assert_eq!(visitor.get("/healthz").await.status, 200);
}

async fn without_billing_the_pages_name_no_agent_limit(db: TestDb) {
    let app = app_with(db, |o| o.webhook_secrets.clear()).await;
    let mut dana = Visitor::with_writer(&app, "dana@example.com").await;
    let overview = dana.get("/").await;
    assert_eq!(overview.status, 200, "{}", overview.body);
    assert!(
        overview.body.contains("1 agent<") && !overview.body.contains("of 3"),
        "{}",
        overview.body
    );
    let usage = dana.get("/usage").await;
    assert!(usage.body.contains("sets no limit"), "{}", usage.body);
}
