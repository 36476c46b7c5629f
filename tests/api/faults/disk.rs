//! A full disk under the embedded SQLite database: writes are refused with 507 while it
//! lasts, readiness says why, and everything works again once space is freed, without a
//! restart: the HTTP API, the runtime and the outbox.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{Tmpfs, get, metric};
use crate::fake_discord::FakeDiscord;
use crate::helpers::eventually;
use crate::process::Server;

const FULL: &str = "agentd_storage_faults_total{kind=\"full\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_with_507_and_they_work_again_once_space_is_freed() {
    let Some(disk) = Tmpfs::mount("6m") else { return };
    let discord = FakeDiscord::start().await;
    discord.add_bot("disk-bot.1", "DiskBot");
    discord.add_guild("777", "Disk", &["disk-bot.1"]);
    let env = [
        ("AGENTD_DATA_DIR", disk.path().display().to_string()),
        ("AGENTD_DATABASE_URL", String::new()),
        ("AGENTD_DISCORD__API_BASE", discord.api_base.clone()),
        ("AGENTD_RUNTIME__LEASE_SECONDS", "2".into()),
        ("AGENTD_RUNTIME__POLL_SECONDS", "0.5".into()),
    ];
    let server = Server::start(&env).await;
    let token = server.register("disk@example.com").await;
    server.connect(&token, "disk-bot.1", "777").await;
    server.mapped_agent(&token, ("writer", "Writer"), "777", "7771").await;
    let mut acknowledged = vec!["Before".to_owned()];
    server.post("/api/agents/writer/backlog", &token, json!({"title": "Before"}), 201).await;

    // The API meets the full disk, with nothing else writing: until the refused write has
    // been seen on /readyz no other write may run, since one that still fits (SQLite reuses
    // its WAL after a checkpoint) rightly reports the disk writable again.
    let filler = disk.fill();
    // The first writes may still fit in space SQLite holds already; a 15,000-character
    // description soon needs more than is left.
    let description = "x".repeat(15_000);
    let mut refused = None;
    for n in 0..400 {
        let title = format!("Big {n}");
        let body = json!({"title": title, "description": description});
        let (status, reply) =
            server.send(Method::POST, "/api/agents/writer/backlog", Some(&token), body).await;
        match status {
            201 => acknowledged.push(title),
            _ => {
                refused = Some((status, reply));
                break;
            }
        }
    }
    let (status, reply) = refused.expect("a write is refused once the disk is full");
    assert_eq!(status, 507, "{reply}");
    assert_eq!(reply["error"]["code"], "storage_full", "{reply}");
    let (status, ready) = get(&server, "/readyz", None).await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["error"]["code"], "not_ready");
    assert!(ready["error"]["message"].as_str().unwrap().contains("disk is full"), "{ready}");
    assert!(metric(&server, FULL).await >= 1.0);
    assert_eq!(metric(&server, "agentd_storage_writable").await, 0.0);
    // Reads keep working meanwhile.
    let (status, _) = get(&server, "/api/agents/writer", Some(&token)).await;
    assert_eq!(status, 200);

    std::fs::remove_file(filler).unwrap();
    // The very next write works: no connection was left in a broken transaction.
    server.post("/api/agents/writer/backlog", &token, json!({"title": "After"}), 201).await;
    acknowledged.push("After".into());
    let (status, ready) = get(&server, "/readyz", None).await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(metric(&server, "agentd_storage_writable").await, 1.0);

    // The runtime and the outbox meet it too: the agent works through large tasks, a few a
    // second, while the disk fills again under it.
    for n in 0..12 {
        let title = format!("Large {n}");
        let body = json!({"title": title, "description": description});
        server.post("/api/agents/writer/backlog", &token, body, 201).await;
        acknowledged.push(title);
    }
    server.patch("/api/agents/writer", &token, json!({"throttle_seconds": 0.3}), 200).await;
    server.post("/api/agents/writer/start", &token, Value::Null, 200).await;
    let refused_before = metric(&server, FULL).await;
    let filler = disk.fill();
    eventually(Duration::from_secs(30), "the runtime's writes are refused", || async {
        metric(&server, FULL).await > refused_before
    })
    .await;
    std::fs::remove_file(filler).unwrap();

    // The runtime and the outbox heal too: every acknowledged task is worked and posted once.
    let backlog = || async {
        let (_, backlog) = get(&server, "/api/agents/writer/backlog", Some(&token)).await;
        backlog["tasks"].as_array().cloned().unwrap_or_default()
    };
    // Generous deadlines: a post sent just before the disk filled, whose delivery could not be
    // recorded, waits out its 30 s lease before it is sent again (and deduplicated by nonce).
    eventually(Duration::from_secs(120), "every acknowledged task completes", || async {
        let tasks = backlog().await;
        tasks.len() == acknowledged.len() && tasks.iter().all(|t| t["status"] == "complete")
    })
    .await;
    let mut titles: Vec<String> =
        backlog().await.iter().map(|t| t["title"].as_str().unwrap().to_owned()).collect();
    titles.sort();
    acknowledged.sort();
    assert_eq!(titles, acknowledged, "exactly the acknowledged writes are stored");
    // Results only: the agent's status posts are titled "<name> is <status>", and each task's
    // start is a "Working on" post.
    let posted = || {
        let mut posted: Vec<String> = discord
            .messages_in("7771")
            .iter()
            .filter(|m| !crate::process::is_working_on(m))
            .filter_map(|m| m.body["embeds"][0]["title"].as_str().map(str::to_owned))
            .filter(|t| !t.contains(" is "))
            .collect();
        posted.sort();
        posted
    };
    eventually(Duration::from_secs(120), "every result is posted", || async {
        posted().len() >= acknowledged.len()
    })
    .await;
    let posted = posted();
    assert_eq!(posted, acknowledged, "each result posted once");

    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "{exit:?}");
    let file = disk.path().join("agentd.db");
    let url = format!("sqlite://{}", file.display());
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await.unwrap();
    let check: String =
        sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await.unwrap();
    assert_eq!(check, "ok");
}
