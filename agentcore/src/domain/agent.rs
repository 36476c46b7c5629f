//! Agents: their identity, configuration and status.

use super::approval::ApprovalTools;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::budget::Budget;

use super::mcp::{McpServerName, McpServerSet};
use super::task::{BacklogSummary, Task};
use super::text;
use super::tools::{MaxSteps, ToolName, ToolSet};

/// An agent's id: a slug chosen by its owner, unique per user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct AgentId(String);

impl AgentId {
    pub const MAX_CHARS: usize = 63;

    /// `^[a-z0-9][a-z0-9_-]{0,62}$`.
    pub fn parse(value: &str) -> Result<Self, String> {
        let mut chars = value.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let rest_ok =
            chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if first_ok && rest_ok && value.len() <= Self::MAX_CHARS {
            Ok(Self(value.to_owned()))
        } else {
            Err("must be 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or digit".into())
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// This id when it is not in `taken`, else the first of `<id>-2`, `<id>-3`, ... that is not;
    /// `Err` when that would be longer than an id may be.
    pub fn first_free(&self, taken: &[String]) -> Result<Self, String> {
        let is_taken = |candidate: &str| taken.iter().any(|t| t == candidate);
        if !is_taken(&self.0) {
            return Ok(self.clone());
        }
        let free = (2..).map(|n| format!("{}-{n}", self.0)).find(|c| !is_taken(c));
        Self::parse(&free.unwrap_or_default())
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where an agent is in its life. The runtime pulls tasks only for `Active` agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    Active,
    Idle,
    Vacation,
    Error,
}

impl AgentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Active => "active",
            AgentStatus::Idle => "idle",
            AgentStatus::Vacation => "vacation",
            AgentStatus::Error => "error",
        }
    }
}

impl fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for AgentStatus {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "active" => Ok(AgentStatus::Active),
            "idle" => Ok(AgentStatus::Idle),
            "vacation" => Ok(AgentStatus::Vacation),
            "error" => Ok(AgentStatus::Error),
            _ => Err("must be one of active, idle, vacation, error".into()),
        }
    }
}

text::text_newtype!(
    /// 1 to 100 characters on one line.
    AgentName,
    |v| text::non_blank_line(v, 100)
);

text::text_newtype!(
    /// The system prompt: 1 to 32,000 characters, line breaks allowed.
    RolePrompt,
    |v| {
        if v.trim().is_empty() {
            return Err("must not be empty".into());
        }
        text::text(v, 1, 32_000)
    }
);

text::text_newtype!(
    /// The chat channel's name: 1 to 100 characters on one line.
    ChannelName,
    |v| text::non_blank_line(v, 100)
);

text::text_newtype!(
    /// An optional grouping: 1 to 100 characters on one line.
    Workspace,
    |v| text::line(v, 1, 100)
);

text::text_newtype!(
    /// `echo`, or `<provider>:<model>` where the provider is a configured one's name (see
    /// [`provider_name`]) and the model is the provider's own name for it. Only the shape is
    /// checked here; whether the provider is configured is checked against the registry.
    ModelName,
    |value| {
        if value == ECHO {
            return Ok(value.to_owned());
        }
        match value.split_once(':') {
            Some((provider, model))
                if provider_name(provider).is_ok()
                    && !model.is_empty()
                    && text::char_len(model) <= 200
                    && !model.chars().any(|c| c.is_control() || c.is_whitespace()) =>
            {
                Ok(value.to_owned())
            }
            _ => Err("must be 'echo' or '<provider>:<model>', such as 'openai:gpt-4o-mini'".into()),
        }
    }
);

/// The offline model's name: no provider, it answers by repeating the task.
pub const ECHO: &str = "echo";

impl ModelName {
    pub fn is_echo(&self) -> bool {
        self.as_str() == ECHO
    }

    /// The provider part: `echo` for `echo`.
    pub fn provider(&self) -> &str {
        self.as_str().split_once(':').map_or(self.as_str(), |(provider, _)| provider)
    }
}

/// A model provider's name, as configured and as written before the `:` of a model name:
/// 1 to 32 lowercase letters, digits and single underscores, starting with a letter; `echo`
/// is taken by the offline model.
pub fn provider_name(name: &str) -> Result<(), String> {
    let shaped = name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.contains("__")
        && !name.ends_with('_');
    match name {
        ECHO => Err("'echo' is the offline model, not a provider".into()),
        _ if shaped => Ok(()),
        _ => Err(format!(
            "'{name}' is not a provider name: 1 to 32 lowercase letters, digits and single \
             underscores, starting with a letter"
        )),
    }
}

/// Seconds to wait between tasks: a finite number from 0 to 86,400.
#[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd)]
pub struct ThrottleSeconds(f64);

impl ThrottleSeconds {
    pub fn parse(value: f64) -> Result<Self, String> {
        if value.is_finite() && (0.0..=86_400.0).contains(&value) {
            Ok(Self(value))
        } else {
            Err("must be a number from 0 to 86400".into())
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

/// What creating an agent needs, already validated.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAgent {
    pub id: AgentId,
    pub name: AgentName,
    pub role_prompt: RolePrompt,
    pub channel: ChannelName,
    pub workspace: Option<Workspace>,
    pub throttle_seconds: ThrottleSeconds,
    pub model: Option<ModelName>,
    pub tools: ToolSet,
    pub max_steps: MaxSteps,
    pub mcp_servers: McpServerSet,
    pub budget: Option<Budget>,
    pub approval_tools: ApprovalTools,
    /// `None`: the server's default chain for its model.
    pub fallback_models: Option<super::fallback::FallbackModels>,
}

/// A partial update: `None` leaves a field as it is. For the nullable fields the inner `None`
/// clears the value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentPatch {
    pub name: Option<AgentName>,
    pub role_prompt: Option<RolePrompt>,
    pub channel: Option<ChannelName>,
    pub workspace: Option<Option<Workspace>>,
    pub status: Option<AgentStatus>,
    pub throttle_seconds: Option<ThrottleSeconds>,
    pub model: Option<Option<ModelName>>,
    pub tools: Option<ToolSet>,
    pub max_steps: Option<MaxSteps>,
    pub mcp_servers: Option<McpServerSet>,
    pub budget: Option<Option<Budget>>,
    pub approval_tools: Option<ApprovalTools>,
    /// The inner `None`: back to the server's default chain.
    pub fallback_models: Option<Option<super::fallback::FallbackModels>>,
}

/// Filters for listing agents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentFilter {
    pub workspace: Option<Workspace>,
    pub status: Option<AgentStatus>,
}

/// An agent as stored, with the counts of its backlog: everything its list entry shows, and
/// its role prompt. Reads of the shared fields go through to the summary (`agent.name`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Agent {
    #[serde(flatten)]
    pub summary: AgentSummary,
    pub role_prompt: String,
    /// The status to restore when vacation ends; only set while on vacation.
    #[serde(skip)]
    pub status_before_vacation: Option<AgentStatus>,
}

/// One agent in a list: everything but the (possibly long) role prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentSummary {
    pub id: AgentId,
    pub name: String,
    pub status: AgentStatus,
    pub channel: String,
    pub throttle_seconds: f64,
    pub workspace: Option<String>,
    pub model: Option<String>,
    /// The built-in tools it may call.
    pub tools: Vec<ToolName>,
    /// Model calls one task may take.
    pub max_steps: i32,
    /// The MCP servers whose tools it may call.
    pub mcp_servers: Vec<McpServerName>,
    /// Its own monthly budget in dollars; `null`: none (its owner's may still apply).
    pub budget_monthly_usd: Option<f64>,
    /// Tools whose calls wait for a person's approval.
    pub approval_tools: Vec<String>,
    /// The models tried, in order, when its model is overloaded or keeps failing; `null`: the
    /// server's chain for its model (`models.fallbacks`); `[]`: none.
    pub fallback_models: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub backlog_summary: BacklogSummary,
}

impl std::ops::Deref for Agent {
    type Target = AgentSummary;

    fn deref(&self) -> &AgentSummary {
        &self.summary
    }
}

impl std::ops::DerefMut for Agent {
    fn deref_mut(&mut self) -> &mut AgentSummary {
        &mut self.summary
    }
}

impl From<Agent> for AgentSummary {
    fn from(agent: Agent) -> Self {
        agent.summary
    }
}

/// The single-agent view: the agent and its whole backlog (or, with a limit, every unfinished
/// task and a page of the finished ones).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentDetail {
    #[serde(flatten)]
    pub agent: Agent,
    /// In progress first, then queued in run order, then finished ones newest first.
    pub backlog: Vec<Task>,
    /// With `?limit=`: pass it as `?cursor=` for the next page of finished tasks; absent on
    /// the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_documented_pattern() {
        for good in ["a", "0", "writer-1", "a_b", &"a".repeat(63)] {
            assert!(AgentId::parse(good).is_ok(), "{good:?} was refused");
        }
        for bad in ["", "-a", "_a", "A", "a b", "a.b", "é", &"a".repeat(64)] {
            assert!(AgentId::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn taken_ids_are_numbered_from_two() {
        let base = AgentId::parse("sales-lead").unwrap();
        let taken = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let free = |ids: &[&str]| base.first_free(&taken(ids)).unwrap().as_str().to_owned();
        assert_eq!(free(&[]), "sales-lead");
        assert_eq!(free(&["sales-lead-2"]), "sales-lead");
        assert_eq!(free(&["sales-lead", "sales-leader"]), "sales-lead-2");
        assert_eq!(free(&["sales-lead", "sales-lead-2", "sales-lead-4"]), "sales-lead-3");
        let long = AgentId::parse(&"a".repeat(63)).unwrap();
        assert!(long.first_free(&taken(&[&"a".repeat(63)])).is_err());
    }

    #[test]
    fn throttle_is_bounded_and_finite() {
        assert!(ThrottleSeconds::parse(0.0).is_ok());
        assert!(ThrottleSeconds::parse(0.5).is_ok());
        assert!(ThrottleSeconds::parse(86_400.0).is_ok());
        assert!(ThrottleSeconds::parse(-1.0).is_err());
        assert!(ThrottleSeconds::parse(86_400.5).is_err());
        assert!(ThrottleSeconds::parse(f64::NAN).is_err());
    }

    #[test]
    fn model_names_name_a_provider() {
        for good in [
            "echo",
            "openai:gpt-4o-mini",
            "anthropic:claude-sonnet-4",
            "openai:llama3.1:8b",
            "local_ollama:qwen2.5",
        ] {
            assert!(ModelName::parse(good).is_ok(), "{good:?} was refused");
        }
        let named = ModelName::parse("openai:llama3.1:8b").unwrap();
        assert_eq!(named.provider(), "openai");
        assert_eq!(ModelName::parse("echo").unwrap().provider(), "echo");
        for bad in [
            "",
            "gpt-4o",
            "openai:",
            "OpenAI:gpt-4o",
            "openai:a b",
            "echo:x",
            "1st:x",
            "a__b:x",
            ":x",
        ] {
            assert!(ModelName::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
