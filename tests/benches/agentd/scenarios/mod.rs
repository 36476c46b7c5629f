//! One function per measurement; each starts its own agentd on a fresh database.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};

use crate::fake_discord::FakeDiscord;
use crate::fake_models::{FakeModels, OPENAI_KEY};
use crate::helpers::{Backend, TestDb, eventually};
use crate::load::{MakeRequest, Measured, Shape, closed_loop, quantile_ms};
use crate::report::{Report, Section, name};
use crate::server::{Agentd, Bare, PASSWORD};

mod cores;
mod cost;
mod http;
mod ratelimit;
mod steps;
mod streams;
mod traces;

pub(crate) use cores::cores;
pub(crate) use http::{adds, healthz, http};
pub(crate) use ratelimit::ratelimit;
pub(crate) use steps::runtime_tools;
pub(crate) use streams::streams;
pub(crate) use traces::traces;

const CONNECTIONS: usize = 64;
const EMAIL: &str = "bench@example.com";
const COMPLETED: &str = "agentd_tasks_total{outcome=\"completed\"}";
const RUNNING: &str = "agentd_agents_running";
const BOT: &str = "bench-bot.token";
const GUILD: &str = "4242";
/// Setup requests in flight at once.
const SETUP_CONCURRENCY: usize = 32;

fn shape() -> Shape {
    let seconds = match std::env::var("AGENTD_BENCH_SECONDS") {
        Ok(text) => {
            text.parse::<f64>().ok().filter(|s| s.is_finite() && *s > 0.0).unwrap_or_else(|| {
                panic!("AGENTD_BENCH_SECONDS={text:?}: give a positive number of seconds")
            })
        }
        Err(_) => 5.0,
    };
    Shape {
        connections: CONNECTIONS,
        warmup: Duration::from_secs(1),
        measure: Duration::from_secs_f64(seconds),
    }
}

async fn fresh(backend: Backend) -> TestDb {
    TestDb::create(backend).await.expect("the backend is configured")
}

/// Runs `f` over `items`, [`SETUP_CONCURRENCY`] at a time.
async fn each<T, F, Fut>(items: impl IntoIterator<Item = T>, f: F)
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    futures::stream::iter(items).for_each_concurrent(SETUP_CONCURRENCY, f).await;
}

fn request(method: Method, path: &str, body: Option<Value>) -> MakeRequest {
    let (path, body) = (path.to_owned(), body.map(|b| b.to_string()));
    Arc::new(move |_| (method.clone(), path.clone(), body.clone()))
}

fn ms(value: f64) -> String {
    format!("{value:.2}")
}

fn whole(value: f64) -> String {
    format!("{value:.0}")
}

/// Creates agents `{prefix}-0`… (with `extra` fields), `tasks` tasks each.
async fn agents(
    server: &Agentd,
    token: &str,
    prefix: &str,
    count: usize,
    tasks: usize,
    extra: Value,
) {
    each(0..count, |i| {
        let extra = extra.clone();
        async move {
            let mut body = json!({"id": format!("{prefix}-{i}"), "name": format!("Agent {i}"),
                "role_prompt": format!("You are agent {i}; you answer briefly."), "channel": "bench"});
            if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
                body.extend(extra.clone());
            }
            server.ok(Method::POST, "/api/agents", token, Some(body)).await;
        }
    })
    .await;
    let all = (0..count).flat_map(|a| (0..tasks).map(move |t| (a, t)));
    each(all, |(a, t)| async move {
        let path = format!("/api/agents/{prefix}-{a}/backlog");
        server.ok(Method::POST, &path, token, Some(json!({"title": format!("Task {t}")}))).await;
    })
    .await;
}

async fn start_agents(server: &Agentd, token: &str, prefix: &str, count: usize) {
    each(0..count, |i| async move {
        server.ok(Method::POST, &format!("/api/agents/{prefix}-{i}/start"), token, None).await;
    })
    .await;
}

/// Connects a guild with `channels` text channels through the user's own bot, maps agent
/// `{prefix}-i` to channel `i % channels`, and returns the channel ids.
async fn map_agents(
    server: &Agentd,
    discord: &FakeDiscord,
    token: &str,
    prefix: &str,
    agents: usize,
    channels: usize,
) -> Vec<String> {
    discord.add_bot(BOT, "BenchBot");
    discord.add_guild_with_text_channels(GUILD, "Bench", &[BOT], channels);
    let connect = json!({"bot_token": BOT, "guild_id": GUILD});
    server.ok(Method::POST, "/api/chat/connect", token, Some(connect)).await;
    let ids: Vec<String> = (0..channels).map(|i| format!("{GUILD}{i:03}")).collect();
    let ids_ref = &ids;
    each(0..agents, |i| async move {
        let mapping =
            json!({"agent_id": format!("{prefix}-{i}"), "channel_id": ids_ref[i % channels]});
        server.ok(Method::POST, &format!("/api/chat/mappings/{GUILD}"), token, Some(mapping)).await;
    })
    .await;
    ids
}

fn discord_env(discord: &FakeDiscord) -> Vec<(&'static str, String)> {
    vec![("AGENTD_DISCORD__API_BASE", discord.api_base.clone())]
}

fn model_env(models: &FakeModels) -> Vec<(&'static str, String)> {
    vec![
        ("AGENTD_MODELS__DEFAULT", "openai:gpt-bench".into()),
        ("AGENTD_MODELS__OPENAI_BASE_URL", models.openai_base()),
        ("AGENTD_MODELS__OPENAI_API_KEY", OPENAI_KEY.into()),
    ]
}

/// How fast `total` tasks complete once agents start: from the first completion seen to the
/// last, by agentd's own counter.
/// Starts `count` agents `{prefix}-i` and measures their completion rate meanwhile (the
/// seconds, the rate, and how long the starts took): the first
/// completion comes while later agents are still being started (1,000 starts take seconds), so
/// watching only once they all are would time just the tail of the run, when fewer and fewer
/// agents have work left.
pub(super) async fn started_rate(
    server: &Agentd,
    token: &str,
    prefix: &str,
    count: usize,
    total: usize,
) -> (f64, f64, f64) {
    let began = std::time::Instant::now();
    let (started, (seconds, rate)) = tokio::join!(
        async {
            start_agents(server, token, prefix, count).await;
            began.elapsed()
        },
        completion_rate(server, total)
    );
    (seconds, rate, started.as_secs_f64())
}

/// Tasks completed a second, from the first completion to the last (`total`): the seconds
/// and the rate.
async fn completion_rate(server: &Agentd, total: usize) -> (f64, f64) {
    let deadline = Duration::from_secs(600);
    let (first, at_first) = server.wait_for_metric(COMPLETED, 1.0, deadline).await;
    let (last, _) = server.wait_for_metric(COMPLETED, total as f64, deadline).await;
    let seconds = (last - first).as_secs_f64();
    (seconds, (total as f64 - at_first) / seconds)
}

fn runtime_row(
    report: &mut Report,
    scenario: &str,
    backend: &str,
    total: usize,
    (seconds, rate, starts): (f64, f64, f64),
    bound: Option<f64>,
) {
    report.row(
        Section::Runtime,
        vec![
            scenario.into(),
            backend.into(),
            total.to_string(),
            format!("{seconds:.2}"),
            format!("{starts:.2}"),
            whole(rate),
            bound.map_or("—".into(), |bound| {
                format!("{:.0}% of {bound:.0}/s", 100.0 * rate / bound)
            }),
        ],
    );
}

/// Section 2a: 100 active agents mapped to 10 channels, throttle 0, the `echo` model; each
/// task is claimed, answered, written with its activity and its outbox post.
pub(crate) async fn runtime_echo(backend: Backend, report: &mut Report) {
    let label = name(backend);
    let discord = FakeDiscord::start().await;
    let server = Agentd::start(fresh(backend).await, &discord_env(&discord)).await;
    let token = server.register(EMAIL).await;
    let (count, tasks) = (100, 100);
    agents(&server, &token, "echo", count, tasks, json!({})).await;
    map_agents(&server, &discord, &token, "echo", count, 10).await;
    let before = cost::Costs::before(&server, backend).await;
    let measured = started_rate(&server, &token, "echo", count, count * tasks).await;
    let after = cost::Costs::after(&server, backend).await;
    runtime_row(report, "echo, 100 agents, throttle 0", label, count * tasks, measured, None);
    let scenario = "echo, 100 agents, throttle 0";
    cost::cost_row(report, scenario, label, count * tasks, &before, &after);
    report.target(
        format!("Runtime ≥ 3,000 tasks/s with echo ({label})"),
        format!("{:.0}/s", measured.1),
        measured.1 >= 3000.0,
    );
    server.stop().await;
}

/// Section 2b: 1,000 active agents, a model answering after 100 ms, 64 calls at once (the
/// default `runtime.max_concurrent_calls`): the bound is 640 tasks/s.
pub(crate) async fn runtime_slow_model(backend: Backend, report: &mut Report) {
    const CONCURRENT: usize = 64;
    let label = name(backend);
    let models = FakeModels::start().await;
    models.set_latency(Duration::from_millis(100));
    let discord = FakeDiscord::start().await;
    let mut env = model_env(&models);
    env.extend(discord_env(&discord));
    env.push(("AGENTD_RUNTIME__MAX_CONCURRENT_CALLS", CONCURRENT.to_string()));
    let server = Agentd::start(fresh(backend).await, &env).await;
    let token = server.register(EMAIL).await;
    let (count, tasks) = (1000, 5);
    agents(&server, &token, "slow", count, tasks, json!({})).await;
    map_agents(&server, &discord, &token, "slow", count, 10).await;
    let before = cost::Costs::before(&server, backend).await;
    let measured = started_rate(&server, &token, "slow", count, count * tasks).await;
    let after = cost::Costs::after(&server, backend).await;
    let scenario = "100 ms model, 1,000 agents";
    cost::cost_row(report, scenario, label, count * tasks, &before, &after);
    let bound = CONCURRENT as f64 / 0.1;
    runtime_row(report, "100 ms model, 1,000 agents", label, count * tasks, measured, Some(bound));
    report.target(
        format!("100 ms model, 1,000 agents ≥ 90% of the concurrency bound ({label})"),
        format!("{:.0}% of {bound:.0}/s", 100.0 * measured.1 / bound),
        measured.1 >= 0.9 * bound,
    );
    server.stop().await;
}

/// Section 3: one active idle agent; a task is added, and the time until the model has the
/// request is measured; the next task waits until this one completed.
pub(crate) async fn dispatch(backend: Backend, report: &mut Report) {
    const WARMUP: usize = 20;
    const SAMPLES: usize = 300;
    let label = name(backend);
    let models = FakeModels::start().await;
    let server = Agentd::start(fresh(backend).await, &model_env(&models)).await;
    let token = server.register(EMAIL).await;
    agents(&server, &token, "dispatch", 1, 0, json!({})).await;
    start_agents(&server, &token, "dispatch", 1).await;
    server.wait_for_metric(RUNNING, 1.0, Duration::from_secs(30)).await;
    let mut latencies = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        let body = json!({"title": format!("Dispatch {i}")});
        let sent = Instant::now();
        let task =
            server.ok(Method::POST, "/api/agents/dispatch-0/backlog", &token, Some(body)).await;
        let received =
            poll(Duration::from_secs(10), || models.calls().get(i).map(|c| c.received)).await;
        if i >= WARMUP {
            latencies.push(u32::try_from((received - sent).as_micros()).unwrap_or(u32::MAX));
        }
        let path = format!("/api/agents/dispatch-0/backlog/{}", task["id"].as_str().unwrap());
        eventually(Duration::from_secs(10), "the task completes", || async {
            server.ok(Method::GET, &path, &token, None).await["status"] == "complete"
        })
        .await;
    }
    latencies.sort_unstable();
    let (p50, p99) = (quantile_ms(&latencies, 0.5), quantile_ms(&latencies, 0.99));
    report.row(
        Section::Dispatch,
        vec![label.into(), SAMPLES.to_string(), ms(p50), ms(p99), ms(quantile_ms(&latencies, 1.0))],
    );
    report.target(format!("Dispatch p50 < 5 ms ({label})"), format!("{p50:.2} ms"), p50 < 5.0);
    server.stop().await;
}

/// Checks `probe` every millisecond until it gives a value.
async fn poll<T>(deadline: Duration, probe: impl Fn() -> Option<T>) -> T {
    let until = Instant::now() + deadline;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < until, "nothing within {deadline:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Section 4: 10,000 active agents with empty backlogs and a 60 s throttle; once all run,
/// 10 s to settle, then resident memory and CPU over a 30 s window without requests.
pub(crate) async fn scale(backend: Backend, report: &mut Report) {
    const AGENTS: usize = 10_000;
    const WINDOW: Duration = Duration::from_secs(30);
    let label = name(backend);
    let server = Agentd::start(fresh(backend).await, &[]).await;
    let token = server.register(EMAIL).await;
    let empty = server.usage();
    agents(&server, &token, "idle", AGENTS, 0, json!({"throttle_seconds": 60})).await;
    start_agents(&server, &token, "idle", AGENTS).await;
    server.wait_for_metric(RUNNING, AGENTS as f64, Duration::from_secs(600)).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let before = server.usage();
    tokio::time::sleep(WINDOW).await;
    let after = server.usage();
    let running = server.metric(RUNNING).await;
    let cpu = 100.0 * (after.cpu - before.cpu).as_secs_f64() / WINDOW.as_secs_f64();
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    report.row(
        Section::Scale,
        vec![
            label.into(),
            whole(running),
            mib(empty.rss_kib),
            mib(after.rss_kib),
            mib(after.peak_rss_kib),
            format!("{cpu:.2}%"),
            whole(WINDOW.as_secs_f64()),
        ],
    );
    report.target(
        format!("10,000 idle agents < 150 MB resident ({label})"),
        format!("{:.1} MB", after.rss_kib as f64 * 1024.0 / 1e6),
        after.rss_kib * 1024 < 150_000_000,
    );
    report.target(
        format!("10,000 idle agents < 2% of one core ({label})"),
        format!("{cpu:.2}%"),
        cpu < 2.0,
    );
    server.stop().await;
}

/// Section 6: 10 agents, one channel each, 100 status changes per agent (1,000 posts) against
/// a fake Discord allowing 5 messages per 5 s per channel.
pub(crate) async fn discord(backend: Backend, report: &mut Report) {
    const AGENTS: usize = 10;
    const POSTS: usize = 100;
    const LIMIT: u32 = 5;
    const WINDOW: Duration = Duration::from_secs(5);
    let label = name(backend);
    let discord = FakeDiscord::start().await;
    discord.limit_messages(LIMIT, WINDOW);
    let server = Agentd::start(fresh(backend).await, &discord_env(&discord)).await;
    let token = server.register(EMAIL).await;
    agents(&server, &token, "poster", AGENTS, 0, json!({})).await;
    let channels = map_agents(&server, &discord, &token, "poster", AGENTS, AGENTS).await;
    let token = &token;
    // Status changes of one agent go in order; the agents go side by side.
    let server_ref = &server;
    futures::future::join_all((0..AGENTS).map(|a| async move {
        for i in 0..POSTS {
            let status = if i % 2 == 0 { "active" } else { "idle" };
            let body = json!({"name": format!("Post {i}"), "status": status});
            server_ref
                .ok(Method::PATCH, &format!("/api/agents/poster-{a}"), token, Some(body))
                .await;
        }
    }))
    .await;
    let total = AGENTS * POSTS;
    eventually(Duration::from_secs(600), "every post is delivered", || async {
        discord.messages().len() >= total
    })
    .await;
    let messages = discord.messages();
    let first = messages.iter().map(|m| m.at).min().unwrap();
    let last = messages.iter().map(|m| m.at).max().unwrap();
    let seconds = (last - first).as_secs_f64();
    // A channel's n-th window opens (n - 1) windows after its first message.
    let allowed = channels
        .iter()
        .map(|c| {
            let posts = messages.iter().filter(|m| &m.channel_id == c).count();
            (posts.div_ceil(LIMIT as usize).saturating_sub(1)) as f64 * WINDOW.as_secs_f64()
        })
        .fold(0.0, f64::max);
    let limited: Vec<u32> = channels.iter().map(|c| discord.rate_limited(c)).collect();
    let most = limited.iter().copied().max().unwrap_or(0);
    let ratio = seconds / allowed;
    report.row(
        Section::Discord,
        vec![
            label.into(),
            messages.len().to_string(),
            format!("{seconds:.1}"),
            format!("{allowed:.1}"),
            format!("{ratio:.3}"),
            limited.iter().sum::<u32>().to_string(),
            most.to_string(),
        ],
    );
    report.target(
        format!("Discord within 10% of the time the limits allow ({label})"),
        format!("{ratio:.3}x"),
        ratio <= 1.10,
    );
    report.target(
        format!("Discord ≤ 1 429 per channel bucket ({label})"),
        format!("at most {most}"),
        most <= 1,
    );
    server.stop().await;
}
