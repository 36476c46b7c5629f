//! `agentctl schedules add|list|show|update|delete`, in both modes: next runs shown in the
//! schedule's zone, the same JSON remote and local, a bad expression named.

use super::*;

backend_tests! { app;
    schedules_are_added_shown_changed_and_deleted_from_the_terminal,
}

async fn schedules_are_added_shown_changed_and_deleted_from_the_terminal(app: TestApp) {
    let [remote, local] = both_modes(&app).await;
    remote
        .run(&["register", "--email", "cron@example.com", "--password", PASSWORD, "--name", "C"])
        .await
        .ok();
    local.run(&["login", "--email", "cron@example.com", "--password", PASSWORD]).await.ok();
    let agent = ["agents", "create", "--id", "briefer", "--name", "B", "--role-prompt", "Brief."];
    remote.run(&[&agent[..], &["--channel", "c"]].concat()).await.ok();

    let added = local
        .run(&[
            "schedules",
            "add",
            "briefer",
            "0 9 * * MON-FRI",
            "Daily brief",
            "--timezone",
            "America/New_York",
            "--catch-up",
            "run_once",
        ])
        .await
        .ok();
    assert!(added.stdout.contains("NEXT RUNS (LOCAL)"), "{}", added.stdout);
    assert!(
        added.stdout.contains("T09:00:00-05:00") || added.stdout.contains("T09:00:00-04:00"),
        "next runs in the schedule's zone:\n{}",
        added.stdout
    );
    let from_remote = remote.run(&["-o", "json", "schedules", "list", "briefer"]).await.ok();
    let from_local = local.run(&["-o", "json", "schedules", "list", "briefer"]).await.ok();
    assert_eq!(from_remote.stdout, from_local.stdout, "the same bytes in both modes");
    let schedule = from_remote.json()["schedules"][0].clone();
    assert_eq!(schedule["catch_up"], "run_once");
    let id = schedule["id"].as_str().unwrap();
    let table = remote.run(&["schedules", "list", "briefer"]).await.ok();
    assert!(table.stdout.contains("America/New_York") && table.stdout.contains("Daily brief"));

    let off = ["-o", "json", "schedules", "update", "briefer", id, "--disable"];
    let off = remote.run(&off).await.ok().json();
    assert_eq!((&off["enabled"], &off["next_runs"]), (&json!(false), &json!([])));
    let shown = local.run(&["schedules", "show", "briefer", id]).await.ok();
    assert!(shown.stdout.contains("Daily brief"), "{}", shown.stdout);

    let bad = remote.run(&["schedules", "add", "briefer", "61 * * * *", "Bad"]).await;
    assert_eq!(bad.code, 2, "a usage error: {}", bad.stderr);
    assert!(bad.stderr.contains("cron"), "{}", bad.stderr);
    local.run(&["schedules", "delete", "briefer", id, "--yes"]).await.ok();
    let listed = remote.run(&["-o", "json", "schedules", "list", "briefer"]).await.ok();
    assert_eq!(listed.json()["schedules"], json!([]));
    let missing = remote.run(&["schedules", "show", "briefer", id]).await;
    assert_eq!(missing.code, 4, "not found: {}", missing.stderr);
}
