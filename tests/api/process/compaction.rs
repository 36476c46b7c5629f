//! A long run killed with `kill -9` just after a compaction resumes on a new process with the
//! same context: the task, the summary and the steps after it, as the dead process sent them.

use super::*;
use crate::runtime::compaction::note;

backend_tests! { db;
    a_run_killed_after_a_compaction_resumes_with_the_same_compacted_context,
}

const MODEL: &str = "long-crashy";
const TASK: &str = "Read your notes forty times";

async fn a_run_killed_after_a_compaction_resumes_with_the_same_compacted_context(db: TestDb) {
    let models = FakeModels::start().await;
    models.script_for(MODEL, (1..=40).map(note).chain([Script::Answer("All forty read.".into())]));
    // The first call after the first summary is the one cut off by the kill.
    models.hold_after_summary(MODEL, Duration::from_secs(60));
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = runtime_env(&db, &data_dir, &models);
    env.push(("AGENTD_MODELS__MAX_TOKENS", "256".into()));
    env.push(("AGENTD_MODELS__CONTEXT_WINDOWS", format!("openai:{MODEL}=4000")));
    let server = Server::start(&env).await;
    let token = server.register("long@example.com").await;
    let agent = json!({"id": "long", "name": "Long", "role_prompt": "Read.", "channel": "c"});
    server.post("/api/agents", &token, agent, 201).await;
    let settings =
        json!({"model": format!("openai:{MODEL}"), "tools": ["memory"], "max_steps": 50});
    server.patch("/api/agents/long", &token, settings, 200).await;
    let task = server.post("/api/agents/long/backlog", &token, json!({"title": TASK}), 201).await;
    server.post("/api/agents/long/start", &token, Value::Null, 200).await;
    eventually(Duration::from_secs(30), "the call after a compaction is open", || async {
        let calls = models.calls();
        calls.iter().any(|c| c.forbids_tools())
            && calls.last().is_some_and(|c| !c.forbids_tools() && c.answered.is_none())
    })
    .await;
    server.signal("-KILL").await;
    let before = models.calls();
    let cut_off = before.last().unwrap().clone();
    let compacted =
        db.count("SELECT COUNT(*) FROM task_steps WHERE kind = 'compaction'", &[]).await;
    assert_eq!(compacted, 1, "killed just after the first compaction");

    let server = Server::start(&env).await;
    let path = format!("/api/agents/long/backlog/{}", task["id"].as_str().unwrap());
    eventually(Duration::from_secs(60), "the task completes after the restart", || async {
        server.send(reqwest::Method::GET, &path, Some(&token), Value::Null).await.1["status"]
            == "complete"
    })
    .await;
    let after = models.calls();
    let resumed = &after[before.len()];
    assert!(!resumed.forbids_tools(), "the restart compacted again: {}", resumed.body);
    assert_eq!(resumed.system(), cut_off.system());
    assert_eq!(resumed.body["messages"], cut_off.body["messages"], "the context changed");
    assert_eq!(resumed.body["tools"], cut_off.body["tools"]);
    // The context is the compacted one: the task, then the summary, then the latest steps.
    let messages = cut_off.body["messages"].as_array().unwrap();
    assert_eq!(messages[1]["content"], TASK);
    let summary = messages[2]["content"].as_str().unwrap();
    assert!(summary.starts_with("Summary of your earlier work on this task"), "{summary}");
    assert_eq!(messages[3]["role"], "assistant", "the latest model step follows the summary");
    let (_, steps) = server
        .send(reqwest::Method::GET, &format!("{path}/steps"), Some(&token), Value::Null)
        .await;
    let steps = steps["steps"].as_array().unwrap();
    let seqs: Vec<i64> = steps.iter().map(|s| s["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>(), "no step lost or repeated");
    assert!(server.signal("-TERM").await.success());
}
