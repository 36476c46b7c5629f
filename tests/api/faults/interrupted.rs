//! A run that needs the database to go on while it is gone: PostgreSQL (a server of the
//! test's own) stops while a model call is open, so what the run reads next (the fallback's
//! budgets, the agent's memory, a call's approval) cannot be read. The run stops, and its task
//! runs again once the database is back: it does not end failed, nor does the model see a
//! failed read, for the database's outage. Before, the failure was written as soon as the
//! database answered again.

use std::time::Duration;

use serde_json::{Value, json};

use super::metric;
use super::restart::{PrivatePostgres, agentd_env};
use crate::fake_models::{FakeModels, Script};
use crate::helpers::eventually;
use crate::process::Server;

/// How long each answer of the model the outage starts under takes: time enough for
/// PostgreSQL to stop while its call is open.
const OPEN_CALL: Duration = Duration::from_secs(5);

/// agentd on `pg` with one agent, `steady`, on `settings` (its model, tools, fallbacks), one
/// task queued and the agent started: the server, a token and the task's path.
async fn one_task(
    pg: &PrivatePostgres,
    models: &FakeModels,
    data_dir: &tempfile::TempDir,
    settings: Value,
) -> (Server, String, String) {
    // Half a lease (1 s) is shorter than one read's wait for a connection: a read the
    // database cannot answer is given up after its first try.
    let server = Server::start(&agentd_env(pg, models, data_dir)).await;
    let token = server.register("steady@example.com").await;
    let agent = json!({"id": "steady", "name": "Steady", "role_prompt": "Work.", "channel": "c"});
    server.post("/api/agents", &token, agent, 201).await;
    server.patch("/api/agents/steady", &token, settings, 200).await;
    let task = server
        .post("/api/agents/steady/backlog", &token, json!({"title": "Steady work"}), 201)
        .await;
    server.post("/api/agents/steady/start", &token, Value::Null, 200).await;
    let path = format!("/api/agents/steady/backlog/{}", task["id"].as_str().unwrap());
    (server, token, path)
}

/// The number of calls naming `model`.
fn calls_to(models: &FakeModels, model: &str) -> usize {
    models.calls().iter().filter(|c| c.body["model"] == model).count()
}

/// Stops `pg` once `model`'s `nth` call is open, until agentd logs that it gave up the read
/// `gave_up` names; then starts it again.
async fn outage(
    pg: &PrivatePostgres,
    models: &FakeModels,
    server: &Server,
    call: (&str, usize),
    gave_up: &str,
) {
    let (model, nth) = call;
    eventually(Duration::from_secs(30), "the model call is open", || async {
        calls_to(models, model) == nth
    })
    .await;
    pg.ctl(&["stop"]);
    eventually(Duration::from_secs(90), "agentd gives up the read", || async {
        server.logged(gave_up)
    })
    .await;
    pg.ctl(&["start"]);
}

/// The task once it ended, and its steps; the node counted one interrupted run.
async fn ended(server: &Server, token: &str, path: &str) -> (Value, Value) {
    let read = |path: String| async move {
        server.send(reqwest::Method::GET, &path, Some(token), Value::Null).await.1
    };
    eventually(Duration::from_secs(60), "the task ends", || async {
        matches!(read(path.to_owned()).await["status"].as_str(), Some("complete" | "failed"))
    })
    .await;
    let interrupted = metric(server, "agentd_runs_interrupted_total").await;
    assert_eq!(interrupted, 1.0, "runs interrupted");
    (read(path.to_owned()).await, read(format!("{path}/steps")).await)
}

/// The agent's model is overloaded (each of its two attempts answers 503), so the call goes to
/// the fallback, whose budgets are read first: the database stops during the second attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_cannot_read_its_budgets_while_the_database_is_down_runs_again_after() {
    let Some(pg) = PrivatePostgres::start() else { return };
    let models = FakeModels::start().await;
    models.set_latency_for("gpt-busy", OPEN_CALL);
    models.repeat_for("gpt-busy", Script::Status(503, None));
    let data_dir = tempfile::tempdir().unwrap();
    let settings = json!({"model": "openai:gpt-busy", "fallback_models": ["openai:gpt-test"]});
    let (server, token, path) = one_task(&pg, &models, &data_dir, settings).await;

    let gave_up = "run interrupted: cannot check the budgets";
    outage(&pg, &models, &server, ("gpt-busy", 2), gave_up).await;
    assert_eq!(calls_to(&models, "gpt-test"), 0, "the fallback is not called unchecked");

    let (done, _) = ended(&server, &token, &path).await;
    assert_eq!(done["status"], "complete", "{done}");
    assert_eq!(done["result"], "Answer to: Steady work", "the fallback's answer");
    let busy = calls_to(&models, "gpt-busy");
    assert_eq!(busy, 4, "two attempts in the interrupted run, two in the next");
    assert_eq!(calls_to(&models, "gpt-test"), 1, "the fallback answered once");
    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "{exit:?}");
}

/// The model asks to read the agent's memory while the database stops: the model is not told
/// the read failed; the run stops, and its next run reads the memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_cannot_read_its_memory_while_the_database_is_down_runs_again_after() {
    let Some(pg) = PrivatePostgres::start() else { return };
    let models = FakeModels::start().await;
    models.set_latency_for("gpt-memo", OPEN_CALL);
    let read_memory = Script::Call { name: "memory".into(), arguments: json!({"action": "read"}) };
    models.plan_for("gpt-memo", vec![read_memory, Script::AnswerFromToolResult]);
    let data_dir = tempfile::tempdir().unwrap();
    let settings = json!({"model": "openai:gpt-memo", "tools": ["memory"]});
    let (server, token, path) = one_task(&pg, &models, &data_dir, settings).await;

    let gave_up = "run interrupted: cannot read the agent's memory";
    outage(&pg, &models, &server, ("gpt-memo", 1), gave_up).await;

    let (done, steps) = ended(&server, &token, &path).await;
    assert_eq!(done["status"], "complete", "{done}");
    assert_eq!(done["result"], "Done: Your memory is empty.", "the read the model was given");
    let steps = steps.to_string();
    assert!(!steps.contains("read the agent's memory: "), "{steps}");
    assert_eq!(calls_to(&models, "gpt-memo"), 3, "the interrupted call, then the next run's two");
    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "{exit:?}");
}

/// The model calls a tool that needs a person's approval while the database stops: the look
/// for the call's approval cannot be made, so the run stops; the next run asks for the
/// approval, and once given the call runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_cannot_read_an_approval_while_the_database_is_down_runs_again_after() {
    let Some(pg) = PrivatePostgres::start() else { return };
    let models = FakeModels::start().await;
    models.set_latency_for("gpt-careful", OPEN_CALL);
    let note = Script::Call {
        name: "memory".into(),
        arguments: json!({"action": "append", "text": "Approved note."}),
    };
    models.plan_for("gpt-careful", vec![note, Script::Answer("Saved.".into())]);
    let data_dir = tempfile::tempdir().unwrap();
    let settings =
        json!({"model": "openai:gpt-careful", "tools": ["memory"], "approval_tools": ["memory"]});
    let (server, token, path) = one_task(&pg, &models, &data_dir, settings).await;

    let gave_up = "run interrupted: cannot read a call's approval";
    outage(&pg, &models, &server, ("gpt-careful", 1), gave_up).await;
    let status =
        || async { server.send(reqwest::Method::GET, &path, Some(&token), Value::Null).await.1 };
    eventually(Duration::from_secs(60), "the task waits for approval", || async {
        status().await["status"] == "awaiting_approval"
    })
    .await;
    server.post(&format!("{path}/approve"), &token, Value::Null, 200).await;

    let (done, _) = ended(&server, &token, &path).await;
    assert_eq!(done["status"], "complete", "{done}");
    assert_eq!(done["result"], "Saved.");
    let (_, memory) = server
        .send(reqwest::Method::GET, "/api/agents/steady/memory", Some(&token), Value::Null)
        .await;
    assert_eq!(memory.to_string().matches("Approved note.").count(), 1, "{memory}");
    assert_eq!(
        calls_to(&models, "gpt-careful"),
        3,
        "the interrupted call, then the next run's two"
    );
    let exit = server.signal("-TERM").await;
    assert!(exit.success(), "{exit:?}");
}
