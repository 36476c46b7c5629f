//! Agents: creating, changing and listing them, their status commands and their activity.

use serde::{Deserialize, Serialize};

use crate::domain::activity::ActivityEntry;
use crate::domain::agent::{
    AgentId, AgentName, AgentPatch, AgentStatus, AgentSummary, ChannelName, ModelName, NewAgent,
    RolePrompt, ThrottleSeconds, Workspace,
};
use crate::domain::approval::ApprovalTools;
use crate::domain::budget::Budget;
use crate::domain::fallback::FallbackModels;
use crate::domain::mcp::McpServerSet;
use crate::domain::tools::{MaxSteps, ToolSet};
use crate::error::ValidationErrors;

use super::{nullable, required};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateAgentRequest {
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, pattern = "^[a-z0-9][a-z0-9_-]{0,62}$")
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 100)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 32000)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role_prompt: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 0, maximum = 86400))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle_seconds: Option<f64>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The built-in tools it may call (`GET /api/tools`); `post_message`, `create_task` and
    /// `memory` unless given.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Model calls one task may take; 8 unless given.
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 1, maximum = 50))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<i64>,
    /// The MCP servers whose tools it may call: the operator's or the caller's own
    /// (`GET /api/mcp/servers`); none unless given.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<String>>,
    /// Its own monthly budget in dollars (0 to 1,000,000,000); none unless given.
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 0))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_monthly_usd: Option<f64>,
    /// Tools (built-in names or `<server>__<tool>`) whose calls wait for a person's approval;
    /// none unless given.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_tools: Option<Vec<String>>,
    /// Models tried in order when its model is overloaded or keeps failing: at most 3
    /// `<provider>:<model>` names, not `echo`; `[]`: none; absent or `null`: the server's
    /// chain for its model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_models: Option<Vec<String>>,
}

impl CreateAgentRequest {
    pub fn parse(&self) -> Result<NewAgent, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let id = required(&mut e, "id", &self.id).and_then(|v| e.check("id", AgentId::parse(v)));
        let name =
            required(&mut e, "name", &self.name).and_then(|v| e.check("name", AgentName::parse(v)));
        let role_prompt = required(&mut e, "role_prompt", &self.role_prompt)
            .and_then(|v| e.check("role_prompt", RolePrompt::parse(v)));
        let channel = required(&mut e, "channel", &self.channel)
            .and_then(|v| e.check("channel", ChannelName::parse(v)));
        let workspace =
            self.workspace.as_deref().map(|v| e.check("workspace", Workspace::parse(v)));
        let throttle = e.check(
            "throttle_seconds",
            ThrottleSeconds::parse(self.throttle_seconds.unwrap_or(0.0)),
        );
        let model = self.model.as_deref().map(|v| e.check("model", ModelName::parse(v)));
        let tools = match &self.tools {
            Some(names) => e.check("tools", ToolSet::parse(names)),
            None => Some(ToolSet::default_set()),
        };
        let max_steps = match self.max_steps {
            Some(v) => e.check("max_steps", MaxSteps::parse(v)),
            None => Some(MaxSteps::default()),
        };
        let mcp_servers = match &self.mcp_servers {
            Some(names) => e.check("mcp_servers", McpServerSet::parse(names)),
            None => Some(McpServerSet::default()),
        };
        let budget =
            self.budget_monthly_usd.map(|v| e.check("budget_monthly_usd", Budget::parse(v)));
        let approval_tools = match &self.approval_tools {
            Some(names) => e.check("approval_tools", ApprovalTools::parse(names)),
            None => Some(ApprovalTools::default()),
        };
        let fallback_models = self
            .fallback_models
            .as_ref()
            .map(|v| e.check("fallback_models", FallbackModels::parse(v)));
        match (id, name, role_prompt, channel, throttle, tools, max_steps, mcp_servers) {
            (
                Some(id),
                Some(name),
                Some(role_prompt),
                Some(channel),
                Some(throttle_seconds),
                Some(tools),
                Some(max_steps),
                Some(mcp_servers),
            ) if e.is_empty() => Ok(NewAgent {
                id,
                name,
                role_prompt,
                channel,
                workspace: workspace.flatten(),
                throttle_seconds,
                model: model.flatten(),
                tools,
                max_steps,
                mcp_servers,
                budget: budget.flatten(),
                approval_tools: approval_tools.unwrap_or_default(),
                fallback_models: fallback_models.flatten(),
            }),
            _ => Err(e),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateAgentRequest {
    #[cfg_attr(feature = "openapi", schema(nullable = false, min_length = 1, max_length = 100))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, min_length = 1, max_length = 32000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role_prompt: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Option<String>>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, value_type = Option<crate::domain::agent::AgentStatus>))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 0, maximum = 86400))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle_seconds: Option<f64>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub model: Option<Option<String>>,
    /// Replaces the list of tools it may call; `[]` allows none.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 1, maximum = 50))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<i64>,
    /// Replaces the list of MCP servers it may use; `[]` allows none.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<String>>,
    /// Its own monthly budget in dollars; `null` removes it.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub budget_monthly_usd: Option<Option<f64>>,
    /// Replaces the tools whose calls wait for approval; `[]`: none.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_tools: Option<Vec<String>>,
    /// Replaces its fallback models (at most 3); `[]`: none; `null`: the server's chain.
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub fallback_models: Option<Option<Vec<String>>>,
}

impl UpdateAgentRequest {
    /// Whether the request changes nothing.
    pub fn is_empty(&self) -> bool {
        let Self {
            name,
            role_prompt,
            channel,
            workspace,
            status,
            throttle_seconds,
            model,
            tools,
            max_steps,
            mcp_servers,
            budget_monthly_usd,
            approval_tools,
            fallback_models,
        } = self;
        name.is_none()
            && role_prompt.is_none()
            && channel.is_none()
            && workspace.is_none()
            && status.is_none()
            && throttle_seconds.is_none()
            && model.is_none()
            && tools.is_none()
            && max_steps.is_none()
            && mcp_servers.is_none()
            && budget_monthly_usd.is_none()
            && approval_tools.is_none()
            && fallback_models.is_none()
    }

    pub fn parse(&self) -> Result<AgentPatch, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let patch = AgentPatch {
            name: self.name.as_deref().and_then(|v| e.check("name", AgentName::parse(v))),
            role_prompt: self
                .role_prompt
                .as_deref()
                .and_then(|v| e.check("role_prompt", RolePrompt::parse(v))),
            channel: self
                .channel
                .as_deref()
                .and_then(|v| e.check("channel", ChannelName::parse(v))),
            workspace: self.workspace.as_ref().and_then(|v| match v {
                None => Some(None),
                Some(v) => e.check("workspace", Workspace::parse(v)).map(Some),
            }),
            status: self
                .status
                .as_deref()
                .and_then(|v| e.check("status", v.parse::<AgentStatus>())),
            throttle_seconds: self
                .throttle_seconds
                .and_then(|v| e.check("throttle_seconds", ThrottleSeconds::parse(v))),
            model: self.model.as_ref().and_then(|v| match v {
                None => Some(None),
                Some(v) => e.check("model", ModelName::parse(v)).map(Some),
            }),
            tools: self.tools.as_ref().and_then(|v| e.check("tools", ToolSet::parse(v))),
            max_steps: self.max_steps.and_then(|v| e.check("max_steps", MaxSteps::parse(v))),
            mcp_servers: self
                .mcp_servers
                .as_ref()
                .and_then(|v| e.check("mcp_servers", McpServerSet::parse(v))),
            budget: self.budget_monthly_usd.and_then(|v| match v {
                None => Some(None),
                Some(v) => e.check("budget_monthly_usd", Budget::parse(v)).map(Some),
            }),
            approval_tools: self
                .approval_tools
                .as_ref()
                .and_then(|v| e.check("approval_tools", ApprovalTools::parse(v))),
            fallback_models: self.fallback_models.as_ref().and_then(|v| match v {
                None => Some(None),
                Some(v) => e.check("fallback_models", FallbackModels::parse(v)).map(Some),
            }),
        };
        if e.is_empty() { Ok(patch) } else { Err(e) }
    }
}

/// The optional body of `POST .../vacation`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VacationRequest {
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// `{"agents": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentList {
    pub agents: Vec<AgentSummary>,
}

/// `{"entries": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ActivityList {
    pub entries: Vec<ActivityEntry>,
}

/// `{"status": "started", "agent_id": "..."}` and the like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentStatusResponse {
    pub status: String,
    pub agent_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_field_is_reported_at_once() {
        let request = CreateAgentRequest {
            id: Some("Bad Id".into()),
            name: Some(String::new()),
            throttle_seconds: Some(-1.0),
            model: Some("gpt".into()),
            ..Default::default()
        };
        let errors = request.parse().unwrap_err();
        let fields: Vec<&str> = errors.fields().keys().map(String::as_str).collect();
        assert_eq!(fields, ["channel", "id", "model", "name", "role_prompt", "throttle_seconds"]);
        assert_eq!(errors.fields()["channel"], "is required");
    }

    #[test]
    fn null_clears_and_absence_keeps() {
        let cleared: UpdateAgentRequest = serde_json::from_str(r#"{"model": null}"#).unwrap();
        assert_eq!(cleared.parse().unwrap().model, Some(None));
        let kept: UpdateAgentRequest = serde_json::from_str("{}").unwrap();
        assert_eq!(kept.parse().unwrap(), AgentPatch::default());
    }
}
