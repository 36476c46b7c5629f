//! Tasks across killed and stopped processes: none lost, no result written twice, work shared.

use super::*;

backend_tests! { db;
    a_process_killed_during_a_task_loses_no_task_and_writes_no_result_twice,
    sigterm_lets_the_task_in_progress_finish_then_gives_everything_back,
    a_task_longer_than_the_grace_period_goes_back_to_the_queue_at_shutdown,
    three_processes_share_twenty_agents_and_survive_losing_one,
}

async fn a_process_killed_during_a_task_loses_no_task_and_writes_no_result_twice(db: TestDb) {
    let models = FakeModels::start().await;
    // The first call never answers in time: the process dies while it is open.
    models.script([Script::Hang(Duration::from_secs(60))]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = runtime_env(&db, &data_dir, &models);
    let server = Server::start(&env).await;
    let token = server.register("crash@example.com").await;
    let tasks: Vec<(String, i64)> = (0..3).map(|n| (format!("Task {n}"), 3 - n)).collect();
    server.started_worker(&token, &tasks).await;
    eventually(Duration::from_secs(20), "the first call arrives", || async {
        !models.calls().is_empty()
    })
    .await;
    server.signal("-KILL").await;
    assert_eq!(db.count("SELECT COUNT(*) FROM tasks WHERE status = 'in_progress'", &[]).await, 1);
    assert_eq!(db.count("SELECT COUNT(*) FROM tasks WHERE status = 'queued'", &[]).await, 2);

    let _server = Server::start(&env).await;
    eventually(Duration::from_secs(30), "every task completes after the restart", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await == 3
    })
    .await;
    assert_eq!(completions(&db).await, (0, 3), "a result was written twice");
    let users: Vec<String> = models.calls().iter().map(|c| c.user().to_owned()).collect();
    assert_eq!(
        users,
        ["Task 0", "Task 0", "Task 1", "Task 2"],
        "the interrupted task runs again, first"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM tasks WHERE attempts = 2", &[]).await,
        1,
        "the lost call counts as an attempt"
    );
}

async fn sigterm_lets_the_task_in_progress_finish_then_gives_everything_back(db: TestDb) {
    let models = FakeModels::start().await;
    models.script([Script::Hang(Duration::from_millis(1500))]);
    let data_dir = tempfile::tempdir().unwrap();
    let env = runtime_env(&db, &data_dir, &models);
    let server = Server::start(&env).await;
    let token = server.register("term@example.com").await;
    let tasks: Vec<(String, i64)> = (0..2).map(|n| (format!("Task {n}"), 2 - n)).collect();
    server.started_worker(&token, &tasks).await;
    eventually(Duration::from_secs(20), "the first call arrives", || async {
        !models.calls().is_empty()
    })
    .await;
    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "exit status {exit:?}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await,
        1,
        "the task in progress finished"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'queued'", &[]).await,
        1,
        "no new task was taken"
    );
    assert_eq!(models.calls().len(), 1);
    assert_eq!(db.count("SELECT COUNT(*) FROM agents WHERE lease_owner IS NOT NULL", &[]).await, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM runtime_nodes", &[]).await, 0);
}

async fn a_task_longer_than_the_grace_period_goes_back_to_the_queue_at_shutdown(db: TestDb) {
    let models = FakeModels::start().await;
    models.script([Script::Hang(Duration::from_secs(60))]);
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_RUNTIME__SHUTDOWN_GRACE_SECONDS", "0.5".into()));
    // Leases far longer than the test: only the release at shutdown can free the task.
    env.retain(|(name, _)| *name != "AGENTD_RUNTIME__LEASE_SECONDS");
    env.push(("AGENTD_RUNTIME__LEASE_SECONDS", "600".into()));
    let server = Server::start(&env).await;
    let token = server.register("grace@example.com").await;
    server.started_worker(&token, &[("Endless".into(), 0)]).await;
    eventually(Duration::from_secs(20), "the call arrives", || async {
        !models.calls().is_empty()
    })
    .await;
    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "exit status {exit:?}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'queued' AND lease_owner IS NULL", &[])
            .await,
        1
    );

    let _server = Server::start(&env).await;
    eventually(Duration::from_secs(20), "the next process runs it at once", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]).await == 1
    })
    .await;
}

async fn three_processes_share_twenty_agents_and_survive_losing_one(db: TestDb) {
    const AGENTS: usize = 20;
    const TASKS: usize = 40;
    let mut cluster =
        Cluster::start(&db, Duration::from_millis(15), "999", "nodes@example.com").await;
    for a in 0..AGENTS {
        let id = cluster.add_mapped_agent(a, if a % 2 == 0 { "9991" } else { "9992" }).await;
        let (nodes, token) = (&cluster.nodes, &cluster.token);
        let adds = (0..TASKS).map(|t| {
            let node = &nodes[(a + t) % 3];
            let (path, token, title) =
                (format!("/api/agents/{id}/backlog"), token.clone(), format!("{id} task {t:02}"));
            async move { node.post(&path, &token, json!({"title": title}), 201).await }
        });
        futures::future::join_all(adds).await;
    }
    cluster.start_agents(AGENTS).await;
    let complete = || db.count("SELECT COUNT(*) FROM tasks WHERE status = 'complete'", &[]);
    eventually(Duration::from_secs(60), "a quarter of the tasks complete", || async {
        complete().await >= 200
    })
    .await;
    let killed = cluster.nodes.remove(1);
    killed.signal("-KILL").await;
    eventually(Duration::from_secs(120), "all 800 tasks complete", || async {
        complete().await == 800
    })
    .await;
    assert_eq!(completions(&db).await, (0, 800), "a result was written twice");

    assert_one_call_at_a_time(&cluster.models, AGENTS);

    eventually(Duration::from_secs(60), "every result is posted", || async {
        cluster
            .discord
            .messages()
            .iter()
            .filter(|m| !super::is_working_on(m))
            .filter(|m| m.body["embeds"][0]["title"].as_str().is_some_and(|t| t.contains(" task ")))
            .count()
            >= 800
    })
    .await;
    let mut posted = std::collections::HashMap::<String, usize>::new();
    for message in cluster.discord.messages().iter().filter(|m| !super::is_working_on(m)) {
        let title = message.body["embeds"][0]["title"].as_str().unwrap().to_owned();
        if title.contains(" task ") {
            *posted.entry(title).or_default() += 1;
        }
    }
    assert_eq!(posted.len(), 800);
    assert!(posted.values().all(|n| *n == 1), "a result was posted twice");
}
