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
/// comes after the reads (it grows the backlogs they read), then the list once more over
/// them, and once more after 100,000 finished tasks are added.
pub(crate) async fn http(backend: Backend, report: &mut Report, http: bool, login: bool) {
    let label = name(backend);
    let server = Agentd::start(fresh(backend).await, &[]).await;
    let token = server.register(EMAIL).await;
    agents(&server, &token, "agent", 10, 10, json!({})).await;
    let rates = if http { Some(reads(&server, &token, label, report).await) } else { None };
    if login {
        login_under_load(&server, &token, label, report).await;
    }
    if let Some(rates) = rates {
        backlog_writes(&server, &token, label, report, rates.0).await;
        history(&server, &token, label, report, rates).await;
    }
    server.stop().await;
}

/// The yardstick, the two reads and sign-in; returns the yardstick's requests/s and the list's.
async fn reads(server: &Agentd, token: &str, label: &str, report: &mut Report) -> (f64, f64) {
    let bare = Bare::start().await;
    let yardstick = closed_loop(bare.address, None, shape(), request(Method::GET, "/", None)).await;
    http_row(report, "bare axum handler (GET /)", label, &yardstick, None);
    let base = yardstick.per_second();
    let healthz = request(Method::GET, "/healthz", None);
    let health = closed_loop(server.address, None, shape(), healthz).await;
    http_row(report, "GET /healthz (every middleware)", label, &health, Some(base));
    let list = request(Method::GET, "/api/agents", None);
    let over_none = closed_loop(server.address, Some(token), shape(), list.clone()).await;
    http_row(report, "GET /api/agents", label, &over_none, Some(base));
    read_targets(report, "GET /api/agents", label, &over_none, base, health.per_second());
    let one = request(Method::GET, "/api/agents/agent-3", None);
    let run = closed_loop(server.address, Some(token), shape(), one).await;
    http_row(report, "GET /api/agents/{id}", label, &run, Some(base));
    read_targets(report, "GET /api/agents/{id}", label, &run, base, health.per_second());
    uncached_reads(server.db.backend, label, report, base).await;
    let sign_in =
        request(Method::POST, "/auth/login", Some(json!({"email": EMAIL, "password": PASSWORD})));
    let run = closed_loop(server.address, None, shape(), sign_in).await;
    http_row(report, "POST /auth/login", label, &run, Some(base));

    (base, over_none.per_second())
}

/// Finished tasks put under the ten agents for the history run.
const FINISHED: usize = 100_000;

/// The list again over [`FINISHED`] finished tasks, against the list over none.
async fn history(
    server: &Agentd,
    token: &str,
    label: &str,
    report: &mut Report,
    rates: (f64, f64),
) {
    let (bare, over_none) = rates;
    finished_history(server, FINISHED).await;
    let list = request(Method::GET, "/api/agents", None);
    let run = closed_loop(server.address, Some(token), shape(), list).await;
    let row = "GET /api/agents over 100,000 more finished tasks";
    http_row(report, row, label, &run, Some(bare));
    let ratio = run.per_second() / over_none;
    report.target(
        format!("GET /api/agents over 100,000 finished tasks within 10% of over none ({label})"),
        format!("{:.0}%", 100.0 * ratio),
        ratio >= 0.9,
    );
}

/// A read's targets: 30,000 requests/s or a quarter of the yardstick, and p99 under 5 ms; and a
/// quarter of `/healthz` (the same server through every middleware) with p99 under 10 ms.
fn read_targets(
    report: &mut Report,
    endpoint: &str,
    label: &str,
    run: &Measured,
    bare: f64,
    healthz: f64,
) {
    let share = run.per_second() / bare;
    report.target(
        format!("{endpoint} ≥ 30,000 req/s or ≥ 25% of bare axum ({label})"),
        format!("{} req/s, {:.0}%", whole(run.per_second()), 100.0 * share),
        run.per_second() >= 30_000.0 || share >= 0.25,
    );
    let p99 = run.quantile_ms(0.99);
    report.target(format!("{endpoint} p99 < 5 ms ({label})"), format!("{p99:.2} ms"), p99 < 5.0);
    let share = run.per_second() / healthz;
    report.target(
        format!("{endpoint} ≥ 25% of GET /healthz, p99 < 10 ms ({label})"),
        format!("{:.0}%, p99 {p99:.2} ms", 100.0 * share),
        share >= 0.25 && p99 < 10.0,
    );
}

/// The two reads again on a server with the read cache off (`http.read_cache`): what each
/// request costs when it goes to the database, as every read did before the cache.
async fn uncached_reads(backend: Backend, label: &str, report: &mut Report, bare: f64) {
    let env = [("AGENTD_HTTP__READ_CACHE", "false".to_owned())];
    let server = Agentd::start(fresh(backend).await, &env).await;
    let token = server.register(EMAIL).await;
    agents(&server, &token, "agent", 10, 10, json!({})).await;
    for (row, path) in [
        ("GET /api/agents, read cache off", "/api/agents"),
        ("GET /api/agents/{id}, read cache off", "/api/agents/agent-3"),
    ] {
        let run =
            closed_loop(server.address, Some(&token), shape(), request(Method::GET, path, None))
                .await;
        http_row(report, row, label, &run, Some(bare));
    }
    server.stop().await;
}

/// Writes `count` finished tasks round the ten agents straight into the database (running
/// them would take minutes and measure the runtime instead); the counts' triggers see them as
/// any insert. On PostgreSQL a `VACUUM ANALYZE` follows, as autovacuum would have run in the
/// hours 100,000 tasks take: one transaction updating each agent's counts row 10,000 times
/// leaves chains of dead row versions no steady state has.
async fn finished_history(server: &Agentd, count: usize) {
    let last = count - 1;
    let sql = match server.db.backend {
        Backend::Sqlite => format!(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last}) \
             INSERT INTO tasks (id, owner_id, agent_id, title, priority, status, result, \
                 attempts, created_at, updated_at, started_at, completed_at) \
             SELECT 'done-' || i, (SELECT owner_id FROM agents LIMIT 1), 'agent-' || (i % 10), \
                 'Done ' || i, 0, 'complete', 'ok', 1, '2026-01-01T00:00:00+00:00', \
                 '2026-01-01T00:00:01+00:00', '2026-01-01T00:00:00+00:00', \
                 '2026-01-01T00:00:01+00:00' FROM n"
        ),
        Backend::Postgres => format!(
            "INSERT INTO tasks (id, owner_id, agent_id, title, priority, status, result, \
                 attempts, created_at, updated_at, started_at, completed_at) \
             SELECT 'done-' || i, (SELECT owner_id FROM agents LIMIT 1), 'agent-' || (i % 10), \
                 'Done ' || i, 0, 'complete', 'ok', 1, '2026-01-01T00:00:00+00:00', \
                 '2026-01-01T00:00:01+00:00', '2026-01-01T00:00:00+00:00', \
                 '2026-01-01T00:00:01+00:00' FROM generate_series(0, {last}) AS i"
        ),
    };
    server.db.execute(&sql, &[]).await;
    if server.db.backend == Backend::Postgres {
        server.db.execute("VACUUM ANALYZE backlog_counts", &[]).await;
        server.db.execute("VACUUM ANALYZE tasks", &[]).await;
    }
}

/// Adds tasks round the ten agents, then to one of them, then lists the agents over the
/// backlogs that made.
async fn backlog_writes(server: &Agentd, token: &str, label: &str, report: &mut Report, bare: f64) {
    let add: MakeRequest = Arc::new(|n| {
        let body = json!({"title": format!("Load task {n}")}).to_string();
        (Method::POST, format!("/api/agents/agent-{}/backlog", n % 10), Some(body))
    });
    let run = closed_loop(server.address, Some(token), shape(), add).await;
    http_row(report, "POST /api/agents/{id}/backlog", label, &run, Some(bare));
    if label == name(Backend::Sqlite) {
        report.target(
            "POST backlog ≥ 8,000 requests/s (SQLite)".into(),
            format!("{:.0}/s", run.per_second()),
            run.per_second() >= 8000.0,
        );
    }
    let one: MakeRequest = Arc::new(|n| {
        let body = json!({"title": format!("Load task {n}")}).to_string();
        (Method::POST, "/api/agents/agent-7/backlog".to_owned(), Some(body))
    });
    let to_one = closed_loop(server.address, Some(token), shape(), one).await;
    http_row(report, "POST /api/agents/{id}/backlog, one agent", label, &to_one, Some(bare));
    report.target(
        format!("Adds to one agent p99 < 50 ms ({label})"),
        format!("{:.0}/s, p99 {:.2} ms", to_one.per_second(), to_one.quantile_ms(0.99)),
        to_one.quantile_ms(0.99) < 50.0,
    );
    let tasks = 100 + run.ok + to_one.ok;
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

/// The `healthz` section: `GET /healthz` through every middleware, at the default log level
/// and with `http.access_log` on, against the bare handler: what a line per request costs.
pub(crate) async fn healthz(backend: Backend, report: &mut Report) {
    let label = name(backend);
    let bare = Bare::start().await;
    let yardstick = closed_loop(bare.address, None, shape(), request(Method::GET, "/", None)).await;
    http_row(report, "bare axum handler (GET /)", label, &yardstick, None);
    let base = yardstick.per_second();
    for (row, env) in [
        ("GET /healthz (every middleware)", Vec::new()),
        ("GET /healthz, http.access_log on", vec![("AGENTD_HTTP__ACCESS_LOG", "true".to_owned())]),
    ] {
        let server = Agentd::start(fresh(backend).await, &env).await;
        let health = request(Method::GET, "/healthz", None);
        let run = closed_loop(server.address, None, shape(), health).await;
        http_row(report, row, label, &run, Some(base));
        server.stop().await;
    }
}

/// The `adds` section: the backlog's adds of section 1 alone (across ten agents, then to one),
/// on a fresh server, against the bare handler: the quick A/B of a change to the add.
pub(crate) async fn adds(backend: Backend, report: &mut Report) {
    let label = name(backend);
    let bare = Bare::start().await;
    let yardstick = closed_loop(bare.address, None, shape(), request(Method::GET, "/", None)).await;
    http_row(report, "bare axum handler (GET /)", label, &yardstick, None);
    let server = Agentd::start(fresh(backend).await, &[]).await;
    let token = server.register(EMAIL).await;
    agents(&server, &token, "agent", 10, 10, json!({})).await;
    backlog_writes(&server, &token, label, report, yardstick.per_second()).await;
    server.stop().await;
}
