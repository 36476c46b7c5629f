//! `agentd backup` and `agentd restore` through the real binary: a consistent copy taken
//! while the server runs, with the key that opens its bot tokens; a restore refused while a
//! server uses the database, and one that brings back exactly the backed-up state.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::fake_discord::FakeDiscord;
use crate::helpers::{Backend, TestDb, backend_tests};
use crate::process::Server;

/// Runs `agentd <args>` with `env`, to the end.
async fn agentd(args: &[&str], env: &[(&str, String)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentd-under-test"));
    command.args(args).env("AGENTD_LOG", "warn").kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    tokio::time::timeout(std::time::Duration::from_secs(60), command.output())
        .await
        .expect("agentd finishes in time")
        .expect("agentd runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

backend_tests! { db;
    backup_copies_a_running_database_with_its_key_and_restore_brings_it_back,
}

async fn backup_copies_a_running_database_with_its_key_and_restore_brings_it_back(db: TestDb) {
    let discord = FakeDiscord::start().await;
    discord.add_bot("backup-bot.1", "BackupBot");
    discord.add_guild("222", "Backup", &["backup-bot.1"]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = vec![
        ("AGENTD_DATA_DIR", data_dir.path().display().to_string()),
        ("AGENTD_DATABASE_URL", db.url_for_process()),
        ("AGENTD_DISCORD__API_BASE", discord.api_base.clone()),
    ];
    let server = Server::start(&env).await;
    let token = server.register("backup@example.com").await;
    server.connect(&token, "backup-bot.1", "222").await;
    server.mapped_agent(&token, ("kept", "Kept"), "222", "2221").await;
    let backups = tempfile::tempdir().unwrap();
    let file = backups.path().join("agentd-backup.db");
    let file_arg = file.display().to_string();

    let made = agentd(&["backup", &file_arg], &env).await;
    if db.backend == Backend::Postgres {
        assert_eq!(made.status.code(), Some(2), "{}", text(&made));
        assert!(text(&made).contains("pg_dump"), "{}", text(&made));
        assert!(text(&made).contains("secret.key"), "the key is named: {}", text(&made));
        assert!(!file.exists());
        return;
    }
    assert!(made.status.success(), "{}", text(&made));
    let key_copy = backups.path().join("agentd-backup.db.key");
    assert!(text(&made).contains(&format!("KEEP {}", key_copy.display())), "{}", text(&made));
    assert_eq!(
        std::fs::read(&key_copy).unwrap(),
        std::fs::read(data_dir.path().join("secret.key")).unwrap()
    );
    assert_eq!((mode(&file), mode(&key_copy)), (0o600, 0o600));
    let again = agentd(&["backup", &file_arg], &env).await;
    assert_eq!(
        again.status.code(),
        Some(2),
        "an existing file is never overwritten: {}",
        text(&again)
    );

    // Changes after the backup, then a restore attempt while the server runs.
    server
        .post(
            "/api/agents",
            &token,
            json!({"id": "later", "name": "Later", "role_prompt": "Go.", "channel": "c"}),
            201,
        )
        .await;
    let refused = agentd(&["restore", &file_arg], &env).await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused).contains("a server is running"), "{}", text(&refused));
    let exit = server.signal("-TERM").await;
    assert!(exit.success());

    // As on a new machine: the key file is gone too; the backup's key comes back with it.
    std::fs::remove_file(data_dir.path().join("secret.key")).unwrap();
    let restored = agentd(&["restore", &file_arg], &env).await;
    assert!(restored.status.success(), "{}", text(&restored));
    assert!(
        text(&restored).contains("before-restore"),
        "what was replaced is kept: {}",
        text(&restored)
    );
    let server = Server::start(&env).await;
    let (_, agents) =
        server.send(reqwest::Method::GET, "/api/agents", Some(&token), Value::Null).await;
    let ids: Vec<&str> =
        agents["agents"].as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["kept"], "the restored database is the backed-up one");
    // The bot token in the backup opens with the restored key: a message goes out with it.
    server
        .post(
            "/api/chat/send/222",
            &token,
            json!({"agent_id": "kept", "content": "back again"}),
            200,
        )
        .await;
    let sent = discord.requests().into_iter().filter(|r| r.path.ends_with("/messages")).count();
    assert_eq!(sent, 1);
    assert!(
        discord
            .requests()
            .iter()
            .filter(|r| r.path.ends_with("/messages"))
            .all(|r| r.authorization.as_deref() == Some("Bot backup-bot.1"))
    );
    drop(server);
}
