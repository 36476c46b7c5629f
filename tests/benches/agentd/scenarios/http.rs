//! Sections 1 and 5: the HTTP endpoints under load, and sign-ins beside them.

use super::*;

fn http_row(report: &mut Report, label: &str, backend: &str, run: &Measured, bare: Option<f64>) {
    let ratio =
        bare.map_or("—".into(), |bare| format!("{:.0}%", 100.0 * run.per_second() / bare));
    let errors = match &run.first_error {
        Some(first) => format!("{} (first: {})", run.errors, first.replace('|', "/")),
        None => "0".into(),
    };
    report.row(
        Section::Http,
        vec![
            label.into(),
            backend.into(),
            whole(run.per_second()),
            ms(run.quantile_ms(0.5)),
            ms(run.quantile_ms(0.99)),
            ratio,
            errors,
        ],
    );
}

/// Sections 1 and 5: the endpoints under 64 connections, a bare axum handler as the yardstick,
/// and `GET /api/agents` with and without 20 logins per second beside it. The backlog run
/// comes last (it grows the backlogs the others read), then the list once more over them.
pub(crate) async fn http(backend: Backend, report: &mut Report, http: bool, login: bool) {
    let label = name(backend);
    let server = Agentd::start(fresh(backend).await, &[]).await;
    let token = server.register(EMAIL).await;
    agents(&server, &token, "agent", 10, 10, json!({})).await;
    let bare = if http { Some(reads(&server, &token, label, report).await) } else { None };
    if login {
        login_under_load(&server, &token, label, report).await;
    }
    if let Some(bare) = bare {
        backlog_writes(&server, &token, label, report, bare).await;
    }
    server.stop().await;
}

/// The yardstick, the two reads and sign-in; returns the yardstick's requests/s.
async fn reads(server: &Agentd, token: &str, label: &str, report: &mut Report) -> f64 {
    let bare = Bare::start().await;
    let yardstick = closed_loop(bare.address, None, shape(), request(Method::GET, "/", None)).await;
    http_row(report, "bare axum handler (GET /)", label, &yardstick, None);
    let base = Some(yardstick.per_second());
    let list = request(Method::GET, "/api/agents", None);
    let run = closed_loop(server.address, Some(token), shape(), list).await;
    http_row(report, "GET /api/agents", label, &run, base);
    let share = run.per_second() / yardstick.per_second();
    report.target(
        format!("GET /api/agents ≥ 40% of bare axum ({label})"),
        format!("{:.0}%", 100.0 * share),
        share >= 0.4,
    );
    let p99 = run.quantile_ms(0.99);
    report.target(
        format!("GET /api/agents p99 < 10 ms ({label})"),
        format!("{p99:.2} ms"),
        p99 < 10.0,
    );
    let one = request(Method::GET, "/api/agents/agent-3", None);
    let run = closed_loop(server.address, Some(token), shape(), one).await;
    http_row(report, "GET /api/agents/{id}", label, &run, base);
    let sign_in =
        request(Method::POST, "/auth/login", Some(json!({"email": EMAIL, "password": PASSWORD})));
    let run = closed_loop(server.address, None, shape(), sign_in).await;
    http_row(report, "POST /auth/login", label, &run, base);
    yardstick.per_second()
}

/// Adds tasks round the ten agents, then lists the agents over the backlogs that made.
async fn backlog_writes(server: &Agentd, token: &str, label: &str, report: &mut Report, bare: f64) {
    let add: MakeRequest = Arc::new(|n| {
        let body = json!({"title": format!("Load task {n}")}).to_string();
        (Method::POST, format!("/api/agents/agent-{}/backlog", n % 10), Some(body))
    });
    let run = closed_loop(server.address, Some(token), shape(), add).await;
    http_row(report, "POST /api/agents/{id}/backlog", label, &run, Some(bare));
    if label == name(Backend::Sqlite) {
        report.target(
            "POST backlog ≥ 5,000 requests/s (SQLite)".into(),
            format!("{:.0}/s", run.per_second()),
            run.per_second() >= 5000.0,
        );
    }
    let tasks = 100 + run.ok;
    let list = request(Method::GET, "/api/agents", None);
    let run = closed_loop(server.address, Some(token), shape(), list).await;
    http_row(report, &format!("GET /api/agents over {tasks} tasks"), label, &run, Some(bare));
}

/// Section 5: the list alone, then beside 20 sign-ins a second.
async fn login_under_load(server: &Agentd, token: &str, label: &str, report: &mut Report) {
    let list = request(Method::GET, "/api/agents", None);
    let alone = closed_loop(server.address, Some(token), shape(), list.clone()).await;
    let shape = shape();
    let (with, logins) = tokio::join!(
        closed_loop(server.address, Some(token), shape, list),
        paced_logins(server, 20, shape.warmup + shape.measure),
    );
    let ratio = with.quantile_ms(0.99) / alone.quantile_ms(0.99);
    report.row(
        Section::Login,
        vec![
            label.into(),
            whole(alone.per_second()),
            ms(alone.quantile_ms(0.99)),
            whole(with.per_second()),
            ms(with.quantile_ms(0.99)),
            format!("{ratio:.2}x"),
            format!("{logins:.1}"),
        ],
    );
    report.target(
        format!("20 logins/s raise the GET p99 < 2x ({label})"),
        format!("{ratio:.2}x"),
        ratio < 2.0,
    );
}

/// Signs in `per_second` times a second for `duration`, each on its own request, and returns
/// the successful sign-ins per second.
async fn paced_logins(server: &Agentd, per_second: u32, duration: Duration) -> f64 {
    let body = json!({"email": EMAIL, "password": PASSWORD});
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / per_second);
    let until = Instant::now() + duration;
    let mut logins = futures::stream::FuturesUnordered::new();
    let mut done = 0u32;
    while Instant::now() < until {
        tokio::select! {
            _ = ticks.tick() => logins.push(server.call(Method::POST, "/auth/login", None, Some(body.clone()))),
            Some((status, _)) = logins.next() => done += u32::from(status == 200),
        }
    }
    while let Some((status, _)) = logins.next().await {
        done += u32::from(status == 200);
    }
    f64::from(done) / duration.as_secs_f64()
}
