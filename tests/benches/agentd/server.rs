//! The processes under measurement: the real `agentd` binary on a fresh database, and a bare
//! axum server (this benchmark program started again with `--serve-bare`) as the yardstick.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::helpers::{TestDb, eventually, metric_samples, sample};

pub(crate) const PASSWORD: &str = "correct horse battery";

/// A running `agentd` on its own database and data directory; killed when dropped.
pub(crate) struct Agentd {
    child: Child,
    pub address: SocketAddr,
    base: String,
    client: reqwest::Client,
    pub db: TestDb,
    _data_dir: tempfile::TempDir,
}

impl Agentd {
    /// Starts agentd with the abuse limits and the queue quotas off (one user drives all the
    /// load), room for 20,000 agents on the free plan, its log in a file, and `env` on top.
    pub(crate) async fn start(db: TestDb, env: &[(&str, String)]) -> Self {
        Self::start_on(db, env, None).await
    }

    /// [`Agentd::start`] on the CPUs `cpus` names (`taskset -c`), or on all of them.
    pub(crate) async fn start_on(db: TestDb, env: &[(&str, String)], cpus: Option<&str>) -> Self {
        let data_dir = tempfile::tempdir().expect("a data directory");
        let address = free_address();
        let log = std::fs::File::create(data_dir.path().join("agentd.log")).expect("a log file");
        // `AGENTD_BENCH_BINARY`: another build to measure (an older commit's, for an A/B run).
        let binary = std::env::var_os("AGENTD_BENCH_BINARY")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_agentd-under-test").into());
        let mut command = pinned(binary, cpus);
        command
            .args(["--bind", &address.to_string()])
            .env("AGENTD_DATA_DIR", data_dir.path())
            .env("AGENTD_DATABASE_URL", db.url_for_process())
            .env("AGENTD_LIMITS__REQUESTS_PER_MINUTE", "0")
            .env("AGENTD_LIMITS__AUTH_PER_MINUTE", "0")
            .env("AGENTD_LIMITS__SIGN_INS_PER_ACCOUNT_PER_MINUTE", "0")
            .env("AGENTD_QUOTAS__QUEUED_TASKS_PER_AGENT", "0")
            .env("AGENTD_QUOTAS__QUEUED_TASKS_PER_USER", "0")
            .env("AGENTD_BILLING__PLANS", "free=20000")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true);
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().expect("agentd starts");
        let server = Self {
            child,
            address,
            base: format!("http://{address}"),
            client: reqwest::Client::new(),
            db,
            _data_dir: data_dir,
        };
        eventually(Duration::from_secs(60), "agentd answers /healthz", || async {
            server.client.get(format!("{}/healthz", server.base)).send().await.is_ok()
        })
        .await;
        server
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("agentd is running")
    }

    /// Sends a request and returns the status and the JSON body (null when there is none).
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("agentd answers");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Like [`Agentd::call`], and the answer must be a success.
    pub(crate) async fn ok(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Value {
        let (status, reply) = self.call(method.clone(), path, Some(token), body).await;
        assert!((200..300).contains(&status), "{method} {path}: {status} {reply}");
        reply
    }

    /// Registers `email` and returns its bearer token.
    pub(crate) async fn register(&self, email: &str) -> String {
        let body = json!({"email": email, "password": PASSWORD, "name": "Bench"});
        let (status, reply) = self.call(Method::POST, "/auth/register", None, Some(body)).await;
        assert_eq!(status, 201, "register: {reply}");
        reply["access_token"].as_str().expect("a token").to_owned()
    }

    /// The value of `series` (name and labels, as `/metrics` prints them); a series agentd
    /// does not print fails at once.
    pub(crate) async fn metric(&self, series: &str) -> f64 {
        let text = self
            .client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .expect("agentd answers /metrics")
            .text()
            .await
            .expect("a metrics body");
        sample(&metric_samples(&text), series)
    }

    /// Waits until `series` reaches `at_least`, looking every 20 ms; returns when it was first
    /// seen there, and its value then.
    pub(crate) async fn wait_for_metric(
        &self,
        series: &str,
        at_least: f64,
        deadline: Duration,
    ) -> (Instant, f64) {
        let until = Instant::now() + deadline;
        loop {
            let value = self.metric(series).await;
            if value >= at_least {
                return (Instant::now(), value);
            }
            assert!(Instant::now() < until, "{series} stayed at {value}, below {at_least}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Resident memory now and at its peak (KiB), and CPU time used so far.
    pub(crate) fn usage(&self) -> Usage {
        usage(self.pid())
    }

    /// SIGTERM, then waits for the exit (it lets tasks in progress finish).
    pub(crate) async fn stop(mut self) -> TestDb {
        let pid = self.pid().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status().await;
        let _ = tokio::time::timeout(Duration::from_secs(60), self.child.wait()).await;
        self.db
    }
}

/// A loopback address nobody listens on now (bound and released: agentd binds it next).
fn free_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address")
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Usage {
    pub rss_kib: u64,
    pub peak_rss_kib: u64,
    pub cpu: Duration,
}

/// From `/proc/<pid>/status` (VmRSS, VmHWM) and `/proc/<pid>/stat` (utime + stime).
pub(crate) fn usage(pid: u32) -> Usage {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .expect("a memory figure")
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    // The command name may hold spaces; the fields after it are space-separated.
    let after_name = &stat[stat.rfind(')').expect("a command name") + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    let per_second = rustix::param::clock_ticks_per_second();
    Usage {
        rss_kib: field("VmRSS:"),
        peak_rss_kib: field("VmHWM:"),
        cpu: Duration::from_secs_f64(ticks as f64 / per_second as f64),
    }
}

/// The yardstick: a bare axum server answering a small JSON body, in a process of its own with
/// the same runtime agentd uses.
pub(crate) struct Bare {
    child: Child,
    pub address: SocketAddr,
}

impl Bare {
    pub(crate) async fn start() -> Self {
        Self::start_on(None).await
    }

    /// [`Bare::start`] on the CPUs `cpus` names (`taskset -c`), or on all of them.
    pub(crate) async fn start_on(cpus: Option<&str>) -> Self {
        let mut child = pinned(std::env::current_exe().expect("this program").into(), cpus)
            .arg("--serve-bare")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the bare server starts");
        let stdout = child.stdout.take().expect("stdout piped");
        let line = tokio::time::timeout(Duration::from_secs(30), async {
            BufReader::new(stdout).lines().next_line().await
        })
        .await
        .expect("the bare server reports its address in time")
        .expect("its stdout")
        .expect("an address line");
        Self { child, address: line.trim().parse().expect("an address") }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("the bare server is running")
    }
}

/// `program`, under `taskset -c <cpus>` when `cpus` names some.
fn pinned(program: std::ffi::OsString, cpus: Option<&str>) -> Command {
    match cpus {
        Some(cpus) => {
            let mut command = Command::new("taskset");
            command.args(["-c", cpus]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// CPU seconds process `pid` has used so far, all its threads (`/proc/<pid>/stat`).
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process's stat");
    // The fields after the command name (in parentheses, which may hold spaces).
    let after = &stat[stat.rfind(')').expect("a command name") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime: fields 14 and 15 of the line, 12 and 13 after the name, in ticks.
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / TICKS_PER_SECOND
}

/// `sysconf(_SC_CLK_TCK)`, which is 100 on every Linux build this runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// `--serve-bare`: one route, `GET /`, answering `{"status":"ok"}`.
pub(crate) fn serve_bare() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { axum::Json(json!({"status": "ok"})) }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        println!("{}", listener.local_addr().expect("its address"));
        axum::serve(listener, app).await.expect("serves");
    });
}
