//! Long runs: when a run's conversation nears its model's context window, the older steps are
//! compacted into a summary the model writes, stored as a step of kind `compaction`. Pure: which
//! steps a conversation holds, where a compaction may cut, and the words around a summary; the
//! runtime asks the model and stores the step (`workers/runtime/compact.rs`).
//!
//! A run's conversation is always its task (the first user message, never compacted), then the
//! summary of its latest compaction (if any), then the steps after the last one that summary
//! covers. A compaction cuts just before the latest model step, so that step and its tool
//! results are always kept, and a tool call and its result are never split: providers refuse a
//! result whose call is missing.

use super::steps::{Step, StepKind};

/// A conversation whose input tokens plus its answer's bound pass this share of the model's
/// window is compacted before it is sent: the rest is room for the steps to come (a tool
/// result is up to 16 KB) and for the error of a token bound.
pub const WINDOW_SHARE_PERCENT: usize = 75;

/// The window of a model `models.context_windows` does not name: small enough for the local
/// models people run (Llama 3.1 and Qwen 2.5 at their usual settings hold 32k), so a run on one
/// is compacted before the server refuses it; a larger window is one line of configuration.
pub const UNKNOWN_WINDOW: u32 = 32_000;

/// The bounds of a configured window, in tokens.
pub const MIN_WINDOW: u32 = 1_000;
pub const MAX_WINDOW: u32 = 10_000_000;

/// The windows of a few well-known models, in tokens, as the defaults of
/// `models.context_windows`.
pub const KNOWN_WINDOWS: [(&str, u32); 8] = [
    ("openai:gpt-4o", 128_000),
    ("openai:gpt-4o-mini", 128_000),
    ("openai:gpt-4.1", 1_047_576),
    ("openai:gpt-4.1-mini", 1_047_576),
    ("anthropic:claude-sonnet-4-5", 200_000),
    ("anthropic:claude-haiku-4-5", 200_000),
    ("anthropic:claude-opus-4-1", 200_000),
    ("anthropic:claude-sonnet-4", 200_000),
];

/// Whether a call of `needed` tokens (input bound plus the answer's bound) crowds `window`.
pub fn crowded(needed: usize, window: u32) -> bool {
    let window = usize::try_from(window).unwrap_or(usize::MAX);
    needed.saturating_mul(100) > window.saturating_mul(WINDOW_SHARE_PERCENT)
}

/// The steps the conversation holds after its task once `steps` (a run's stored steps, in
/// order) are done: the latest compaction, then the model and tool steps after the last step it
/// covers. Without a compaction: every model and tool step.
pub fn in_context(steps: &[Step]) -> Vec<&Step> {
    let latest = steps.iter().rev().find(|step| step.kind == StepKind::Compaction);
    let after = latest.and_then(|step| step.compacted_through).unwrap_or(0);
    let kept = steps
        .iter()
        .filter(|step| step.seq > after)
        .filter(|step| matches!(step.kind, StepKind::Model | StepKind::Tool));
    latest.into_iter().chain(kept).collect()
}

/// Where a compaction of `context` (as [`in_context`] gives it) cuts: the position of the first
/// step kept, a model step; the steps before it are summarised, and the summary covers the steps
/// numbered up to one less than it. It cuts just before the latest model step none of whose
/// kept results answers a compacted call, so that step and its results stay; `None` when
/// nothing but an earlier summary lies before it (a compaction would only summarise the
/// summary).
pub fn cut(context: &[&Step]) -> Option<usize> {
    let models = context.iter().enumerate().filter(|(_, step)| step.kind == StepKind::Model);
    for (at, _) in models.collect::<Vec<_>>().into_iter().rev() {
        let (before, kept) = context.split_at(at);
        let asked = |id: &String| {
            before.iter().any(|step| step.tool_calls.iter().any(|call| &call.id == id))
        };
        let split = kept.iter().any(|step| step.call_id.as_ref().is_some_and(asked));
        let work = before.iter().any(|step| step.kind != StepKind::Compaction);
        if !split && work {
            return Some(at);
        }
        if !work {
            return None;
        }
    }
    None
}

/// The message that asks the model, without tools, for the summary of the conversation so far.
pub fn summary_request() -> String {
    "The conversation is getting too long for your context window, so its older part will be \
     replaced by your summary of it. Do not call any tools. Summarise the work on this task so \
     far: what you did, every fact, number, name and result you will still need, what failed, \
     and what is left to do. Write it for yourself: only your summary and the latest steps will \
     remain."
        .to_owned()
}

/// How the conversation shows a compaction's summary, right after the task.
pub fn summary_message(summary: &str, through: i32) -> String {
    format!("Summary of your earlier work on this task (steps 1 to {through}):\n\n{summary}")
}

/// A summary the model left empty.
pub fn empty_summary(through: i32) -> String {
    format!("(The model gave no summary of steps 1 to {through}.)")
}

/// Why a run stops when even its shortest conversation (the task, the latest summary and the
/// latest step with its results) does not fit its model's window.
pub fn too_long(needed: usize, window: u32) -> String {
    format!(
        "context_window: the next model call needs up to {needed} tokens (the task, the summary \
         of earlier steps and the latest tool results, plus the answer's bound), more than the \
         model's window of {window}; nothing older is left to compact"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::steps::StepCall;

    fn model(seq: i32, calls: &[&str]) -> Step {
        let calls = calls
            .iter()
            .map(|id| StepCall { id: (*id).into(), name: "memory".into(), arguments: "{}".into() })
            .collect();
        Step::model(seq, String::new(), calls, None, 0)
    }

    fn tool(seq: i32, call: &str) -> Step {
        let call = StepCall { id: call.into(), name: "memory".into(), arguments: "{}".into() };
        Step::tool(seq, &call, Ok("ok".into()), 0)
    }

    fn compaction(seq: i32, through: i32) -> Step {
        let mut step = Step::model(seq, "summary".into(), Vec::new(), None, 0);
        step.kind = StepKind::Compaction;
        step.compacted_through = Some(through);
        step
    }

    fn seqs(steps: &[&Step]) -> Vec<i32> {
        steps.iter().map(|step| step.seq).collect()
    }

    /// The last step a compaction of `steps` covers.
    fn through(steps: &[Step]) -> Option<i32> {
        let context = in_context(steps);
        cut(&context).map(|at| context[at].seq - 1)
    }

    #[test]
    fn a_call_crowds_the_window_past_three_quarters() {
        assert!(!crowded(3_000, 4_000));
        assert!(crowded(3_001, 4_000));
        assert!(crowded(usize::MAX, MAX_WINDOW));
    }

    #[test]
    fn the_compaction_keeps_the_latest_model_step_and_its_results() {
        let steps =
            [model(1, &["a"]), tool(2, "a"), model(3, &["b", "c"]), tool(4, "b"), tool(5, "c")];
        let context = in_context(&steps);
        assert_eq!(seqs(&context), [1, 2, 3, 4, 5]);
        assert_eq!(through(&steps), Some(2), "steps 3 to 5 stay");
    }

    #[test]
    fn nothing_is_compacted_before_the_first_model_step_has_anything_before_it() {
        let steps = [model(1, &["a", "b"]), tool(2, "a"), tool(3, "b")];
        assert_eq!(through(&steps), None, "the latest results are never compacted");
        assert_eq!(cut(&[]), None, "the task alone is never compacted");
    }

    #[test]
    fn a_later_compaction_covers_the_earlier_summary_and_the_steps_it_kept() {
        let steps = [
            model(1, &["a"]),
            tool(2, "a"),
            model(3, &["b"]),
            tool(4, "b"),
            compaction(5, 2),
            model(6, &["c"]),
            tool(7, "c"),
        ];
        let context = in_context(&steps);
        assert_eq!(seqs(&context), [5, 3, 4, 6, 7], "the summary first, then what it kept");
        assert_eq!(through(&steps), Some(5));
        let mut later = steps.to_vec();
        later.push(compaction(8, 5));
        assert_eq!(seqs(&in_context(&later)), [8, 6, 7]);
        assert_eq!(through(&later), None, "only the summary lies before step 6");
    }

    #[test]
    fn a_call_and_its_result_are_never_split() {
        // Step 3's call `a` is answered after step 4 asked for more: cutting before step 4
        // would keep a result whose call is gone, so the cut moves back before step 3.
        let steps = [
            model(1, &["x"]),
            tool(2, "x"),
            model(3, &["a"]),
            model(4, &["b"]),
            tool(5, "a"),
            tool(6, "b"),
        ];
        assert_eq!(through(&steps), Some(2));
        let steps = [model(1, &["a"]), model(2, &["b"]), tool(3, "a"), tool(4, "b")];
        assert_eq!(through(&steps), None);
    }

    #[test]
    fn the_summary_says_what_it_covers() {
        assert!(summary_message("Did A.", 12).starts_with("Summary of your earlier work"));
        assert!(summary_message("Did A.", 12).contains("steps 1 to 12"));
        assert!(too_long(5_000, 4_000).starts_with("context_window: "));
    }
}
