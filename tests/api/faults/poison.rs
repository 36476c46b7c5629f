//! A task that kills its process every time it runs is given up after
//! `runtime.max_attempts` interrupted runs, and the agent goes on with its next task.

use std::time::Duration;

use crate::fake_models::{FakeModels, Script};
use crate::helpers::{TestDb, backend_tests, eventually};
use crate::process::{Server, runtime_env};

backend_tests! { db;
    a_task_that_crashes_its_process_every_time_fails_after_max_attempts_and_the_agent_goes_on,
}

async fn a_task_that_crashes_its_process_every_time_fails_after_max_attempts_and_the_agent_goes_on(
    db: TestDb,
) {
    let models = FakeModels::start().await;
    // Each run of the poison task hangs until the test kills the process.
    models.script([
        Script::Hang(Duration::from_secs(120)),
        Script::Hang(Duration::from_secs(120)),
        Script::Hang(Duration::from_secs(120)),
    ]);
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_RUNTIME__MAX_ATTEMPTS", "3".into()));
    let mut server = Server::start(&env).await;
    let token = server.register("poison@example.com").await;
    server.started_worker(&token, &[("Poison".into(), 9), ("Next".into(), 1)]).await;
    for run in 1..=3 {
        eventually(Duration::from_secs(30), "the poison task's run reaches the model", || async {
            models.calls().len() == run
        })
        .await;
        server.signal("-KILL").await;
        server = Server::start(&env).await;
    }
    eventually(Duration::from_secs(30), "the next task completes", || async {
        db.count("SELECT COUNT(*) FROM tasks WHERE title = 'Next' AND status = 'complete'", &[])
            .await
            == 1
    })
    .await;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM tasks WHERE title = 'Poison' AND status = 'failed' AND attempts = 3 AND error LIKE 'Interrupted 3 times%'", &[]).await,
        1,
        "the poison task is failed, saying why"
    );
    let users: Vec<String> = models.calls().iter().map(|c| c.user().to_owned()).collect();
    assert_eq!(
        users,
        ["Poison", "Poison", "Poison", "Next"],
        "the poison task ran three times, not a fourth"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM activity WHERE action = 'task_failed'", &[]).await,
        1
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM agents WHERE status = 'active'", &[]).await,
        1,
        "one failure does not stop the agent"
    );
    drop(server);
}
