//! `agentd config` from the real binary: every layer, secrets redacted.

use super::*;

#[tokio::test]
async fn agentd_config_prints_every_layer_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agentd.toml");
    std::fs::write(&file, "bind = '127.0.0.1:7001'\n[auth]\njwt_secret = 'file-secret-0123456789abcdef0123456789'\n[runtime]\nlease_seconds = 12\npoll_seconds = 2\n").unwrap();
    let agentd = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentd-under-test"));
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("AGENTD_")) {
            command.env_remove(name);
        }
        command
            .env("XDG_CONFIG_HOME", dir.path())
            .env("AGENTD_DATA_DIR", dir.path())
            .envs(env.iter().copied())
            .args(args)
            .output()
    };
    let file_arg = file.display().to_string();
    let shown = agentd(
        &["--config", &file_arg, "--bind", "127.0.0.1:7003", "config"],
        &[("AGENTD_RUNTIME__LEASE_SECONDS", "13"), ("AGENTD_RUNTIME__LEASE_SECOND", "1")],
    )
    .await
    .unwrap();
    assert!(shown.status.success());
    let (stdout, stderr) =
        (String::from_utf8_lossy(&shown.stdout), String::from_utf8_lossy(&shown.stderr));
    for expected in [
        "bind = \"127.0.0.1:7003\"",
        "lease_seconds = 13",
        "poll_seconds = 2",
        "jwt_secret = \"<redacted>\"",
        &file_arg,
    ] {
        assert!(stdout.contains(expected), "{expected} missing:\n{stdout}");
    }
    assert!(!stdout.contains("file-secret"), "{stdout}");
    assert!(
        stderr
            .contains("AGENTD_RUNTIME__LEASE_SECOND (did you mean AGENTD_RUNTIME__LEASE_SECONDS?)"),
        "{stderr}"
    );

    // The default place: agentd.toml in the platform config directory.
    std::fs::create_dir_all(dir.path().join("agentd")).unwrap();
    std::fs::write(dir.path().join("agentd/agentd.toml"), "[runtime]\nlease_seconds = 7\n")
        .unwrap();
    let shown = agentd(&["config"], &[]).await.unwrap();
    assert!(String::from_utf8_lossy(&shown.stdout).contains("lease_seconds = 7"));

    std::fs::write(&file, "[runtime]\nlease_secs = 3\n").unwrap();
    let refused = agentd(&["--config", &file_arg], &[]).await.unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("'runtime.lease_secs' is not a setting")
    );
}
