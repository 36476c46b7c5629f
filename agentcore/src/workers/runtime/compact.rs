//! Long runs: before a model call whose conversation crowds its model's context window, the
//! older steps are compacted. The model is asked once, without tools, for a summary of them; the
//! summary is stored as a `compaction` step naming the last step it covers, and the
//! conversation goes on as the task, the summary and the steps after those it covers. The rules
//! (when, where to cut, what the conversation holds) are `domain::compaction`'s; a resumed run
//! rebuilds the same conversation from the stored steps with [`conversation`].

use super::{Node, ReadFailed};
use crate::domain::budget::StepCost;
use crate::domain::compaction::{self, cut, in_context, summary_message};
use crate::domain::runtime::{AgentKey, ClaimedTask, Outcome};
use crate::domain::steps::{Step, StepKind};
use crate::models::{Completion, CompletionRequest, Message, ToolCall};

/// What a run does before its next model call.
pub(super) enum Plan {
    /// The conversation fits: the call goes out as it is.
    Fits,
    /// The older steps are summarised first.
    Compact(Compaction),
    /// The run ends: even its shortest conversation does not fit, or its steps cannot be read.
    Stop(Outcome),
    /// The database is out of reach: the run stops and resumes later
    /// ([`ReadFailed::Interrupted`]).
    Interrupted,
}

/// A compaction about to be asked for.
pub(super) struct Compaction {
    /// The last step the summary covers.
    pub through: i32,
    /// The conversation to summarise, ending with the request for the summary.
    pub messages: Vec<Message>,
    /// The run's stored steps, from which the conversation after the compaction is built.
    steps: Vec<Step>,
}

/// Decides, before `request` is sent for `claimed`'s run (which has stored `stored` steps),
/// whether its conversation must be compacted first: when its input tokens plus its answer's
/// bound crowd the model's window.
pub(super) async fn plan(
    node: &Node,
    agent: &AgentKey,
    claimed: &ClaimedTask,
    request: &CompletionRequest,
    stored: i32,
) -> Plan {
    let models = node.core.models();
    let model = claimed.agent.model.as_deref();
    let window = models.context_window(model);
    let answer = usize::try_from(request.max_tokens).unwrap_or(usize::MAX);
    let roomy = |needed: usize| !compaction::crowded(needed, window);
    let needed = need(node, model, request, answer, roomy).await;
    if roomy(needed.tokens) {
        return Plan::Fits;
    }
    let task = &claimed.task.id;
    let read = || node.core.run_store().run_context(agent, task, stored, 0);
    let steps = match super::read_for_run(node, task, "read the task's steps", read).await {
        Ok(context) => context.steps,
        Err(ReadFailed::Failed(error)) => {
            return Plan::Stop(Outcome::Failed { error, permanent: false });
        }
        Err(ReadFailed::Interrupted) => return Plan::Interrupted,
    };
    let context = in_context(&steps);
    let fits = |needed: usize| needed <= usize::try_from(window).unwrap_or(usize::MAX);
    // A summary call that would not fit either is not sent: the call goes out as it is when
    // it fits the whole window.
    let asked = match cut(&context) {
        Some(at) => {
            let mut asked = request.clone();
            asked.messages = conversation(&claimed.user_message(), &context[..at]);
            asked.messages.push(Message::User(compaction::summary_request()));
            let fitting = fits(need(node, model, &asked, answer, fits).await.tokens);
            fitting.then(|| (context[at].seq - 1, asked))
        }
        None => None,
    };
    match asked {
        Some((through, asked)) => {
            Plan::Compact(Compaction { through, messages: asked.messages, steps })
        }
        // Where nothing counted the request (a model without a published tokenizer whose
        // provider cannot count), the bound is safe but far above the real count: a run is
        // stopped only when a fair guess does not fit either (a guess that is wrong meets the
        // provider's own refusal, as the stop would have).
        None if fits(needed.tokens)
            || (!needed.counted
                && fits(models.input_tokens_estimate(model, request).saturating_add(answer))) =>
        {
            Plan::Fits
        }
        None => {
            let error = compaction::too_long(needed.tokens, window);
            tracing::warn!(task = %claimed.task.id, %error, "run stopped: its context is full");
            Plan::Stop(Outcome::Failed { error, permanent: false })
        }
    }
}

/// A request's input tokens plus its answer's bound.
struct Need {
    tokens: usize,
    /// Counted, by a tokenizer or by the provider, rather than bounded by the request's bytes.
    counted: bool,
}

/// What `request` needs for `model`: its bound first; where that is the byte bound (a model
/// without a published tokenizer, Anthropic's among them, whose bound is several times its
/// real count) and it is not `enough`, the provider's own count when it can count, as the
/// budget asks for it (`spend`). A long run is then compacted near its real window, not at a
/// quarter of it.
async fn need(
    node: &Node,
    model: Option<&str>,
    request: &CompletionRequest,
    answer: usize,
    enough: impl Fn(usize) -> bool,
) -> Need {
    let models = node.core.models();
    let bound = models.input_tokens_bound(model, request).saturating_add(answer);
    if models.counted_exactly(model, &request.model) {
        return Need { tokens: bound, counted: true };
    }
    if enough(bound) {
        return Need { tokens: bound, counted: false };
    }
    match super::spend::exact_bound(node, model, request).await {
        Some(exact) => Need { tokens: exact.saturating_add(answer).min(bound), counted: true },
        None => Need { tokens: bound, counted: false },
    }
}

impl Compaction {
    /// The step that stores `answer` (numbered `seq`, costing `cost`, taking `ms`).
    pub(super) fn step(
        &self,
        seq: i32,
        answer: Completion,
        cost: Option<StepCost>,
        ms: i64,
    ) -> Step {
        let summary = if answer.text.trim().is_empty() {
            compaction::empty_summary(self.through)
        } else {
            answer.text
        };
        let mut step = Step::model(seq, summary, Vec::new(), answer.usage, ms);
        step.kind = StepKind::Compaction;
        step.cost = cost;
        step.compacted_through = Some(self.through);
        step
    }

    /// The conversation once `stored`, the compaction's step, is stored: the task, the summary,
    /// the steps kept.
    pub(super) fn after(mut self, task: &str, stored: Step) -> Vec<Message> {
        self.steps.push(stored);
        conversation(task, &in_context(&self.steps))
    }
}

/// The conversation after the first `upto` of a run's stored `steps`, as a resumed run rebuilds
/// it at a compaction step: the task first, then the steps in context.
pub(super) fn resumed(task: &str, steps: &[Step], upto: i32) -> Vec<Message> {
    let end = steps.iter().position(|step| step.seq > upto).unwrap_or(steps.len());
    conversation(task, &in_context(&steps[..end]))
}

/// The task, then each step in `context` as the model is shown it (as the run shows a model
/// step and a tool result when they happen).
fn conversation(task: &str, context: &[&Step]) -> Vec<Message> {
    let mut messages = vec![Message::User(task.to_owned())];
    for step in context {
        let message = match step.kind {
            StepKind::Model => Message::Assistant {
                text: step.output.clone().unwrap_or_default(),
                tool_calls: step
                    .tool_calls
                    .iter()
                    .map(|c| ToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
            },
            StepKind::Tool => {
                let (content, is_error) = step.result_for_model().into_parts();
                let call_id = step.call_id.clone().unwrap_or_default();
                Message::ToolResult { call_id, content, is_error }
            }
            StepKind::Compaction => Message::User(summary_message(
                step.output.as_deref().unwrap_or_default(),
                step.compacted_through.unwrap_or_default(),
            )),
            StepKind::Summary => continue,
        };
        messages.push(message);
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::steps::StepCall;

    fn call(id: &str) -> StepCall {
        StepCall { id: id.into(), name: "memory".into(), arguments: "{}".into() }
    }

    #[test]
    fn the_task_leads_every_conversation_and_the_summary_follows_it() {
        let mut steps = vec![
            Step::model(1, "one".into(), vec![call("a")], None, 0),
            Step::tool(2, &call("a"), Ok("A".into()), 0),
            Step::model(3, "two".into(), vec![call("b")], None, 0),
            Step::tool(4, &call("b"), Err(crate::domain::tool_result::ToolError::refused("no")), 0),
        ];
        let whole = resumed("Task", &steps, 4);
        assert_eq!(whole.len(), 5);
        assert_eq!(whole[0], Message::User("Task".into()));
        let mut compaction = Step::model(5, "Did A.".into(), Vec::new(), None, 0);
        compaction.kind = StepKind::Compaction;
        compaction.compacted_through = Some(2);
        steps.push(compaction);
        let compacted = resumed("Task", &steps, 5);
        assert_eq!(compacted[0], Message::User("Task".into()));
        assert_eq!(compacted[1], Message::User(summary_message("Did A.", 2)));
        assert_eq!(compacted[2..], whole[3..], "the latest call and its result are kept");
        assert_eq!(resumed("Task", &steps, 4), whole, "a compaction applies from its step on");
    }
}
