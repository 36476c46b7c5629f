//! What a tool call gives back: its output for the model, or the error the model is told, as
//! a value whose kind is known (to the runtime, its metrics and its tests) and whose words
//! (what the model reads, what the step stores) are written here once.

use std::fmt;

use super::steps::Stop;

/// A tool call's output, or why it has none.
pub type ToolResult = Result<String, ToolError>;

/// Why a tool call gave the model an error instead of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolError {
    /// The arguments are not what the tool's schema asks for; nothing ran.
    InvalidArguments(String),
    /// The call is not allowed (a tool not enabled, a limit, a person's denial); nothing ran.
    Refused(String),
    /// No tool of that name is offered to the agent.
    Unknown(String),
    /// A person denied the call (`by` them), or nobody approved it in time; it did not run.
    Denied { by: Option<String> },
    /// The run stopped before the call could run.
    NotRun(Stop),
    /// The task's time ran out while the call ran.
    TimedOut,
    /// The tool ran and failed, in its own words (a server's error, a fetch's refusal...).
    Failed(String),
}

impl ToolError {
    pub fn invalid_arguments(detail: impl Into<String>) -> Self {
        Self::InvalidArguments(detail.into())
    }

    pub fn refused(detail: impl Into<String>) -> Self {
        Self::Refused(detail.into())
    }

    pub fn failed(detail: impl Into<String>) -> Self {
        Self::Failed(detail.into())
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolError::InvalidArguments(detail) => write!(f, "invalid arguments: {detail}"),
            ToolError::Refused(detail) => write!(f, "refused: {detail}"),
            ToolError::Unknown(name) => write!(f, "unknown tool '{name}'"),
            ToolError::Denied { by: Some(who) } => {
                write!(f, "denied by {who}: this call was not run")
            }
            ToolError::Denied { by: None } => {
                f.write_str("denied: nobody approved this call in time, so it was not run")
            }
            ToolError::NotRun(stop) => write!(f, "not run: {stop}"),
            ToolError::TimedOut => f.write_str("timed out: the task's time ran out"),
            ToolError::Failed(words) => f.write_str(words),
        }
    }
}

impl std::error::Error for ToolError {}

/// A tool step's result as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolReply {
    Output(String),
    /// The error, as the model is shown it (`Error: …`).
    Error(String),
}

impl ToolReply {
    /// The text, and whether it is an error (the providers' `is_error`).
    pub fn into_parts(self) -> (String, bool) {
        match self {
            ToolReply::Output(text) => (text, false),
            ToolReply::Error(text) => (text, true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_reads_as_the_model_was_always_told_it() {
        let cases = [
            (
                ToolError::invalid_arguments("limit must be from 1 to 50"),
                "invalid arguments: limit must be from 1 to 50",
            ),
            (
                ToolError::refused("the tool 'memory' is not enabled for this agent"),
                "refused: the tool 'memory' is not enabled for this agent",
            ),
            (ToolError::Unknown("web_search".into()), "unknown tool 'web_search'"),
            (
                ToolError::NotRun(Stop::MaxSteps(3)),
                "not run: max_steps: the task used its 3 model calls without finishing",
            ),
            (
                ToolError::Denied { by: Some("ana (Discord)".into()) },
                "denied by ana (Discord): this call was not run",
            ),
            (
                ToolError::Denied { by: None },
                "denied: nobody approved this call in time, so it was not run",
            ),
            (ToolError::TimedOut, "timed out: the task's time ran out"),
            (
                ToolError::failed("the server refused the call: no"),
                "the server refused the call: no",
            ),
        ];
        for (error, words) in cases {
            assert_eq!(error.to_string(), words);
        }
    }
}
