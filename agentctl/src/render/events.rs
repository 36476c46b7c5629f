//! How `watch` shows an event on a terminal: one line, its time, agent and type, then its
//! gist (what an activity entry says, a step's number, kind, tool and cost, a retry's next
//! attempt).

use chrono::{DateTime, Local, Utc};

use agentcore::domain::event::{Event, EventType, Retry, StepStarted};
use agentcore::domain::steps::{Step, StepKind};

use super::{short, usd};

/// The widest type word (`approval.requested`), so the gists line up.
const TYPE_WIDTH: usize = 18;

/// `14:03:05  writer  step.finished       step 2 tool memory: Saved.`
pub(crate) fn line(event: &Event) -> String {
    let agent = event.agent_id.as_deref().unwrap_or("-");
    let kind = event.kind.as_str();
    format!("{}  {agent}  {kind:<TYPE_WIDTH$}  {}", clock(event.at), gist(event))
}

/// The time of day, in the local zone.
fn clock(at: DateTime<Utc>) -> String {
    at.with_timezone(&Local).format("%H:%M:%S").to_string()
}

fn gist(event: &Event) -> String {
    if event.kind == EventType::Resync {
        return "events were missed (the server no longer has them): what is shown may be \
                out of date; reload it (e.g. `agentctl tasks list <agent>`). Following on."
            .to_owned();
    }
    if let Some(step) = &event.step {
        return finished(step);
    }
    if let Some(started) = &event.started {
        return starting(started);
    }
    if let Some(retry) = &event.retry {
        return retrying(retry);
    }
    let details = event.activity.as_ref().map_or("", |entry| entry.details.as_str());
    match (&event.kind, &event.task_id) {
        (EventType::TaskAdded | EventType::TaskRequeued, Some(task)) => {
            format!("{details} (task {task})")
        }
        _ => details.to_owned(),
    }
}

fn starting(started: &StepStarted) -> String {
    match &started.tool {
        Some(tool) => format!("step {} {} {tool}…", started.seq, started.kind.as_str()),
        None => format!("step {} {}…", started.seq, started.kind.as_str()),
    }
}

fn finished(step: &Step) -> String {
    let mut text = format!("step {} {}", step.seq, step.kind.as_str());
    match step.kind {
        StepKind::Tool => {
            text.push(' ');
            text.push_str(step.tool.as_deref().unwrap_or("?"));
        }
        StepKind::Model | StepKind::Summary if !step.tool_calls.is_empty() => {
            let calls: Vec<&str> = step.tool_calls.iter().map(|c| c.name.as_str()).collect();
            text.push_str(&format!(" → {}", calls.join(", ")));
        }
        StepKind::Model | StepKind::Summary => {}
        StepKind::Compaction => {
            text.push_str(&format!(" of steps 1-{}", step.compacted_through.unwrap_or_default()));
        }
    }
    match (&step.error, &step.output) {
        (Some(error), _) => text.push_str(&format!(": error: {}", short(error))),
        (None, Some(output)) if !output.is_empty() => {
            text.push_str(&format!(": {}", short(output)));
        }
        _ => {}
    }
    let mut spent = Vec::new();
    if let Some(usage) = &step.usage {
        let cached = usage.cache_read_tokens + usage.cache_write_tokens;
        spent.push(if cached > 0 {
            format!(
                "{}+{} tokens, cache {} read {} written",
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens
            )
        } else {
            format!("{}+{} tokens", usage.input_tokens, usage.output_tokens)
        });
    }
    if let Some(cost) = &step.cost {
        spent.push(if cost.unpriced {
            format!("{} unpriced", cost.model)
        } else {
            format!("{} {}", cost.model, usd(cost.cost_micros))
        });
    }
    if !spent.is_empty() {
        text.push_str(&format!(" [{}]", spent.join(", ")));
    }
    text
}

fn retrying(retry: &Retry) -> String {
    let status = retry.status.map(|s| format!(" ({s})")).unwrap_or_default();
    format!(
        "attempt {} failed{status}: {}; next attempt at {}",
        retry.attempt,
        short(&retry.reason),
        clock(retry.next_attempt_at)
    )
}

#[cfg(test)]
mod tests {
    use agentcore::domain::budget::StepCost;
    use agentcore::domain::steps::StepCall;
    use agentcore::domain::task::Usage;

    use super::*;

    fn step(kind: StepKind) -> Step {
        Step {
            seq: 2,
            kind,
            tool: None,
            call_id: None,
            arguments: None,
            output: None,
            tool_calls: Vec::new(),
            error: None,
            duration_ms: 5,
            usage: None,
            cost: None,
            compacted_through: None,
            tried: Vec::new(),
            created_at: Utc::now(),
        }
    }

    #[test]
    fn a_model_steps_line_names_its_calls_tokens_and_cost() {
        let mut model = step(StepKind::Model);
        model.tool_calls =
            vec![StepCall { id: "c".into(), name: "memory".into(), arguments: "{}".into() }];
        model.usage = Some(Usage::new(120, 30));
        model.cost =
            Some(StepCost { model: "openai:x".into(), cost_micros: 4_200, unpriced: false });
        assert_eq!(finished(&model), "step 2 model → memory [120+30 tokens, openai:x $0.0042]");
        let mut tool = step(StepKind::Tool);
        tool.tool = Some("memory".into());
        tool.output = Some("Saved.\nmore".into());
        assert_eq!(finished(&tool), "step 2 tool memory: Saved.…");
        tool.error = Some("no such key".into());
        assert_eq!(finished(&tool), "step 2 tool memory: error: no such key");
    }

    #[test]
    fn a_compaction_steps_line_says_which_steps_it_summarises() {
        let mut compaction = step(StepKind::Compaction);
        compaction.compacted_through = Some(1);
        compaction.output = Some("Read the notes.".into());
        assert_eq!(finished(&compaction), "step 2 compaction of steps 1-1: Read the notes.");
    }

    #[test]
    fn money_reads_as_the_dashboards_usd_filter() {
        assert_eq!(usd(0), "$0.00");
        assert_eq!(usd(1_500_000), "$1.50");
        assert_eq!(usd(25_000_000), "$25.00");
        assert_eq!(usd(4_200), "$0.0042");
        assert_eq!(usd(10_000), "$0.01");
    }
}
