//! Section 8: event streams (`GET /api/events`). 100 users with one echo agent each work through
//! their backlogs; the runtime's rate is measured without streams, then with 1,000 open, 10 per
//! user (the default `quotas.streams_per_user` is 16), each following its own user's agent, so
//! every event written reaches 10 clients, which read everything sent. A probe user with 4 agents,
//! never started, adds tasks to each, one at a time, and times each `task.added` to its arrival
//! here on the probe's own stream: from the event's `at` (the server's clock when it stamped the
//! write, the same machine's clock as here) and from the moment the POST answered (the commit
//! is behind it). First, before anything else happens, 1,000 idle streams of one user (the
//! quota raised for it) weigh a stream: agentd's resident memory with them open minus without.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::Method;
use serde_json::json;
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::task::JoinSet;

use super::{COMPLETED, each, fresh, ms, shape, whole};
use crate::helpers::{Backend, eventually};
use crate::load::quantile_ms;
use crate::report::{Report, Section, name};
use crate::server::{Agentd, cpu_seconds};

/// Users whose agents work, each followed by [`PER_USER`] streams.
const USERS: usize = 100;
const PER_USER: usize = 10;
/// Streams opened at once (each is a request with its own connection).
const OPENING: usize = 64;
/// Tasks each agent holds per second of the measured window: two windows with their warm-ups,
/// and the streams opened between them, at up to about 1,200 tasks/s on the one node.
const TASKS_PER_WINDOW_SECOND: f64 = 30.0;
/// The probe's agents (never started), each adding its tasks one at a time, side by side.
const PROBES: usize = 4;
/// The probe's pause between one task's event and its next task.
const PROBE_GAP: Duration = Duration::from_millis(10);
/// Quiet before each memory reading.
const SETTLE: Duration = Duration::from_secs(1);
/// How long the probe waits for its event before the run fails.
const PROBE_WAIT: Duration = Duration::from_secs(30);

/// What the clients of a set of streams saw.
#[derive(Debug, Default)]
struct Tally {
    /// SSE messages received (their `data:` lines), all streams.
    messages: AtomicU64,
    /// Whether the sampled streams are keeping delays now.
    recording: AtomicBool,
    /// Delays (µs) from an event's `at` to its arrival, on one stream per user.
    delays: Mutex<Vec<u32>>,
}

/// The load side of a set of open streams; dropping it closes them.
struct Streams {
    _readers: JoinSet<()>,
}

/// What one stream's reader does with each message.
#[derive(Clone)]
enum Sink {
    /// Counts it, and when `sample`, keeps its delay while the tally records.
    Count { tally: Arc<Tally>, sample: bool },
    /// Notes each `task.added`'s arrival and delay from its `at` (the probe's stream).
    Probe(Arc<Arrivals>),
}

/// Section 8: the runtime without streams and with 1,000, the probe's delay in both, and
/// the memory of 1,000 idle streams.
pub(crate) async fn streams(backend: Backend, report: &mut Report) {
    let label = name(backend);
    open_files_up_to_the_hard_limit();
    // One user holds the 1,000 idle streams of the memory figure, so the quota is raised; the
    // working users hold 10 each, within the default.
    let quota = [("AGENTD_QUOTAS__STREAMS_PER_USER", (USERS * PER_USER).to_string())];
    let server = Agentd::start(fresh(backend).await, &quota).await;
    let base = format!("http://{}", server.address);
    let client = reqwest::Client::new();
    memory(&server, &client, &base, label, report).await;

    let tokens = users(&server).await;
    let probe_token = server.register("stream-probe@example.com").await;
    for i in 0..PROBES {
        let agent = json!({"id": format!("probe{i}"), "name": "Probe",
            "role_prompt": "You take notes.", "channel": "probe"});
        server.ok(Method::POST, "/api/agents", &probe_token, Some(agent)).await;
    }
    let tasks = (TASKS_PER_WINDOW_SECOND * shape().measure.as_secs_f64()).ceil() as usize;
    backlogs(&server, &tokens, tasks).await;
    let total = (USERS * tasks) as f64;
    let probe = Probe::open(&client, &base, probe_token).await;
    let tally = Arc::new(Tally::default());
    let server_ref = &server;
    each(tokens.iter().enumerate(), |(i, token)| async move {
        server_ref.ok(Method::POST, &format!("/api/agents/w{i}/start"), token, None).await;
    })
    .await;
    let alone = window(&server, &probe, &tally).await;
    let following = Streams::open(&client, &base, &tokens, PER_USER, &tally).await;
    let with_streams = window(&server, &probe, &tally).await;
    drop(following);
    let done = server.metric(COMPLETED).await;
    assert!(
        done < 0.9 * total,
        "{done} of {total} tasks completed: the backlogs ran low before the last window closed \
         (raise TASKS_PER_WINDOW_SECOND)"
    );
    stream_rows(report, "none (the probe's own)", label, &alone, alone.rate);
    stream_rows(report, "1,000 following their users' agents", label, &with_streams, alone.rate);
    server.stop().await;
}

/// agentd's resident memory with 1,000 idle streams of one user open minus without, before
/// anything else happens: a single sign-up so far, whose password hash's memory went back to
/// the system (more hashes would leave freed memory in agentd's heap for the streams to reuse,
/// and the difference would read low).
async fn memory(
    server: &Agentd,
    client: &reqwest::Client,
    base: &str,
    label: &str,
    report: &mut Report,
) {
    let watcher = [server.register("stream-watcher@example.com").await];
    let streams = USERS * PER_USER;
    tokio::time::sleep(SETTLE).await;
    let without = server.usage().rss_kib;
    let opening = Instant::now();
    let idle = Streams::open(client, base, &watcher, streams, &Arc::default()).await;
    let opened_in = opening.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let with = server.usage().rss_kib;
    // The server notices a closed idle stream at its next heartbeat; its user has no events.
    drop(idle);
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    let per_stream = with.saturating_sub(without) as f64 / streams as f64;
    report.row(
        Section::StreamMemory,
        vec![
            label.into(),
            mib(without),
            mib(with),
            format!("{per_stream:.1}"),
            format!("{opened_in:.2}"),
        ],
    );
}

/// Registers the working users; each gets agent `w<i>` (echo, throttle 0). Their tokens.
async fn users(server: &Agentd) -> Vec<String> {
    let tokens = Mutex::new(vec![String::new(); USERS]);
    each(0..USERS, |i| {
        let tokens = &tokens;
        async move {
            let token = server.register(&format!("stream-{i}@example.com")).await;
            let body = json!({"id": format!("w{i}"), "name": format!("Worker {i}"),
                "role_prompt": format!("You are worker {i}; you answer briefly."),
                "channel": "bench"});
            server.ok(Method::POST, "/api/agents", &token, Some(body)).await;
            tokens.lock().unwrap()[i] = token;
        }
    })
    .await;
    tokens.into_inner().unwrap()
}

/// `tasks` tasks in each working user's backlog.
async fn backlogs(server: &Agentd, tokens: &[String], tasks: usize) {
    let all = (0..tokens.len()).flat_map(|u| (0..tasks).map(move |t| (u, t)));
    each(all, |(u, t)| async move {
        let path = format!("/api/agents/w{u}/backlog");
        server
            .ok(Method::POST, &path, &tokens[u], Some(json!({"title": format!("Task {t}")})))
            .await;
    })
    .await;
}

/// The descriptors 1,000 streams need at both ends (agentd inherits the limit).
fn open_files_up_to_the_hard_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    if let Err(error) = setrlimit(Resource::Nofile, limit) {
        println!("cannot raise the open-file limit: {error}");
    }
}

impl Streams {
    /// Opens `per_user` streams of `GET /api/events` for each of `tokens`, and returns once
    /// every one has answered 200; their readers count what comes into `tally`, and the first
    /// stream of each user samples delays.
    async fn open(
        client: &reqwest::Client,
        base: &str,
        tokens: &[String],
        per_user: usize,
        tally: &Arc<Tally>,
    ) -> Self {
        let opening = Arc::new(Semaphore::new(OPENING));
        let (opened, mut answered) = mpsc::unbounded_channel::<()>();
        let mut readers = JoinSet::new();
        for token in tokens {
            for n in 0..per_user {
                let sink = Sink::Count { tally: Arc::clone(tally), sample: n == 0 };
                let request = client.get(format!("{base}/api/events")).bearer_auth(token);
                let (opening, opened) = (Arc::clone(&opening), opened.clone());
                readers.spawn(async move {
                    let permit = opening.acquire_owned().await.expect("the semaphore stays open");
                    let response = request.send().await.expect("agentd answers a stream request");
                    let status = response.status();
                    assert_eq!(
                        status,
                        200,
                        "GET /api/events: {}",
                        response.text().await.unwrap_or_default()
                    );
                    drop(permit);
                    let _ = opened.send(());
                    read(response, sink).await;
                });
            }
        }
        for _ in 0..tokens.len() * per_user {
            answered.recv().await.expect("every stream opens (a reader panicked?)");
        }
        Self { _readers: readers }
    }
}

/// Reads a stream until it ends, handing each `data:` line to `sink`.
async fn read(mut response: reqwest::Response, sink: Sink) {
    let mut pending: Vec<u8> = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let arrived = Utc::now();
        pending.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(end) = pending[start..].iter().position(|b| *b == b'\n') {
            let line = &pending[start..start + end];
            start += end + 1;
            let Some(data) = line.strip_prefix(b"data:") else { continue };
            match &sink {
                Sink::Count { tally, sample } => {
                    tally.messages.fetch_add(1, Ordering::Relaxed);
                    if *sample
                        && tally.recording.load(Ordering::Relaxed)
                        && let Some(delay) = delay_us(data, arrived)
                    {
                        tally.delays.lock().unwrap().push(delay);
                    }
                }
                Sink::Probe(arrivals) => arrivals.note(data, arrived),
            }
        }
        pending.drain(..start);
    }
}

/// From the event's `at` (read from its JSON without parsing the rest) to `arrived`, in µs.
fn delay_us(data: &[u8], arrived: DateTime<Utc>) -> Option<u32> {
    const KEY: &[u8] = b"\"at\":\"";
    let from = data.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let length = data[from..].iter().position(|b| *b == b'"')?;
    let at = std::str::from_utf8(&data[from..from + length]).ok()?;
    let at = DateTime::parse_from_rfc3339(at).ok()?;
    Some(micros(arrived - at.with_timezone(&Utc)))
}

/// The `task.added` events the probe's stream brought: by task id, when each arrived and its
/// delay from its `at` (µs).
#[derive(Debug, Default)]
struct Arrivals {
    seen: Mutex<std::collections::HashMap<String, (DateTime<Utc>, u32)>>,
    changed: Notify,
}

impl Arrivals {
    fn note(&self, data: &[u8], arrived: DateTime<Utc>) {
        let text = String::from_utf8_lossy(data);
        if !text.contains("\"type\":\"task.added\"") {
            return;
        }
        let Some(task) = text.split("\"task_id\":\"").nth(1).and_then(|t| t.split('"').next())
        else {
            return;
        };
        let delay = delay_us(data, arrived).expect("an event with `at`");
        self.seen.lock().unwrap().insert(task.to_owned(), (arrived, delay));
        self.changed.notify_waiters();
    }

    /// When task `id`'s event arrived and its delay from `at`, once it has.
    async fn of(&self, id: &str) -> (DateTime<Utc>, u32) {
        let deadline = tokio::time::Instant::now() + PROBE_WAIT;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(seen) = self.seen.lock().unwrap().remove(id) {
                return seen;
            }
            tokio::time::timeout_at(deadline, changed)
                .await
                .unwrap_or_else(|_| panic!("no task.added for {id} within {PROBE_WAIT:?}"));
        }
    }
}

/// The probe user's stream and token.
struct Probe {
    token: String,
    arrivals: Arc<Arrivals>,
    added: AtomicU64,
    _reader: tokio::task::JoinHandle<()>,
}

impl Probe {
    async fn open(client: &reqwest::Client, base: &str, token: String) -> Self {
        let response = client
            .get(format!("{base}/api/events"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("agentd answers the probe's stream request");
        assert_eq!(response.status(), 200, "the probe's stream");
        let arrivals = Arc::new(Arrivals::default());
        let reader = tokio::spawn(read(response, Sink::Probe(Arc::clone(&arrivals))));
        Self { token, arrivals, added: AtomicU64::new(0), _reader: reader }
    }

    /// Each probe agent adds tasks one after another until `until`; the delays of each one's
    /// `task.added`, from its `at` and from the POST's answer (µs, sorted; 0 for an event that
    /// came first).
    async fn until(&self, server: &Agentd, until: Instant) -> (Vec<u32>, Vec<u32>) {
        let runs = (0..PROBES).map(|agent| self.one_agent(server, agent, until));
        let (mut from_at, mut from_answer): (Vec<u32>, Vec<u32>) =
            futures::future::join_all(runs).await.into_iter().flatten().unzip();
        from_at.sort_unstable();
        from_answer.sort_unstable();
        (from_at, from_answer)
    }

    async fn one_agent(&self, server: &Agentd, agent: usize, until: Instant) -> Vec<(u32, u32)> {
        let mut delays = Vec::new();
        let path = format!("/api/agents/probe{agent}/backlog");
        while Instant::now() < until {
            let n = self.added.fetch_add(1, Ordering::Relaxed);
            let body = json!({"title": format!("Probe {n}")});
            let task = server.ok(Method::POST, &path, &self.token, Some(body)).await;
            let answered = Utc::now();
            let (arrived, from_at) =
                self.arrivals.of(task["id"].as_str().expect("a task id")).await;
            delays.push((from_at, micros(arrived - answered)));
            tokio::time::sleep(PROBE_GAP).await;
        }
        delays
    }
}

/// A duration in whole µs, 0 when negative.
fn micros(delta: chrono::TimeDelta) -> u32 {
    let micros = delta.num_microseconds().unwrap_or(i64::MAX).max(0);
    u32::try_from(micros).unwrap_or(u32::MAX)
}

/// What one measured window gave.
struct Window {
    /// Tasks completed a second.
    rate: f64,
    /// SSE messages received a second, all streams but the probe's.
    messages: f64,
    /// The probe's delays from the events' `at` and from the POSTs' answers, and the
    /// followers' from `at` (µs, sorted).
    probe: (Vec<u32>, Vec<u32>),
    followers: Vec<u32>,
    /// CPU used, in cores: agentd's, and this program's (the streams' clients and the probe).
    agentd_cores: f64,
    clients_cores: f64,
}

/// One warm-up, then a measured window of [`shape`]'s length with the probe adding tasks.
async fn window(server: &Agentd, probe: &Probe, tally: &Tally) -> Window {
    let shape = shape();
    tokio::time::sleep(shape.warmup).await;
    eventually(Duration::from_secs(60), "the agents complete tasks", || async {
        server.metric(COMPLETED).await > 0.0
    })
    .await;
    tally.delays.lock().unwrap().clear();
    tally.recording.store(true, Ordering::Relaxed);
    let cpu = || (cpu_seconds(server.pid()), cpu_seconds(std::process::id()));
    let (started, done, messages, used) = (
        Instant::now(),
        server.metric(COMPLETED).await,
        tally.messages.load(Ordering::Relaxed),
        cpu(),
    );
    let probe = probe.until(server, started + shape.measure).await;
    let (seconds, done) = (started.elapsed().as_secs_f64(), server.metric(COMPLETED).await - done);
    let messages = tally.messages.load(Ordering::Relaxed) - messages;
    let now_used = cpu();
    tally.recording.store(false, Ordering::Relaxed);
    let mut followers = std::mem::take(&mut *tally.delays.lock().unwrap());
    followers.sort_unstable();
    Window {
        rate: done / seconds,
        messages: messages as f64 / seconds,
        probe,
        followers,
        agentd_cores: (now_used.0 - used.0) / seconds,
        clients_cores: (now_used.1 - used.1) / seconds,
    }
}

fn stream_rows(report: &mut Report, streams: &str, backend: &str, run: &Window, alone: f64) {
    report.row(
        Section::Streams,
        vec![
            streams.into(),
            backend.into(),
            whole(run.rate),
            format!("{:.0}%", 100.0 * run.rate / alone),
            format!("{:.2} / {:.2}", run.agentd_cores, run.clients_cores),
            whole(run.messages),
        ],
    );
    let quantile = |delays: &[u32], q: f64| {
        if delays.is_empty() { "—".to_owned() } else { ms(quantile_ms(delays, q)) }
    };
    let (from_at, from_answer) = &run.probe;
    report.row(
        Section::EventDelay,
        vec![
            streams.into(),
            backend.into(),
            from_at.len().to_string(),
            quantile(from_at, 0.5),
            quantile(from_at, 0.99),
            quantile(from_answer, 0.5),
            quantile(from_answer, 0.99),
            quantile(&run.followers, 0.5),
            quantile(&run.followers, 0.99),
        ],
    );
}
