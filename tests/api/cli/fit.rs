//! What a newcomer reads in an 80-column terminal: tables that fit it, a short answer to
//! `tasks add`, the dashboard's order, money in dollars and cents, and honest onboarding words.

use super::*;

backend_tests! { app;
    tables_fit_an_80_column_terminal,
    tasks_add_answers_in_a_line_or_two_naming_the_task,
    tasks_list_in_the_order_of_the_dashboard,
    money_reads_as_dollars_and_cents,
    onboarding_without_discord_names_no_channel_and_says_active,
}

const COLUMNS: u16 = 80;

/// `agentctl <args>` on an 80-column terminal: its lines, after it succeeded.
async fn on_terminal(ctl: &Ctl, args: &[&str]) -> Vec<String> {
    let mut term = Terminal::spawn_with_width(ctl.command(args), COLUMNS);
    let status = term.finish().await;
    assert!(status.success(), "agentctl {args:?} failed:\n{}", term.text());
    term.lines()
}

/// Registers a user and makes an agent with a long role prompt and a long task.
async fn writer(ctl: &Ctl) -> String {
    ctl.run(&["register", "--email", "fit@example.com", "--password", PASSWORD, "--name", "Fit"])
        .await
        .ok();
    let prompt = "You write the weekly newsletter for a company that sells garden tools, \
                  in a warm voice, with one tip a week and no more than three links. "
        .repeat(8);
    let create = [
        "agents",
        "create",
        "--id",
        "writer",
        "--name",
        "Writer",
        "--role-prompt",
        &prompt,
        "--channel",
        "news",
    ];
    ctl.run(&create).await.ok();
    let title = "Draft the spring issue with the new pruning shears and the compost guide, \
                 then check every link and the prices against the shop before it goes out";
    let description = "Every detail of the task. ".repeat(40);
    ctl.run(&["tasks", "add", "writer", title, "--description", &description]).await.ok();
    prompt
}

async fn tables_fit_an_80_column_terminal(app: TestApp) {
    let ctl = Ctl::remote(&app);
    let prompt = writer(&ctl).await;
    ctl.run(&["schedules", "add", "writer", "0 9 * * MON", "Weekly brief of the garden shop"])
        .await
        .ok();
    ctl.run(&["keys", "create", "a key for the nightly export script", "--role", "member"])
        .await
        .ok();
    let commands: &[&[&str]] = &[
        &["agents", "show", "writer"],
        &["agents", "list"],
        &["agents", "activity", "writer"],
        &["tasks", "list", "writer"],
        &["tools"],
        &["templates"],
        &["schedules", "list", "writer"],
        &["usage"],
        &["budget"],
        &["members"],
        &["keys"],
        &["workspaces"],
    ];
    for args in commands {
        let lines = on_terminal(&ctl, args).await;
        let wide: Vec<&String> =
            lines.iter().filter(|line| line.chars().count() > usize::from(COLUMNS)).collect();
        assert!(
            wide.is_empty(),
            "agentctl {args:?} is wider than {COLUMNS}:\n{}",
            lines.join("\n")
        );
    }
    // `show` keeps the whole role prompt (wrapped), and `-o json` every character of it.
    let shown = on_terminal(&ctl, &["agents", "show", "writer"]).await.join("\n");
    assert_eq!(shown.matches("garden").count(), 8, "{shown}");
    let json = on_terminal(&ctl, &["-o", "json", "agents", "show", "writer"]).await.concat();
    let agent: Value = serde_json::from_str(&json).expect("unwrapped JSON");
    assert_eq!(agent["role_prompt"], prompt.as_str());
}

async fn tasks_add_answers_in_a_line_or_two_naming_the_task(app: TestApp) {
    let ctl = Ctl::remote(&app);
    writer(&ctl).await;
    let added = ctl.run(&["tasks", "add", "writer", "Write a haiku", "--priority", "2"]).await.ok();
    let lines: Vec<&str> = added.stdout.lines().collect();
    assert!(lines.len() <= 2, "{}", added.stdout);
    let listed = ctl.run(&["-o", "json", "tasks", "list", "writer"]).await.ok().json();
    let task = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Write a haiku")
        .cloned()
        .expect("the task is listed");
    let id = task["id"].as_str().unwrap();
    for expected in [id, "Write a haiku", "Priority 2", "queued"] {
        assert!(added.stdout.contains(expected), "{expected} missing:\n{}", added.stdout);
    }
    for internal in ["attempts", "created_by", "depth", "updated_at"] {
        assert!(!added.stdout.contains(internal), "{internal} shown:\n{}", added.stdout);
    }
    // `-o json` still has every field.
    let json = ctl.run(&["-o", "json", "tasks", "add", "writer", "Another"]).await.ok().json();
    assert_eq!(json["attempts"], 0);
    assert_eq!(json["created_by"]["type"], "user");
}

async fn tasks_list_in_the_order_of_the_dashboard(app: TestApp) {
    let ctl = Ctl::remote(&app);
    writer(&ctl).await;
    for (title, priority) in [("Second", "0"), ("Urgent", "5"), ("Third", "0")] {
        ctl.run(&["tasks", "add", "writer", title, "--priority", priority]).await.ok();
    }
    let titles = |list: &Value| -> Vec<String> {
        list.as_array().unwrap().iter().map(|t| t["title"].as_str().unwrap().to_owned()).collect()
    };
    // Newest first, as the dashboard's backlog (the API's `order=newest`), not in run order.
    let listed = ctl.run(&["-o", "json", "tasks", "list", "writer"]).await.ok().json();
    let newest = titles(&listed["tasks"]);
    assert_eq!(newest[..3], ["Third", "Urgent", "Second"], "{newest:?}");
    let at =
        |table: &str, title: &str| table.find(title).unwrap_or_else(|| panic!("{title}:\n{table}"));
    for command in [&["tasks", "list", "writer"][..], &["agents", "show", "writer"]] {
        let table = ctl.run(command).await.ok().stdout;
        assert!(at(&table, "Third") < at(&table, "Urgent"), "{table}");
        assert!(at(&table, "Urgent") < at(&table, "Second"), "{table}");
        assert!(at(&table, "Second") < at(&table, "Draft the spring"), "{table}");
    }
    let queued = ctl.run(&["-o", "json", "tasks", "list", "writer", "--status", "queued"]);
    assert_eq!(titles(&queued.await.ok().json()["tasks"]), newest);
    let none = ctl.run(&["-o", "json", "tasks", "list", "writer", "--status", "failed"]);
    assert_eq!(none.await.ok().json()["tasks"], json!([]));
    let bad = ctl.run(&["tasks", "list", "writer", "--status", "sleeping"]).await;
    assert_ne!(bad.code, 0, "{}", bad.stderr);
    assert!(bad.stderr.contains("status"), "{}", bad.stderr);
}

async fn money_reads_as_dollars_and_cents(app: TestApp) {
    let ctl = Ctl::remote(&app);
    writer(&ctl).await;
    let set = ctl.run(&["budget", "--set", "25"]).await.ok().stdout;
    assert!(set.contains("$25.00") && set.contains("$0.00"), "{set}");
    let usage = ctl.run(&["usage"]).await.ok().stdout;
    assert!(usage.contains("$0.00"), "{usage}");
    ctl.run(&["agents", "update", "writer", "--budget-monthly-usd", "7.5"]).await.ok();
    let shown = ctl.run(&["agents", "show", "writer"]).await.ok().stdout;
    assert!(shown.contains("$7.50"), "{shown}");
    for text in [&set, &usage] {
        assert!(!text.contains(" 0.0 ") && !text.contains(" 25.0 "), "{text}");
    }
    assert!(!shown.contains(" 7.5 "), "{shown}");
}

async fn onboarding_without_discord_names_no_channel_and_says_active(app: TestApp) {
    let ctl = Ctl::remote(&app);
    ctl.run(&["register", "--email", "new@example.com", "--password", PASSWORD, "--name", "New"])
        .await
        .ok();
    let onboarded = ctl
        .run(&["onboard", "--template", "sales", "--company", "Acme", "--no-discord", "--start"])
        .await
        .ok();
    let said = format!("{}{}", onboarded.stdout, onboarded.stderr);
    for channel in ["#", "posting", "channel"] {
        assert!(!onboarded.stdout.contains(channel), "{channel}:\n{said}");
    }
    assert!(!said.contains("#sales") && !said.contains("posting to"), "{said}");
    assert!(onboarded.stdout.contains("active") && !said.contains("idle"), "{said}");
    let json = ctl.run(&["-o", "json", "agents", "show", "sales-lead"]).await.ok().json();
    assert_eq!(json["status"], "active");

    // Not started, it says so: idle.
    let idle = ctl
        .run(&["onboard", "--template", "support", "--company", "Acme", "--no-discord"])
        .await
        .ok();
    assert!(idle.stdout.contains("idle") && !idle.stdout.contains('#'), "{}", idle.stdout);
}
