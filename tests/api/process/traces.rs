//! Traces of runs, exported over OTLP by the real process to a collector that decodes them
//! with the official protobuf definitions: one trace per task, continuing the request that
//! added it, across a `kill -9`; message content only when the operator asks; runs that finish
//! whatever the collector does.

use super::*;
use crate::otlp_receiver::{OtlpReceiver, ReceivedSpan};
use support::closed_port::ClosedPort;

backend_tests! { db;
    a_run_of_three_model_calls_is_one_trace_continuing_the_request_that_added_it,
    message_content_is_in_the_spans_only_when_the_operator_turns_it_on,
    the_wait_for_an_approval_is_between_two_runs_of_one_trace,
    a_scheduled_task_starts_a_trace_of_its_own_under_the_schedules_look,
    a_run_resumed_by_another_process_after_kill_9_continues_the_same_trace,
    runs_complete_when_the_collector_is_gone_and_the_lost_spans_are_counted,
}

/// The caller's trace, as a `traceparent` header names it.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn call(name: &str, arguments: Value) -> Script {
    Script::Call { name: name.into(), arguments }
}

/// A process on the fake model, exporting to `endpoint` with short batches.
fn tracing_env(
    db: &TestDb,
    data_dir: &tempfile::TempDir,
    models: &FakeModels,
    endpoint: &str,
) -> Vec<(&'static str, String)> {
    let mut env = runtime_env(db, data_dir, models);
    env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_owned()));
    env.push(("OTEL_BSP_SCHEDULE_DELAY", "50".into()));
    env.push(("OTEL_EXPORTER_OTLP_TIMEOUT", "2000".into()));
    env
}

/// Creates the agent `id` on the model `openai:<model>` with the memory tool, and adds a task
/// titled `title`, with a `traceparent` header naming [`TRACE`] when `traced`. Returns the
/// task's path.
async fn agent_with_task(
    server: &Server,
    token: &str,
    (id, model): (&str, &str),
    title: &str,
    traced: bool,
) -> String {
    let agent = json!({"id": id, "name": "Tracer", "role_prompt": "Trace.", "channel": "c"});
    server.post("/api/agents", token, agent, 201).await;
    let mut settings = json!({"model": format!("openai:{model}"), "tools": ["memory"]});
    if id.starts_with("careful") {
        settings["approval_tools"] = json!(["memory"]);
    }
    server.patch(&format!("/api/agents/{id}"), token, settings, 200).await;
    let mut request = reqwest::Client::new()
        .post(format!("{}/api/agents/{id}/backlog", server.address))
        .bearer_auth(token)
        .json(&json!({"title": title}));
    if traced {
        request = request.header("traceparent", format!("00-{TRACE}-{CALLER_SPAN}-01"));
    }
    let added = request.send().await.unwrap();
    assert_eq!(added.status(), 201);
    let task: Value = added.json().await.unwrap();
    server.post(&format!("/api/agents/{id}/start"), token, Value::Null, 200).await;
    format!("/api/agents/{id}/backlog/{}", task["id"].as_str().unwrap())
}

async fn wait_complete(server: &Server, token: &str, path: &str) {
    eventually(Duration::from_secs(30), "the task completes", || async {
        server.send(reqwest::Method::GET, path, Some(token), Value::Null).await.1["status"]
            == "complete"
    })
    .await;
}

/// The one span named `name`.
fn only(collector: &OtlpReceiver, name: &str) -> ReceivedSpan {
    let found = collector.named(name);
    assert_eq!(found.len(), 1, "one '{name}' span: {:#?}", collector.spans());
    found.into_iter().next().unwrap()
}

async fn a_run_of_three_model_calls_is_one_trace_continuing_the_request_that_added_it(db: TestDb) {
    let models = FakeModels::start().await;
    models.script_for(
        "traced",
        [
            call("memory", json!({"action": "append", "text": "Kickoff is Monday."})),
            Script::Calls(vec![
                ("memory".into(), json!({"action": "read"})),
                ("no_such_tool".into(), json!({})),
            ]),
            Script::Answer("All done.".into()),
        ],
    );
    let collector = OtlpReceiver::start().await;
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(&tracing_env(&db, &data_dir, &models, &collector.endpoint)).await;
    let token = server.register("traces@example.com").await;
    let path = agent_with_task(&server, &token, ("tracer", "traced"), "Plan the week", true).await;
    wait_complete(&server, &token, &path).await;
    eventually(Duration::from_secs(10), "the run's spans are exported", || async {
        collector.named("invoke_agent tracer").len() == 1
    })
    .await;

    // The request that added the task continues the caller's trace; the run is its child.
    let request = only(&collector, "POST /api/agents/{id}/backlog");
    assert_eq!((request.trace_id.as_str(), request.parent_span_id.as_str()), (TRACE, CALLER_SPAN));
    assert_eq!(request.attribute("http.response.status_code"), Some("201"));
    let run = only(&collector, "invoke_agent tracer");
    assert_eq!((run.trace_id.as_str(), run.parent_span_id.as_str()), (TRACE, &*request.span_id));
    assert_eq!(run.attribute("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(run.attribute("gen_ai.agent.id"), Some("tracer"));
    assert_eq!(run.attribute("gen_ai.agent.name"), Some("Tracer"));
    assert_eq!(run.attribute("gen_ai.provider.name"), Some("openai"));
    assert_eq!(run.attribute("agentd.run.end"), Some("complete"));
    assert_eq!(run.service, "agentd", "the service's name when none is configured");

    // Three model calls, each a `chat` span under the run, in order.
    let chats = collector.named("chat traced");
    assert_eq!(chats.len(), 3, "{chats:#?}");
    for chat in &chats {
        assert_eq!((chat.trace_id.as_str(), chat.parent_span_id.as_str()), (TRACE, &*run.span_id));
        assert_eq!(chat.attribute("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.attribute("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.attribute("gen_ai.request.model"), Some("traced"));
        for tokens in ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"] {
            assert!(chat.attribute(tokens).is_some_and(|t| t.parse::<i64>().is_ok()), "{chat:#?}");
        }
    }
    let mut reasons: Vec<&str> =
        chats.iter().filter_map(|c| c.attribute("gen_ai.response.finish_reasons")).collect();
    reasons.sort_unstable();
    assert_eq!(reasons, ["stop", "tool_calls", "tool_calls"]);

    // Three tool calls under the run; the unknown tool's span carries its error.
    let tools = collector.starting("execute_tool ");
    assert_eq!(tools.len(), 3, "{tools:#?}");
    for tool in &tools {
        assert_eq!((tool.trace_id.as_str(), tool.parent_span_id.as_str()), (TRACE, &*run.span_id));
        assert_eq!(tool.attribute("gen_ai.operation.name"), Some("execute_tool"));
        assert!(tool.attribute("gen_ai.tool.call.id").is_some_and(|id| !id.is_empty()));
    }
    assert_eq!(collector.named("execute_tool memory").len(), 2);
    let failed = only(&collector, "execute_tool no_such_tool");
    assert_eq!(failed.attribute("gen_ai.tool.name"), Some("no_such_tool"));
    assert_eq!((failed.attribute("error.type"), failed.status), (Some("unknown_tool"), 2));

    // No prompt, completion or tool text unless the operator asks.
    for span in collector.spans() {
        for key in ["gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"]
        {
            assert!(span.attribute(key).is_none(), "{key} in {span:#?}");
        }
    }
    assert!(collector.content_types().iter().all(|t| t == "application/x-protobuf"));
    assert_eq!(collector.requests().1, 0, "every export decodes");
}

async fn message_content_is_in_the_spans_only_when_the_operator_turns_it_on(db: TestDb) {
    let models = FakeModels::start().await;
    models.script_for(
        "verbose",
        [
            call("memory", json!({"action": "append", "text": "Kickoff is Monday."})),
            Script::Answer("Noted the kickoff.".into()),
        ],
    );
    let collector = OtlpReceiver::start().await;
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = tracing_env(&db, &data_dir, &models, &collector.endpoint);
    env.push(("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true".into()));
    env.push(("OTEL_SERVICE_NAME", "agents-prod".into()));
    let server = Server::start(&env).await;
    let token = server.register("content@example.com").await;
    let path =
        agent_with_task(&server, &token, ("talker", "verbose"), "Remember Monday", false).await;
    wait_complete(&server, &token, &path).await;
    eventually(Duration::from_secs(10), "the run's spans are exported", || async {
        collector.named("invoke_agent talker").len() == 1
    })
    .await;
    // Without a caller's trace, the request starts one and the run continues it.
    let request = only(&collector, "POST /api/agents/{id}/backlog");
    let run = only(&collector, "invoke_agent talker");
    assert!(request.parent_span_id.is_empty(), "a new trace");
    assert_eq!((&run.trace_id, &run.parent_span_id), (&request.trace_id, &request.span_id));
    assert_eq!(run.service, "agents-prod");

    let chats = collector.named("chat verbose");
    assert_eq!(chats.len(), 2);
    for chat in &chats {
        let input = chat.attribute("gen_ai.input.messages").unwrap();
        assert!(input.contains("Remember Monday"), "{input}");
        assert!(chat.attribute("gen_ai.system_instructions").unwrap().contains("Trace."));
    }
    let outputs: Vec<&str> =
        chats.iter().filter_map(|c| c.attribute("gen_ai.output.messages")).collect();
    assert!(outputs.iter().any(|o| o.contains("Noted the kickoff.")), "{outputs:?}");
    let tool = only(&collector, "execute_tool memory");
    assert!(tool.attribute("gen_ai.tool.call.arguments").unwrap().contains("Kickoff is Monday."));
    assert!(tool.attribute("gen_ai.tool.call.result").is_some());
}

async fn the_wait_for_an_approval_is_between_two_runs_of_one_trace(db: TestDb) {
    let models = FakeModels::start().await;
    models.script_for(
        "gated",
        [
            call("memory", json!({"action": "append", "text": "Approved note."})),
            Script::Answer("Saved.".into()),
        ],
    );
    let collector = OtlpReceiver::start().await;
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(&tracing_env(&db, &data_dir, &models, &collector.endpoint)).await;
    let token = server.register("approvals@example.com").await;
    let path = agent_with_task(&server, &token, ("careful", "gated"), "Note it", true).await;
    eventually(Duration::from_secs(20), "the task waits for approval", || async {
        server.send(reqwest::Method::GET, &path, Some(&token), Value::Null).await.1["status"]
            == "awaiting_approval"
    })
    .await;
    server.post(&format!("{path}/approve"), &token, Value::Null, 200).await;
    wait_complete(&server, &token, &path).await;
    eventually(Duration::from_secs(10), "both runs' spans are exported", || async {
        collector.named("invoke_agent careful").len() == 2
    })
    .await;

    let request = only(&collector, "POST /api/agents/{id}/backlog");
    let mut runs = collector.named("invoke_agent careful");
    runs.sort_by_key(|r| r.attribute("agentd.run.end") != Some("awaiting_approval"));
    let ends: Vec<_> = runs.iter().map(|r| r.attribute("agentd.run.end")).collect();
    assert_eq!(ends, [Some("awaiting_approval"), Some("complete")]);
    for run in &runs {
        assert_eq!(
            (run.trace_id.as_str(), run.parent_span_id.as_str()),
            (TRACE, &*request.span_id)
        );
    }
    let tools = collector.named("execute_tool memory");
    assert_eq!(tools.len(), 2, "the call, parked, then run: {tools:#?}");
    let events = |run: &ReceivedSpan| -> Vec<String> {
        let tool = tools.iter().find(|t| t.parent_span_id == run.span_id).unwrap();
        tool.events.iter().map(|(name, _)| name.clone()).collect()
    };
    assert_eq!(events(&runs[0]), ["agentd.approval.requested"]);
    assert_eq!(events(&runs[1]), ["agentd.approval.decided"]);
    let decided =
        tools.iter().flat_map(|t| &t.events).find(|(n, _)| n == "agentd.approval.decided");
    assert_eq!(
        decided.unwrap().1.get("agentd.approval.status").map(String::as_str),
        Some("approved")
    );
}

async fn a_scheduled_task_starts_a_trace_of_its_own_under_the_schedules_look(db: TestDb) {
    let models = FakeModels::start().await;
    let collector = OtlpReceiver::start().await;
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = tracing_env(&db, &data_dir, &models, &collector.endpoint);
    env.push(("AGENTD_SCHEDULES__SECONDS_FIELD", "true".into()));
    env.push(("AGENTD_SCHEDULES__POLL_SECONDS", "0.1".into()));
    let server = Server::start(&env).await;
    let token = server.register("schedules@example.com").await;
    let agent = json!({"id": "ticker", "name": "Ticker", "role_prompt": "Tick.", "channel": "c"});
    server.post("/api/agents", &token, agent, 201).await;
    server.post("/api/agents/ticker/start", &token, Value::Null, 200).await;
    let body = json!({"cron": "* * * * * *", "title": "Tick", "overlap": "skip_if_active"});
    server.post("/api/agents/ticker/schedules", &token, body, 201).await;
    eventually(Duration::from_secs(20), "a scheduled task's run is exported", || async {
        !collector.named("invoke_agent ticker").is_empty()
    })
    .await;

    let run = collector.named("invoke_agent ticker").remove(0);
    let fired = collector.starting("fire_schedule ");
    let look = fired.iter().find(|f| f.span_id == run.parent_span_id);
    let look = look.unwrap_or_else(|| panic!("the run's parent is a schedule's look: {fired:#?}"));
    assert!(look.parent_span_id.is_empty(), "a trace of its own: {look:#?}");
    assert_eq!(look.trace_id, run.trace_id);
    let requests = collector.starting("POST ");
    assert!(requests.iter().all(|r| r.trace_id != run.trace_id), "no request's trace");
}

async fn a_run_resumed_by_another_process_after_kill_9_continues_the_same_trace(db: TestDb) {
    let models = FakeModels::start().await;
    models.script_for(
        "crashing",
        [
            call("memory", json!({"action": "append", "text": "Step one done."})),
            // The first process is killed while this call is open.
            Script::Hang(Duration::from_secs(60)),
            Script::Answer("Finished elsewhere.".into()),
        ],
    );
    let collector = OtlpReceiver::start().await;
    let data_dir = tempfile::tempdir().unwrap();
    let mut env = tracing_env(&db, &data_dir, &models, &collector.endpoint);
    env.push(("OTEL_SERVICE_NAME", "node-a".into()));
    let first = Server::start(&env).await;
    let token = first.register("crash@example.com").await;
    let path = agent_with_task(&first, &token, ("phoenix", "crashing"), "Survive", true).await;
    eventually(Duration::from_secs(20), "the second model call is open", || async {
        models.calls().len() == 2
    })
    .await;
    eventually(Duration::from_secs(10), "the finished spans are exported", || async {
        collector.named("execute_tool memory").len() == 1
    })
    .await;
    first.signal("-KILL").await;

    // Another process (on PostgreSQL it could be any node) takes the task once its lease ends.
    env.retain(|(name, _)| *name != "OTEL_SERVICE_NAME");
    env.push(("OTEL_SERVICE_NAME", "node-b".into()));
    let second = Server::start(&env).await;
    wait_complete(&second, &token, &path).await;
    eventually(Duration::from_secs(10), "the resumed run's span is exported", || async {
        collector.named("invoke_agent phoenix").len() == 1
    })
    .await;

    let request = only(&collector, "POST /api/agents/{id}/backlog");
    assert_eq!(request.service, "node-a");
    let resumed = only(&collector, "invoke_agent phoenix");
    assert_eq!(resumed.service, "node-b");
    assert_eq!(
        (resumed.trace_id.as_str(), resumed.parent_span_id.as_str()),
        (TRACE, &*request.span_id),
        "the resumed run continues the trace of the request that added the task"
    );
    assert_eq!(resumed.attribute("agentd.task.attempt"), Some("2"));
    let chats: Vec<ReceivedSpan> = collector.named("chat crashing");
    assert!(chats.iter().all(|c| c.trace_id == TRACE), "{chats:#?}");
    assert!(
        chats.iter().any(|c| c.service == "node-a") && chats.iter().any(|c| c.service == "node-b"),
        "both nodes' calls are in the trace: {chats:#?}"
    );
}

async fn runs_complete_when_the_collector_is_gone_and_the_lost_spans_are_counted(db: TestDb) {
    let models = FakeModels::start().await;
    let refusing = ClosedPort::new();
    let closed = format!("http://{}", refusing.address());
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(&tracing_env(&db, &data_dir, &models, &closed)).await;
    let token = server.register("nocollector@example.com").await;
    let path = agent_with_task(&server, &token, ("lonely", "gpt-test"), "Work alone", true).await;
    wait_complete(&server, &token, &path).await;
    eventually(Duration::from_secs(10), "the lost spans are counted", || async {
        let (_, text) = get_metrics(&server).await;
        let samples = crate::helpers::metric_samples(&text);
        crate::helpers::sample(
            &samples,
            r#"agentd_trace_spans_dropped_total{reason="export_failed"}"#,
        ) > 0.0
    })
    .await;
    let (_, text) = get_metrics(&server).await;
    let samples = crate::helpers::metric_samples(&text);
    assert_eq!(crate::helpers::sample(&samples, "agentd_trace_spans_exported_total"), 0.0);
}

async fn get_metrics(server: &Server) -> (u16, String) {
    let response = reqwest::get(format!("{}/metrics", server.address)).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}
