//! Section 12: a shared rate limit. 100 agents on 3 agentd processes over one database, each
//! with more work than the limit lets through, against a fake provider that enforces N
//! requests per window (as providers do: 429 with `Retry-After` over it). Over a measured span
//! of whole windows: the most requests the provider saw in any window, its 429s, and how
//! evenly the calls were spread over the agents.

use super::*;

const AGENTS: usize = 100;
const TASKS: usize = 10;
const NODES: usize = 3;
const LIMIT: usize = 50;
const WINDOW: Duration = Duration::from_secs(2);
/// Windows measured, from the provider's first request.
const WINDOWS: u32 = 6;

pub(crate) async fn ratelimit(backend: Backend, report: &mut Report) {
    let models = FakeModels::start().await;
    models.enforce_limit(LIMIT, WINDOW);
    let mut env = model_env(&models);
    env.push(("AGENTD_MODELS__RATE_LIMITS", format!("openai={LIMIT}/-")));
    env.push(("AGENTD_MODELS__RATE_LIMIT_WINDOW_SECONDS", WINDOW.as_secs().to_string()));
    env.push(("AGENTD_RUNTIME__POLL_SECONDS", "1".into()));
    // Tasks still waiting for a slot at the end are not waited for.
    env.push(("AGENTD_RUNTIME__SHUTDOWN_GRACE_SECONDS", "0".into()));
    let db = fresh(backend).await;
    let mut nodes = Vec::with_capacity(NODES);
    for _ in 0..NODES {
        nodes.push(Agentd::start(db.stand_in(), &env).await);
    }
    let server = &nodes[0];
    let token = server.register(EMAIL).await;
    agents(server, &token, "limited", AGENTS, TASKS, json!({})).await;
    start_agents(server, &token, "limited", AGENTS).await;
    let span = WINDOW * WINDOWS;
    eventually(Duration::from_secs(60), "the first request", || async {
        !models.calls().is_empty()
    })
    .await;
    let begun = models.calls()[0].received;
    tokio::time::sleep_until((begun + span).into()).await;
    let calls: Vec<_> =
        models.calls().into_iter().filter(|c| c.received.duration_since(begun) < span).collect();
    let refused = models.refused_by_limit();
    for node in nodes {
        node.stop().await;
    }
    drop(db);

    let seen: Vec<Instant> = calls.iter().filter(|c| !c.rate_limited).map(|c| c.received).collect();
    let busiest = seen
        .iter()
        .map(|from| {
            seen.iter().filter(|t| **t >= *from && t.duration_since(*from) < WINDOW).count()
        })
        .max()
        .unwrap_or(0);
    let mut per_agent = vec![0usize; AGENTS];
    for call in calls.iter().filter(|c| !c.rate_limited) {
        if let Some(n) = agent_of(call.system()) {
            per_agent[n] += 1;
        }
    }
    let mean = per_agent.iter().sum::<usize>() as f64 / AGENTS as f64;
    let variance =
        per_agent.iter().map(|n| (*n as f64 - mean).powi(2)).sum::<f64>() / AGENTS as f64;
    let (min, max) = (per_agent.iter().min().unwrap(), per_agent.iter().max().unwrap());
    let served = per_agent.iter().filter(|n| **n > 0).count();
    let label = name(backend);
    report.row(
        Section::RateLimit,
        vec![
            label.into(),
            format!("{LIMIT} / {}", WINDOW.as_secs()),
            seen.len().to_string(),
            busiest.to_string(),
            refused.to_string(),
            format!("{min} / {max}"),
            format!("{:.2}", variance.sqrt()),
            format!("{served} of {AGENTS}"),
        ],
    );
    report.target(
        format!(
            "The provider sees at most {LIMIT} requests in any {}s ({label})",
            WINDOW.as_secs()
        ),
        busiest.to_string(),
        busiest <= LIMIT,
    );
    report.target(
        format!("Every agent gets a share: calls per agent differ by at most 1 ({label})"),
        format!("{min} / {max}"),
        max - min <= 1,
    );
}

/// The agent a request is for, from its system prompt (`You are agent {i}; ...`).
fn agent_of(system: &str) -> Option<usize> {
    let rest = &system[system.find("You are agent ")? + "You are agent ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|n| *n < AGENTS)
}
