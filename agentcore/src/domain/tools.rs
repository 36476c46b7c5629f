//! What an agent may do while it works: which built-in tools it may call, how many model calls
//! a task may take, and its memory block. Values parsed once, like every field of an agent.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::text;

/// A built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ToolName {
    HttpFetch,
    PostMessage,
    CreateTask,
    Memory,
    ReadChannel,
}

impl ToolName {
    /// Every built-in tool, in the order `GET /api/tools` lists them.
    pub const ALL: [ToolName; 5] = [
        ToolName::HttpFetch,
        ToolName::PostMessage,
        ToolName::CreateTask,
        ToolName::Memory,
        ToolName::ReadChannel,
    ];

    /// What an agent may call when it was created without a `tools` list.
    pub const DEFAULT: [ToolName; 3] =
        [ToolName::PostMessage, ToolName::CreateTask, ToolName::Memory];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::HttpFetch => "http_fetch",
            ToolName::PostMessage => "post_message",
            ToolName::CreateTask => "create_task",
            ToolName::Memory => "memory",
            ToolName::ReadChannel => "read_channel",
        }
    }

    /// Whether calling it changes something the next step or a person can observe: such calls
    /// are written in the same transaction as their step, so they happen exactly once.
    pub fn has_effect(self) -> bool {
        matches!(self, ToolName::PostMessage | ToolName::CreateTask | ToolName::Memory)
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for ToolName {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        ToolName::ALL
            .into_iter()
            .find(|tool| tool.as_str() == value)
            .ok_or_else(|| format!("unknown tool '{value}'"))
    }
}

/// A built-in tool as the model is shown it, and as `GET /api/tools` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolInfo {
    pub name: ToolName,
    pub description: String,
    /// JSON Schema of the call's arguments.
    pub parameters: serde_json::Value,
    /// Whether a call changes something (applied exactly once, with its step).
    pub effect: bool,
}

/// The tools an agent may call: known names, each once, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSet(Vec<ToolName>);

impl ToolSet {
    /// Refuses unknown names, naming every one of them and the names that exist.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let mut tools = Vec::new();
        let mut unknown = Vec::new();
        for name in names {
            match name.as_ref().parse::<ToolName>() {
                Ok(tool) if !tools.contains(&tool) => tools.push(tool),
                Ok(_) => {}
                Err(_) => unknown.push(format!("'{}'", name.as_ref())),
            }
        }
        if unknown.is_empty() {
            return Ok(Self(tools));
        }
        let known: Vec<&str> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
        Err(format!(
            "unknown tool{} {}; the tools are {}",
            if unknown.len() == 1 { "" } else { "s" },
            unknown.join(", "),
            known.join(", ")
        ))
    }

    pub fn default_set() -> Self {
        Self(ToolName::DEFAULT.to_vec())
    }

    pub fn tools(&self) -> &[ToolName] {
        &self.0
    }

    /// As stored: a JSON array of names.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "[]".into())
    }

    /// Reads the stored form; a name this build no longer knows is dropped.
    pub fn from_json(stored: &str) -> Self {
        let names: Vec<String> = serde_json::from_str(stored).unwrap_or_default();
        Self(names.iter().filter_map(|n| n.parse().ok()).collect())
    }
}

/// Model calls one task may take: 1 to 50, 8 unless set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxSteps(i32);

impl MaxSteps {
    pub const DEFAULT: i32 = 8;
    pub const MAX: i32 = 50;

    pub fn parse(value: i64) -> Result<Self, String> {
        match i32::try_from(value) {
            Ok(v) if (1..=Self::MAX).contains(&v) => Ok(Self(v)),
            _ => Err(format!("must be an integer from 1 to {}", Self::MAX)),
        }
    }

    pub fn get(self) -> i32 {
        self.0
    }
}

impl Default for MaxSteps {
    fn default() -> Self {
        Self(Self::DEFAULT)
    }
}

/// The longest memory block, in characters.
pub const MEMORY_CHARS: usize = 8_000;

text::text_newtype!(
    /// An agent's memory block: up to 8,000 characters, line breaks allowed; empty when it
    /// remembers nothing.
    MemoryText,
    |v| text::text(v, 0, MEMORY_CHARS)
);

/// An agent's memory, as `GET /api/agents/{id}/memory` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Memory {
    pub agent_id: super::agent::AgentId,
    pub memory: String,
    /// Characters used, of `limit`.
    pub chars: usize,
    pub limit: usize,
}

impl Memory {
    pub fn new(agent_id: super::agent::AgentId, memory: String) -> Self {
        let chars = text::char_len(&memory);
        Self { agent_id, memory, chars, limit: MEMORY_CHARS }
    }
}

/// What the `memory` tool does to the block, decided from its current text: the new text, or
/// the error the model is told.
pub fn write_memory(current: &str, replace: bool, text: &str) -> Result<String, String> {
    let next =
        if replace || current.is_empty() { text.to_owned() } else { format!("{current}\n{text}") };
    let chars = text::char_len(&next);
    if chars > MEMORY_CHARS {
        return Err(format!(
            "memory is limited to {MEMORY_CHARS} characters; this write would make it {chars} \
             (it holds {} now). Replace it with a shorter version instead.",
            text::char_len(current)
        ));
    }
    if next.contains('\0') {
        return Err("memory must not contain NUL characters".into());
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tools_are_all_named() {
        assert_eq!(
            ToolSet::parse(&["memory", "http_fetch", "memory"]).unwrap().tools(),
            [ToolName::Memory, ToolName::HttpFetch]
        );
        let error = ToolSet::parse(&["memory", "shell", "sudo"]).unwrap_err();
        assert!(error.starts_with("unknown tools 'shell', 'sudo'; the tools are http_fetch"));
        assert!(ToolSet::parse::<&str>(&[]).unwrap().tools().is_empty());
        let set = ToolSet::default_set();
        assert_eq!(ToolSet::from_json(&set.to_json()), set);
    }

    #[test]
    fn max_steps_is_bounded() {
        assert_eq!(MaxSteps::default().get(), 8);
        assert!(MaxSteps::parse(1).is_ok() && MaxSteps::parse(50).is_ok());
        assert!(MaxSteps::parse(0).is_err() && MaxSteps::parse(51).is_err());
        assert!(MaxSteps::parse(i64::MAX).is_err());
    }

    #[test]
    fn memory_writes_stay_within_the_limit() {
        assert_eq!(write_memory("", false, "a").unwrap(), "a");
        assert_eq!(write_memory("a", false, "b").unwrap(), "a\nb");
        assert_eq!(write_memory("a", true, "b").unwrap(), "b");
        let full = "x".repeat(MEMORY_CHARS);
        let error = write_memory(&full, false, "y").unwrap_err();
        assert!(error.contains("8000 characters") && error.contains("8002"), "{error}");
        assert!(write_memory(&full, true, "short").is_ok());
    }
}
