//! Embedding `agentcore`: a temporary SQLite database, a user, an agent and a task that the
//! runtime carries out with the offline `echo` model, without any server.
//!
//! Run with `cargo run -p examples --example embed`.

use agentcore::api::{CreateAgentRequest, CreateTaskRequest, RegisterRequest};
use agentcore::domain::activity::ActivityQuery;
use agentcore::domain::task::TaskStatus;
use agentcore::{Core, CoreConfig, Principal};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A throwaway data directory; a real application would keep it.
    let data_dir = tempfile::tempdir()?;
    let core = Core::open(CoreConfig::sqlite_in(data_dir.path())).await?;

    // Input is parsed at the edge into domain types; bad input is refused field by field.
    let registration = RegisterRequest {
        email: Some("ada@example.com".into()),
        password: Some("correct horse battery".into()),
        name: Some("Ada".into()),
    };
    let session = core.register(registration.parse()?).await?;
    let ada = Principal::from(&session);
    println!("registered {} <{}>", session.user.name, session.user.email);

    let agent = CreateAgentRequest {
        id: Some("writer".into()),
        name: Some("Writer".into()),
        role_prompt: Some("You write short, friendly product updates.".into()),
        channel: Some("updates".into()),
        ..Default::default()
    };
    let agent = core.create_agent(&ada, agent.parse()?).await?;
    println!("created agent '{}' ({})", agent.id, agent.status);

    let task = CreateTaskRequest {
        title: Some("Announce the new onboarding flow".into()),
        description: Some("Three sentences, no jargon.".into()),
        priority: Some(1),
    };
    let task = core.add_task(&ada, &agent.id, task.parse()?).await?;
    println!("queued task {} '{}'", task.id, task.title);

    // The runtime runs active agents in the background; starting the agent wakes it at once.
    let runtime = agentcore::Runtime::start(&core);
    core.start_agent(&ada, &agent.id).await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let done = loop {
        let current = core.task(&ada, &agent.id, &task.id).await?;
        if current.status == TaskStatus::Complete {
            break current;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "the task did not complete in 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    println!("result: {}", done.result.unwrap_or_default().lines().next().unwrap_or_default());
    runtime.shutdown().await;

    for entry in core.activity(&ada, &agent.id, &ActivityQuery::default()).await? {
        println!("  {} {:<14} {}", entry.timestamp.format("%H:%M:%S"), entry.action, entry.details);
    }
    core.close().await;
    Ok(())
}
