//! `agentctl budget` and `agentctl usage`, and an agent's `--budget-monthly-usd`, in both
//! modes: the same JSON remote and local, tables with the total, bad values refused.

use super::*;

backend_tests! { app;
    budgets_and_usage_from_the_terminal,
}

async fn budgets_and_usage_from_the_terminal(app: TestApp) {
    let [remote, local] = both_modes(&app).await;
    remote
        .run(&["register", "--email", "money@example.com", "--password", PASSWORD, "--name", "M"])
        .await
        .ok();
    local.run(&["login", "--email", "money@example.com", "--password", PASSWORD]).await.ok();

    let set = remote.run(&["-o", "json", "budget", "--set", "25"]).await.ok().json();
    assert_eq!(set["monthly_usd"], 25.0);
    assert_eq!(set["spent_micros"], 0);
    let shown = local.run(&["budget"]).await.ok();
    assert!(
        shown.stdout.contains("monthly_usd") && shown.stdout.contains("25"),
        "{}",
        shown.stdout
    );
    let cleared = local.run(&["-o", "json", "budget", "--clear"]).await.ok().json();
    assert_eq!(cleared["monthly_usd"], Value::Null);
    let bad = remote.run(&["budget", "--set", "-3"]).await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);

    let agent = ["agents", "create", "--id", "thrifty", "--name", "T", "--role-prompt", "Save."];
    let created = remote
        .run(
            &[&["-o", "json"][..], &agent[..], &["--channel", "c", "--budget-monthly-usd", "2.5"]]
                .concat(),
        )
        .await
        .ok()
        .json();
    assert_eq!(created["budget_monthly_usd"], 2.5);
    let update = ["-o", "json", "agents", "update", "thrifty", "--budget-monthly-usd", "none"];
    assert_eq!(local.run(&update).await.ok().json()["budget_monthly_usd"], Value::Null);
    let bad = local.run(&["agents", "update", "thrifty", "--budget-monthly-usd", "lots"]).await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);

    let usage = ["-o", "json", "usage", "--group-by", "model", "--from", "2026-01-01"];
    let from_remote = remote.run(&usage).await.ok();
    let from_local = local.run(&usage).await.ok();
    assert_eq!(from_remote.json()["total"], from_local.json()["total"]);
    assert_eq!(from_remote.json()["group_by"], "model");
    let table = remote.run(&["usage"]).await.ok();
    assert!(
        table.stdout.contains("COST")
            && table.stdout.contains("$0.00 ")
            && table.stdout.contains("(total)"),
        "{}",
        table.stdout
    );
    let bad = remote.run(&["usage", "--group-by", "week"]).await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("group_by"), "{}", bad.stderr);
}
