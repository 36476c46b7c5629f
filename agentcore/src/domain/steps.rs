//! A task's run as steps: each model call and each tool call, stored as it finishes, and the
//! rules that bound a run (step limit, loop detection, result size) and shape what the model is
//! shown. Pure: the runtime calls the model and the tools, the store keeps the steps.

use std::collections::HashMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::task::{Task, Usage};
use super::tool_result::{ToolError, ToolReply, ToolResult};
use super::tools::ToolName;

/// Tool results longer than this (in bytes) are cut before the model sees them or they are
/// stored.
pub const RESULT_BYTES: usize = 16 * 1024;
/// The same tool with the same arguments this many times in one task stops the run.
pub const IDENTICAL_CALLS: usize = 3;
/// Finished tasks shown to the model for context, and how much of each result.
pub const RECENT_TASKS: usize = 3;
const RECENT_RESULT_CHARS: usize = 300;
const RECENT_RESULT_LINES: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A call to the model: its answer and the tool calls it asked for.
    Model,
    /// One tool call: its arguments and result.
    Tool,
    /// The last model call of a run a limit stopped, without tools: its summary of the work,
    /// with the limit as the error.
    Summary,
    /// A call without tools for a summary of the older steps, which then replaces them in the
    /// conversation (see [`super::compaction`]): the summary, and the last step it covers.
    Compaction,
}

impl StepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Model => "model",
            StepKind::Tool => "tool",
            StepKind::Summary => "summary",
            StepKind::Compaction => "compaction",
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepCall {
    /// The provider's id for the call.
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them (JSON text, possibly malformed).
    pub arguments: String,
}

/// One stored step of a task's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    /// 1, 2, 3... in the order the steps happened.
    pub seq: i32,
    pub kind: StepKind,
    /// Tool steps: the tool called.
    pub tool: Option<String>,
    /// Tool steps: the id of the call this answers.
    pub call_id: Option<String>,
    /// Tool steps: the arguments, as the model sent them.
    pub arguments: Option<String>,
    /// Model steps: the answer's text; tool steps: the result (cut at 16 KB).
    pub output: Option<String>,
    /// Model steps: the tool calls the answer asked for.
    pub tool_calls: Vec<StepCall>,
    /// What went wrong: a tool error (the model was told), or why the run stopped.
    pub error: Option<String>,
    pub duration_ms: i64,
    /// Model steps: tokens, when the provider reports them.
    pub usage: Option<Usage>,
    /// Model steps: the model called and what the call cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<super::budget::StepCost>,
    /// Compaction steps: the last step the summary covers (steps 1 to this one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_through: Option<i32>,
    /// Model steps: the models of the fallback chain tried before the one that answered (named
    /// by `cost.model`), each with its error; absent when the first one answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<super::fallback::Tried>,
    pub created_at: DateTime<Utc>,
}

/// Tokens added up: `None` until some step reports them.
pub fn add_usage(total: Option<Usage>, more: Option<Usage>) -> Option<Usage> {
    match (total, more) {
        (Some(total), Some(more)) => Some(total.plus(more)),
        (total, more) => total.or(more),
    }
}

/// Counts `step`, the next of `task`'s run, on the task: its number and its tokens.
pub fn count_step(task: &mut Task, step: &Step) {
    task.steps = step.seq;
    task.usage = add_usage(task.usage, step.usage);
}

impl Step {
    /// A finished model call.
    pub fn model(
        seq: i32,
        text: String,
        calls: Vec<StepCall>,
        usage: Option<Usage>,
        ms: i64,
    ) -> Self {
        Self {
            seq,
            kind: StepKind::Model,
            tool: None,
            call_id: None,
            arguments: None,
            output: Some(text),
            tool_calls: calls,
            error: None,
            duration_ms: ms,
            usage,
            cost: None,
            compacted_through: None,
            tried: Vec::new(),
            created_at: super::now(),
        }
    }

    /// A finished tool call: its result, or the error the model is told (cut either way).
    pub fn tool(seq: i32, call: &StepCall, result: ToolResult, ms: i64) -> Self {
        let (output, error) = match result {
            Ok(text) => (Some(cut_result(&text)), None),
            Err(error) => (None, Some(cut_result(&error.to_string()))),
        };
        Self {
            seq,
            kind: StepKind::Tool,
            tool: Some(call.name.clone()),
            call_id: Some(call.id.clone()),
            arguments: Some(call.arguments.clone()),
            output,
            tool_calls: Vec::new(),
            error,
            duration_ms: ms,
            usage: None,
            cost: None,
            compacted_through: None,
            tried: Vec::new(),
            created_at: super::now(),
        }
    }

    /// What the model is shown as this tool step's result.
    pub fn result_for_model(&self) -> ToolReply {
        match (&self.output, &self.error) {
            (_, Some(error)) => ToolReply::Error(format!("Error: {error}")),
            (Some(output), None) => ToolReply::Output(output.clone()),
            (None, None) => ToolReply::Output(String::new()),
        }
    }
}

/// What a tool call with an effect changes. The store applies it in the transaction that stores
/// its step, fenced on the task's lease, so the effect and the step happen together or not at
/// all: a crash can never leave one without the other, and a resumed run never repeats it.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// The `memory` tool's write: the whole block replaced, or the text appended on a new line.
    Memory { replace: bool, text: String },
    /// `post_message`: queued for the agent's channel through the outbox.
    Post(super::chat::NewPost),
    /// `create_task`: a task in this agent's backlog or another agent's of the same owner.
    CreateTask { agent: super::agent::AgentId, task: super::task::NewTask },
}

/// Tasks one run may create.
pub const TASKS_PER_RUN: i64 = 10;

/// Why `create_task` is refused before anything is written, from the creating task's depth and
/// how many tasks its run created already.
pub fn refuse_task(depth: i32, created: i64) -> Option<ToolError> {
    if depth >= super::task::MAX_DEPTH {
        return Some(ToolError::refused(format!(
            "this task is at delegation depth {depth}, and tasks may be delegated at most {} \
             levels deep",
            super::task::MAX_DEPTH
        )));
    }
    (created >= TASKS_PER_RUN).then(|| {
        ToolError::refused(format!(
            "one run may create at most {TASKS_PER_RUN} tasks, and this one has"
        ))
    })
}

/// What an effect's tool call answers the model, and the activity it writes: the words of
/// [`Effect`]s, which the store applies in the step's transaction.
pub mod said {
    use super::super::activity::{Action, NewActivity};
    use super::super::agent::AgentId;
    use super::super::task::{Task, TaskId};
    use super::super::tool_result::ToolError;
    use super::super::tools::MEMORY_CHARS;

    /// The `memory` tool's answer once `memory` is saved.
    pub fn memory_saved(memory: &str) -> String {
        format!(
            "Saved. Your memory now holds {} of {MEMORY_CHARS} characters.",
            memory.chars().count()
        )
    }

    /// The activity details of a memory write by the agent's own task.
    pub fn memory_written(task: &TaskId) -> String {
        format!("Memory updated by the agent (task {task}).")
    }

    pub const POSTED: &str = "Posted to your Discord channel.";
    /// `post_message` by an agent without a channel.
    pub fn no_channel() -> ToolError {
        ToolError::refused("this agent has no Discord channel mapped, so nothing was posted")
    }

    /// `create_task` naming an agent the owner does not have.
    pub fn no_such_agent(agent: &str) -> String {
        format!("404 agent_not_found: you have no agent '{agent}'")
    }

    /// The activity entry of a task `by` an agent created.
    pub fn task_created(created: &Task, by: &AgentId) -> NewActivity {
        let details = format!("Task '{}' added by agent '{by}'.", created.title);
        NewActivity::for_task(Action::TaskAdded, created.id.as_str(), details)
    }

    /// `create_task`'s answer: the new task as the model may refer to it.
    pub fn task_queued(created: &Task, agent: &AgentId) -> String {
        serde_json::json!({
            "task_id": created.id,
            "agent_id": agent,
            "status": "queued",
            "depth": created.depth,
        })
        .to_string()
    }
}

/// `text` within [`RESULT_BYTES`], cut on a character boundary with a marker saying so.
pub fn cut_result(text: &str) -> String {
    if text.len() <= RESULT_BYTES {
        return text.to_owned();
    }
    let mut end = RESULT_BYTES - 120;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[cut: the result was {} bytes; only the first {end} are shown]",
        &text[..end],
        text.len()
    )
}

/// Why a run stopped before the model finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    MaxSteps(i32),
    Timeout(u64),
    LoopDetected,
}

impl Stop {
    /// The word that starts the task's `error`.
    pub fn code(self) -> &'static str {
        match self {
            Stop::MaxSteps(_) => "max_steps",
            Stop::Timeout(_) => "timeout",
            Stop::LoopDetected => "loop_detected",
        }
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::MaxSteps(n) => {
                write!(f, "max_steps: the task used its {n} model calls without finishing")
            }
            Stop::Timeout(s) => write!(f, "timeout: the task ran longer than {s} seconds"),
            Stop::LoopDetected => write!(
                f,
                "loop_detected: the same tool was called with the same arguments \
                 {IDENTICAL_CALLS} times"
            ),
        }
    }
}

/// The last message of a stopped run: the model is asked, without tools, what it did.
pub fn summary_request(stop: Stop) -> String {
    format!(
        "The run was stopped ({stop}). Do not call any tools. In a few sentences, summarise \
         what you did for this task, what you found, and what is left to do."
    )
}

/// Counts identical calls (same tool, same arguments as JSON values) within one task.
#[derive(Debug, Default)]
pub struct LoopGuard {
    seen: HashMap<(String, String), usize>,
}

impl LoopGuard {
    /// Counts `call`; `true` when this is the call that makes [`IDENTICAL_CALLS`].
    pub fn repeats(&mut self, call: &StepCall) -> bool {
        let count = self.seen.entry((call.name.clone(), canonical(&call.arguments))).or_default();
        *count += 1;
        *count >= IDENTICAL_CALLS
    }
}

/// Arguments compared as JSON values (key order and spacing do not matter), or as text when
/// they are not JSON.
fn canonical(arguments: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .map(|value| value.to_string())
        .unwrap_or_else(|_| arguments.trim().to_owned())
}

/// A finished task shown for context: its title and the first lines of its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentTask {
    pub title: String,
    pub result: String,
}

/// The system prompt of a run: the role prompt, then short guidance on the tools offered
/// (built-in ones and MCP servers'), then the memory block, then the MCP servers that could
/// not be reached, then the last finished tasks for context.
pub fn system_prompt(
    role_prompt: &str,
    memory: &str,
    tools: &[&str],
    unavailable: &[String],
    recent: &[RecentTask],
) -> String {
    // What stays the same from task to task comes first (the role, the tools), what changes
    // after (memory, problems, recent tasks): the longest prefix a provider's prompt cache
    // can reuse across an agent's runs. Nothing here changes within a run.
    let mut prompt = role_prompt.trim_end().to_owned();
    if !tools.is_empty() {
        let names = tools;
        prompt.push_str(&format!(
            "\n\n## Tools\nYou can call these tools: {}. Call a tool when it helps the task; \
             when the task is done, answer with your result as plain text and no tool call. \
             A tool error is a result to read, not a reason to repeat the same call.",
            names.join(", ")
        ));
        if tools.contains(&ToolName::Memory.as_str()) {
            prompt.push_str(
                " Use `memory` to keep facts you will need in later tasks; it is shown to you \
                 at the start of every task.",
            );
        }
    }
    if !memory.trim().is_empty() {
        prompt.push_str("\n\n## Your memory\n");
        prompt.push_str(memory.trim_end());
    }
    if !unavailable.is_empty() {
        prompt.push_str("\n\n## Tools you cannot use now\n");
        for problem in unavailable {
            prompt.push_str(&format!("- {problem}\n"));
        }
        prompt.truncate(prompt.trim_end().len());
    }
    if !recent.is_empty() {
        prompt.push_str("\n\n## Your last finished tasks\n");
        for task in recent {
            prompt.push_str(&format!("- {}: {}\n", task.title, excerpt(&task.result)));
        }
        prompt.truncate(prompt.trim_end().len());
    }
    prompt
}

/// The first lines of a result, bounded, on one line.
fn excerpt(result: &str) -> String {
    let lines: Vec<&str> =
        result.lines().map(str::trim).filter(|l| !l.is_empty()).take(RECENT_RESULT_LINES).collect();
    super::runtime::cut(&lines.join(" / "), RECENT_RESULT_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> StepCall {
        StepCall { id: "c".into(), name: name.into(), arguments: arguments.into() }
    }

    #[test]
    fn usage_adds_up_and_stays_unknown_until_reported() {
        let tokens = |input, output| Some(Usage::new(input, output));
        assert_eq!(add_usage(None, None), None);
        assert_eq!(add_usage(None, tokens(3, 4)), tokens(3, 4));
        assert_eq!(add_usage(tokens(3, 4), None), tokens(3, 4));
        assert_eq!(add_usage(tokens(3, 4), tokens(10, 20)), tokens(13, 24));
        let cached = Usage { cache_read_tokens: 5, cache_write_tokens: 7, ..Usage::new(1, 2) };
        let twice = add_usage(Some(cached), Some(cached)).unwrap();
        assert_eq!((twice.cache_read_tokens, twice.cache_write_tokens), (10, 14));
    }

    #[test]
    fn the_third_identical_call_is_a_loop_whatever_the_key_order() {
        let mut guard = LoopGuard::default();
        assert!(!guard.repeats(&call("memory", r#"{"action":"read"}"#)));
        assert!(!guard.repeats(&call("memory", r#"{"action":"append","text":"a"}"#)));
        assert!(!guard.repeats(&call("memory", r#"{ "action": "read" }"#)));
        assert!(!guard.repeats(&call("http_fetch", r#"{"action":"read"}"#)));
        assert!(guard.repeats(&call("memory", r#"{"action" : "read"}"#)));
    }

    #[test]
    fn long_results_are_cut_with_a_marker_on_a_character_boundary() {
        assert_eq!(cut_result("short"), "short");
        let long = "é".repeat(RESULT_BYTES);
        let cut = cut_result(&long);
        assert!(cut.len() <= RESULT_BYTES, "{}", cut.len());
        assert!(cut.contains(&format!("[cut: the result was {} bytes", long.len())), "{cut}");
    }

    #[test]
    fn the_system_prompt_holds_role_tools_memory_and_recent_tasks_in_that_order() {
        let recent = [RecentTask { title: "Plan".into(), result: "Line 1\n\nLine 2".into() }];
        let down = ["MCP server 'files': timed out".to_owned()];
        let tools = ["memory", "calc__add"];
        let prompt =
            system_prompt("You write.", "Release day is Thursday.", &tools, &down, &recent);
        let at = |s: &str| prompt.find(s).unwrap();
        // The parts that change from task to task come after those that do not.
        assert!(at("You write.") < at("## Tools") && at("calc__add") < at("Release day"));
        assert!(at("Release day") < at("## Tools you cannot"));
        assert!(at("- MCP server 'files'") < at("- Plan: Line 1 / Line 2"));
        assert!(prompt.contains("Use `memory`"));
        assert_eq!(system_prompt("You write.", "", &[], &[], &[]), "You write.");
    }

    #[test]
    fn stops_name_their_limit_first() {
        assert!(Stop::MaxSteps(8).to_string().starts_with("max_steps: "));
        assert!(Stop::Timeout(600).to_string().starts_with("timeout: "));
        assert!(Stop::LoopDetected.to_string().starts_with("loop_detected: "));
    }
}
