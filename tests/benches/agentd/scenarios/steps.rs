//! Section 2c: agents that act. Every task is a 3-call tool run on the fake model: `memory`,
//! then `create_task` (into an idle agent's backlog), then the answer; 5 stored steps a task.

use serde_json::json;

use super::{
    COMPLETED, EMAIL, agents, discord_env, fresh, map_agents, model_env, runtime_row, start_agents,
    started_rate,
};
use crate::fake_discord::FakeDiscord;
use crate::fake_models::{FakeModels, Script};
use crate::helpers::Backend;
use crate::load::quantile_ms;
use crate::report::{Report, name};
use crate::server::Agentd;

/// 100 agents, 20 tasks each; beside it, what the server spends per step.
pub(crate) async fn runtime_tools(backend: Backend, report: &mut Report) {
    let label = name(backend);
    let models = FakeModels::start().await;
    models.plan_for(
        "toolbench",
        vec![
            Script::Call {
                name: "memory".into(),
                arguments: json!({"action": "replace", "text": "Benchmarks run on Mondays."}),
            },
            Script::Call {
                name: "create_task".into(),
                arguments: json!({"title": "Follow up", "agent_id": "sink-0"}),
            },
            Script::Answer("Done.".into()),
        ],
    );
    let discord = FakeDiscord::start().await;
    let mut env = model_env(&models);
    env.extend(discord_env(&discord));
    let server = Agentd::start(fresh(backend).await, &env).await;
    let token = server.register(EMAIL).await;
    agents(&server, &token, "sink", 1, 0, json!({})).await;
    let (count, tasks) = (100, 20);
    let tools = json!({"model": "openai:toolbench", "tools": ["memory", "create_task"]});
    agents(&server, &token, "tools", count, tasks, tools).await;
    map_agents(&server, &discord, &token, "tools", count, 10).await;
    let measured = started_rate(&server, &token, "tools", count, count * tasks).await;
    runtime_row(report, "3-call tool run, 100 agents", label, count * tasks, measured, None);
    let loaded = step_overhead(&models, "You are agent");
    report.target(
        format!("Server time per step p50, 100 agents at once ({label}): for information"),
        format!("{:.2} ms (p99 {:.2} ms)", loaded.0, loaded.1),
        true,
    );
    // One agent alone: what a step costs the server when it does not queue behind others.
    let solo = json!({"model": "openai:toolbench", "tools": ["memory", "create_task"],
                      "role_prompt": "You are the solo agent."});
    agents(&server, &token, "solo", 1, SOLO_TASKS, solo).await;
    start_agents(&server, &token, "solo", 1).await;
    let total = (count * tasks + SOLO_TASKS) as f64;
    server.wait_for_metric(COMPLETED, total, std::time::Duration::from_secs(120)).await;
    let alone = step_overhead(&models, "You are the solo agent.");
    report.target(
        format!("Server time per step p50 < 2 ms, one agent ({label})"),
        format!("{:.2} ms (p99 {:.2} ms)", alone.0, alone.1),
        alone.0 < 2.0,
    );
    server.stop().await;
}

/// Tasks of the agent that runs alone.
const SOLO_TASKS: usize = 50;

/// The server's time between a model answer and the next call of the same run, halved: each
/// such gap stores the model step, runs the tool and stores its step. p50 and p99, in ms.
fn step_overhead(models: &FakeModels, role: &str) -> (f64, f64) {
    let mut runs = std::collections::HashMap::<(String, String), Vec<_>>::new();
    for call in models.calls().into_iter().filter(|c| c.system().starts_with(role)) {
        runs.entry((call.system().to_owned(), call.user().to_owned())).or_default().push(call);
    }
    let mut gaps: Vec<u32> = Vec::new();
    for calls in runs.values_mut() {
        calls.sort_by_key(|c| c.received);
        for pair in calls.windows(2) {
            if let Some(answered) = pair[0].answered {
                let gap = pair[1].received.saturating_duration_since(answered) / 2;
                gaps.push(u32::try_from(gap.as_micros()).unwrap_or(u32::MAX));
            }
        }
    }
    gaps.sort_unstable();
    assert!(!gaps.is_empty(), "no run made two calls");
    (quantile_ms(&gaps, 0.5), quantile_ms(&gaps, 0.99))
}
