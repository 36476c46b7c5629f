//! Triggers: the bodies of `POST /api/triggers` and `PATCH /api/triggers/{id}`, and the list.

use serde::{Deserialize, Serialize};

use crate::domain::agent::AgentId;
use crate::domain::task::Priority;
use crate::domain::trigger::{
    NewTrigger, Trigger, TriggerName, TriggerPatch, description_template, title_template,
};
use crate::error::ValidationErrors;

use super::{nullable, required};

/// The body of `POST /api/triggers`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateTriggerRequest {
    /// The agent whose backlog its calls add to.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false, max_length = 64))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// What it is for, for people (`""` when absent).
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 100))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The title of each task, with `{{field.path}}` placeholders filled from the call's body.
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 200)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The description of each task, with placeholders.
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 20000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = -2147483648, maximum = 2147483647))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// `true` when absent.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl CreateTriggerRequest {
    pub fn parse(&self) -> Result<NewTrigger, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let agent = required(&mut e, "agent", &self.agent)
            .and_then(|v| e.check("agent", AgentId::parse(v)));
        let name = e.check("name", TriggerName::parse(self.name.as_deref().unwrap_or("")));
        let title = required(&mut e, "title", &self.title)
            .and_then(|v| e.check("title", title_template(v)));
        let description = match self.description.as_deref() {
            None | Some("") => Some(None),
            Some(v) => e.check("description", description_template(v)).map(Some),
        };
        let priority = e.check("priority", Priority::parse(self.priority.unwrap_or(0)));
        match (agent, name, title, description, priority) {
            (Some(agent_id), Some(name), Some(title), Some(description), Some(priority))
                if e.is_empty() =>
            {
                Ok(NewTrigger {
                    agent_id,
                    name,
                    title,
                    description,
                    priority,
                    enabled: self.enabled.unwrap_or(true),
                })
            }
            _ => Err(e),
        }
    }
}

/// The body of `PATCH /api/triggers/{id}`: any of the fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateTriggerRequest {
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 100))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, min_length = 1, max_length = 200))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `null` or `""` clears it.
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = -2147483648, maximum = 2147483647))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl UpdateTriggerRequest {
    pub fn parse(&self) -> Result<TriggerPatch, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let patch = TriggerPatch {
            name: self.name.as_deref().and_then(|v| e.check("name", TriggerName::parse(v))),
            title: self.title.as_deref().and_then(|v| e.check("title", title_template(v))),
            description: self.description.as_ref().and_then(|v| match v.as_deref() {
                None | Some("") => Some(None),
                Some(v) => e.check("description", description_template(v)).map(Some),
            }),
            priority: self.priority.and_then(|v| e.check("priority", Priority::parse(v))),
            enabled: self.enabled,
        };
        if e.is_empty() { Ok(patch) } else { Err(e) }
    }
}

/// `{"triggers": [...]}`: all of them (a workspace has at most 100).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerList {
    pub triggers: Vec<Trigger>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_field_is_named() {
        let request = CreateTriggerRequest {
            agent: None,
            name: Some("two\nlines".into()),
            title: Some("{{unclosed".into()),
            description: Some("{{ }}".into()),
            priority: Some(i64::MAX),
            enabled: None,
        };
        let errors = request.parse().unwrap_err();
        let fields: Vec<&str> = errors.fields().keys().map(String::as_str).collect();
        assert_eq!(fields, ["agent", "description", "name", "priority", "title"]);
    }
}
