//! The PostgreSQL server goes away under a running node, with tasks in flight and posts
//! pending, and comes back: everything completes exactly once, each result is posted once,
//! and `/readyz` says "not ready" while the database is gone and "ready" after.
//!
//! The test runs a PostgreSQL server of its own (initdb in a temporary directory, on a free
//! port), so stopping it disturbs no other test.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Connection;

use super::{free_port, get};
use crate::fake_discord::FakeDiscord;
use crate::fake_models::FakeModels;
use crate::helpers::eventually;
use crate::process::{Server, posted_titles};

/// A PostgreSQL server in a temporary directory, stopped when dropped.
pub(super) struct PrivatePostgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

impl PrivatePostgres {
    /// `None` when PostgreSQL's server programs are not installed (and not required).
    pub(super) fn start() -> Option<Self> {
        let bin = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|versions| {
            versions
                .filter_map(Result::ok)
                .map(|v| v.path().join("bin"))
                .find(|b| b.join("pg_ctl").exists())
        });
        let Some(bin) = bin else {
            assert!(
                !std::env::var("AGENTD_TEST_REQUIRE_POSTGRES").is_ok_and(|v| v == "1"),
                "AGENTD_TEST_REQUIRE_POSTGRES=1 but PostgreSQL's server programs are not in /usr/lib/postgresql"
            );
            eprintln!("note: PostgreSQL restart test skipped: no PostgreSQL server programs");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        // PostgreSQL refuses to run as root: as root, the cluster belongs to `postgres`.
        if rustix::process::geteuid().is_root() {
            let uid = String::from_utf8(
                Command::new("id").args(["-u", "postgres"]).output().unwrap().stdout,
            )
            .unwrap();
            let gid = String::from_utf8(
                Command::new("id").args(["-g", "postgres"]).output().unwrap().stdout,
            )
            .unwrap();
            std::os::unix::fs::chown(dir.path(), uid.trim().parse().ok(), gid.trim().parse().ok())
                .unwrap();
        }
        let pg = Self { data: dir.path().join("data"), port: free_port(), bin, _dir: dir };
        pg.run(
            "initdb",
            &["-D", &pg.data.display().to_string(), "-A", "trust", "-U", "postgres", "--no-sync"],
        );
        pg.ctl(&["start"]);
        Some(pg)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub(super) fn ctl(&self, action: &[&str]) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.data.display()
        );
        let mut args =
            vec!["-D", self.data.to_str().unwrap(), "-o", &options, "-w", "-m", "fast", "-l"];
        let log = self.data.with_file_name("postgres.log").display().to_string();
        args.push(&log);
        args.extend_from_slice(action);
        self.run("pg_ctl", &args);
    }

    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program).display().to_string();
        let mut command = if rustix::process::geteuid().is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", &path]);
            command
        } else {
            Command::new(&path)
        };
        let output = command.args(args).output().expect("PostgreSQL's programs run");
        assert!(
            output.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    async fn count(&self, sql: &str) -> i64 {
        let mut conn = sqlx::PgConnection::connect(&self.url()).await.unwrap();
        let count: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
        conn.close().await.ok();
        count
    }

    async fn texts(&self, sql: &str) -> Vec<String> {
        let mut conn = sqlx::PgConnection::connect(&self.url()).await.unwrap();
        let texts: Vec<String> = sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap();
        conn.close().await.ok();
        texts
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data.display().to_string();
        let _ = std::panic::catch_unwind(|| {
            self.run("pg_ctl", &["-D", &data, "-m", "immediate", "stop"])
        });
    }
}

/// agentd on `pg`, its models faked by `models`, with leases of 2 s and a poll of 0.5 s.
pub(super) fn agentd_env(
    pg: &PrivatePostgres,
    models: &FakeModels,
    data_dir: &tempfile::TempDir,
) -> Vec<(&'static str, String)> {
    crate::process::runtime_env_on(pg.url(), data_dir, models)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_restart_mid_run_loses_nothing_and_repeats_nothing() {
    const AGENTS: usize = 3;
    const TASKS: usize = 8;
    let Some(pg) = PrivatePostgres::start() else { return };
    let models = FakeModels::start().await;
    models.set_latency(Duration::from_millis(250));
    let discord = FakeDiscord::start().await;
    discord.add_bot("pg-bot.1", "PgBot");
    discord.add_guild("333", "Restart", &["pg-bot.1"]);
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = agentd_env(&pg, &models, &data_dir);
    env.push(("AGENTD_DISCORD__API_BASE", discord.api_base.clone()));
    let server = Server::start(&env).await;
    let token = server.register("restart@example.com").await;
    server.connect(&token, "pg-bot.1", "333").await;
    for a in 0..AGENTS {
        let id = format!("agent-{a}");
        server.mapped_agent(&token, (&id, &id), "333", "3331").await;
        for t in 0..TASKS {
            server
                .post(
                    &format!("/api/agents/{id}/backlog"),
                    &token,
                    json!({"title": format!("{id} task {t}")}),
                    201,
                )
                .await;
        }
        server.post(&format!("/api/agents/{id}/start"), &token, Value::Null, 200).await;
    }
    let total = (AGENTS * TASKS) as i64;
    eventually(Duration::from_secs(30), "some tasks complete", || async {
        pg.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'").await >= AGENTS as i64
    })
    .await;

    // Down for longer than a lease, with calls in flight.
    pg.ctl(&["stop"]);
    eventually(Duration::from_secs(30), "/readyz says not ready", || async {
        let (status, body) = get(&server, "/readyz", None).await;
        status == 503 && body["error"]["code"] == "not_ready"
    })
    .await;
    let (status, refused) = server
        .send(
            reqwest::Method::POST,
            "/api/agents/agent-0/backlog",
            Some(&token),
            json!({"title": "While down"}),
        )
        .await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"]["code"], "storage_unavailable");
    tokio::time::sleep(Duration::from_secs(3)).await; // the outage itself
    pg.ctl(&["start"]);

    eventually(Duration::from_secs(30), "/readyz recovers", || async {
        get(&server, "/readyz", None).await.0 == 200
    })
    .await;
    // Reads in quick succession (no connection idle long enough to be tested first): once one
    // finds its connection lost, none from before the restart is used again. Each asks for
    // another workspace, so none is answered from the read cache (`http.read_cache`).
    let reads = std::sync::atomic::AtomicUsize::new(0);
    eventually(Duration::from_secs(30), "twenty reads in a row succeed", || async {
        for _ in 0..20 {
            let n = reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = format!("/api/agents?workspace=w{n}");
            if get(&server, &path, Some(&token)).await.0 != 200 {
                return false;
            }
        }
        true
    })
    .await;
    server
        .post("/api/agents/agent-0/backlog", &token, json!({"title": "agent-0 task after"}), 201)
        .await;
    let total = total + 1;
    eventually(Duration::from_secs(90), "every task completes", || async {
        // The outage is the database's fault, never a task's: none ends failed.
        let failed =
            "SELECT title || ': ' || COALESCE(error, '') FROM tasks WHERE status = 'failed'";
        let failed = pg.texts(failed).await;
        assert!(failed.is_empty(), "tasks failed: {failed:?}");
        pg.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'").await == total
    })
    .await;
    let doubled = pg.count("SELECT COUNT(*) FROM (SELECT task_id FROM activity WHERE action = 'task_completed' GROUP BY task_id HAVING COUNT(*) > 1) AS d").await;
    assert_eq!(doubled, 0, "a result was written twice");
    assert_eq!(
        pg.count("SELECT COUNT(*) FROM tasks WHERE title = 'While down'").await,
        0,
        "the refused write was not stored"
    );

    let results = || posted_titles(&discord, "3331", " task ");
    eventually(Duration::from_secs(90), "every result is posted", || async {
        results().len() as i64 == total
    })
    .await;
    assert!(results().values().all(|n| *n == 1), "a result was posted twice");
    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "{exit:?}");
}
