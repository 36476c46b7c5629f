//! Nodes whose clocks disagree (libfaketime moves one node's wall clock 45 s ahead or behind,
//! its monotonic clock untouched) and a node frozen past its leases (SIGSTOP): leases are
//! judged by the database's clock, so no model call is made twice, no agent runs on two nodes
//! at once, and every result is written and posted once. PostgreSQL only: SQLite nodes share
//! one machine and its clock.
//!
//! libfaketime comes from Debian's `faketime` package; without it these tests pass with a
//! notice, unless `AGENTD_TEST_REQUIRE_FAKETIME=1` (set by `.ci/run`, which installs it).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::metric;
use crate::fake_discord::FakeDiscord;
use crate::fake_models::FakeModels;
use crate::helpers::{Backend, TestDb, eventually};
use crate::process::{Server, completions, posted_titles, runtime_env};

const AGENTS: usize = 16;

fn libfaketime() -> Option<String> {
    let found = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ]
    .into_iter()
    .find(|path| std::path::Path::new(path).exists());
    if found.is_none() {
        assert!(
            !std::env::var("AGENTD_TEST_REQUIRE_FAKETIME").is_ok_and(|v| v == "1"),
            "AGENTD_TEST_REQUIRE_FAKETIME=1 but libfaketime is not installed (Debian: faketime)"
        );
        eprintln!("note: clock skew test skipped: libfaketime is not installed");
    }
    found.map(str::to_owned)
}

/// Two nodes on one PostgreSQL database, the second with `extra` in its environment; 16
/// agents with one task each, a model that takes 2.5 s, leases of 3 s.
struct Cluster {
    db: TestDb,
    models: FakeModels,
    discord: FakeDiscord,
    nodes: Vec<Server>,
    _data_dir: tempfile::TempDir,
}

impl Cluster {
    async fn start(extra: &[(&'static str, String)]) -> Option<Self> {
        let db = TestDb::create(Backend::Postgres).await?;
        let models = FakeModels::start().await;
        models.set_latency(Duration::from_millis(2500));
        let discord = FakeDiscord::start().await;
        discord.add_bot("clock-bot.1", "ClockBot");
        discord.add_guild("666", "Clocks", &["clock-bot.1"]);
        let data_dir = tempfile::tempdir().unwrap();
        let mut env = runtime_env(&db, &data_dir, &models);
        env.retain(|(name, _)| *name != "AGENTD_RUNTIME__LEASE_SECONDS");
        env.push(("AGENTD_RUNTIME__LEASE_SECONDS", "3".into()));
        env.push(("AGENTD_DISCORD__API_BASE", discord.api_base.clone()));
        let first = Server::start(&env).await;
        env.extend_from_slice(extra);
        let second = Server::start(&env).await;
        Some(Self { db, models, discord, nodes: vec![first, second], _data_dir: data_dir })
    }

    /// Registers, maps 16 agents to one channel with a task each, and starts them.
    async fn work(&self) {
        let node = &self.nodes[0];
        let token = node.register("clocks@example.com").await;
        self.db.execute("UPDATE workspaces SET plan = 'team'", &[]).await;
        node.connect(&token, "clock-bot.1", "666").await;
        for a in 0..AGENTS {
            let id = format!("agent-{a:02}");
            node.mapped_agent(&token, (&id, &id), "666", "6661").await;
            node.post(
                &format!("/api/agents/{id}/backlog"),
                &token,
                json!({"title": format!("{id} task")}),
                201,
            )
            .await;
        }
        for a in 0..AGENTS {
            node.post(&format!("/api/agents/agent-{a:02}/start"), &token, Value::Null, 200).await;
        }
    }

    /// Every task completes; each was written and posted once.
    async fn all_done_once(&self) {
        let total = AGENTS as i64;
        eventually(Duration::from_secs(90), "every task completes", || async {
            self.db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await
                == total
        })
        .await;
        assert_eq!(completions(&self.db).await, (0, total), "a result was written twice");
        let posted = || posted_titles(&self.discord, "6661", " task");
        eventually(Duration::from_secs(60), "every result is posted", || async {
            posted().len() == AGENTS
        })
        .await;
        assert!(posted().values().all(|n| *n == 1), "a result was posted twice: {:?}", posted());
    }

    /// Model calls per task title.
    fn calls_per_task(&self) -> HashMap<String, usize> {
        let mut calls = HashMap::new();
        for call in self.models.calls() {
            *calls.entry(call.user().to_owned()).or_default() += 1;
        }
        calls
    }
}

async fn skewed_node_changes_nothing(offset: &str) {
    let Some(library) = libfaketime() else { return };
    let skewed = [
        ("LD_PRELOAD", library),
        ("FAKETIME", offset.to_owned()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
        ("FAKETIME_NO_CACHE", "1".to_owned()),
    ];
    let Some(cluster) = Cluster::start(&skewed).await else { return };
    cluster.work().await;
    cluster.all_done_once().await;
    let calls = cluster.calls_per_task();
    assert_eq!(calls.len(), AGENTS);
    assert!(calls.values().all(|n| *n == 1), "a task was sent to the model twice: {calls:?}");
    // The skew is measured and reported by the skewed node.
    let skewed = &cluster.nodes[1];
    let skew = metric(skewed, "agentd_clock_skew_seconds").await;
    let expected: f64 = offset.trim_end_matches('s').parse().unwrap();
    assert!(
        (skew - expected).abs() < 3.0,
        "agentd_clock_skew_seconds {skew}, expected about {expected}"
    );
    assert!(metric(&cluster.nodes[0], "agentd_clock_skew_seconds").await.abs() < 3.0);
    assert!(
        skewed.logged("database's") && skewed.logged("skew_seconds"),
        "the skew is logged as a warning"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_45_seconds_ahead_takes_over_nothing_and_calls_each_task_once() {
    skewed_node_changes_nothing("+45s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_45_seconds_behind_holds_nothing_past_its_lease_and_calls_each_task_once() {
    skewed_node_changes_nothing("-45s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_frozen_past_its_leases_writes_nothing_late_and_posts_nothing_twice() {
    let Some(cluster) = Cluster::start(&[]).await else { return };
    cluster.work().await;
    let frozen = &cluster.nodes[1];
    eventually(Duration::from_secs(30), "both nodes have calls in flight", || async {
        cluster.models.calls().len() >= AGENTS
    })
    .await;
    let completed_before = metric(frozen, "agentd_tasks_total{outcome=\"completed\"}").await;
    frozen.send_signal("-STOP").await;
    // Frozen for three lease lengths: the other node takes its agents and tasks over.
    eventually(Duration::from_secs(60), "the other node finishes everything", || async {
        cluster.db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await
            == AGENTS as i64
    })
    .await;
    frozen.send_signal("-CONT").await;
    cluster.all_done_once().await;
    // The frozen node woke up with answers to calls it no longer held: it dropped them.
    eventually(Duration::from_secs(30), "the late results are dropped", || async {
        metric(frozen, "agentd_tasks_total{outcome=\"dropped\"}").await >= 1.0
    })
    .await;
    let completed_after = metric(frozen, "agentd_tasks_total{outcome=\"completed\"}").await;
    assert_eq!(completed_after, completed_before, "nothing written late");
    assert_eq!(completions(&cluster.db).await, (0, AGENTS as i64));
}
