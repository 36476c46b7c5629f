//! The backlog: adding, changing and listing tasks.

use serde::{Deserialize, Serialize};

use crate::domain::task::{NewTask, Priority, Task, TaskDescription, TaskPatch, TaskTitle};
use crate::error::ValidationErrors;

use super::{nullable, required};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateTaskRequest {
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 200)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 20000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = -2147483648, maximum = 2147483647))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
}

impl CreateTaskRequest {
    pub fn parse(&self) -> Result<NewTask, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let title = required(&mut e, "title", &self.title)
            .and_then(|v| e.check("title", TaskTitle::parse(v)));
        let description =
            self.description.as_deref().map(|v| e.check("description", TaskDescription::parse(v)));
        let priority = e.check("priority", Priority::parse(self.priority.unwrap_or(0)));
        match (title, priority) {
            (Some(title), Some(priority)) if e.is_empty() => Ok(NewTask {
                title,
                description: description.flatten().filter(|d| !d.as_str().is_empty()),
                priority,
            }),
            _ => Err(e),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateTaskRequest {
    #[cfg_attr(feature = "openapi", schema(nullable = false, min_length = 1, max_length = 200))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = -2147483648, maximum = 2147483647))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
}

impl UpdateTaskRequest {
    /// Whether the request changes nothing.
    pub fn is_empty(&self) -> bool {
        let Self { title, description, priority } = self;
        title.is_none() && description.is_none() && priority.is_none()
    }

    pub fn parse(&self) -> Result<TaskPatch, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let patch = TaskPatch {
            title: self.title.as_deref().and_then(|v| e.check("title", TaskTitle::parse(v))),
            description: self.description.as_ref().and_then(|v| match v.as_deref() {
                None | Some("") => Some(None),
                Some(v) => e.check("description", TaskDescription::parse(v)).map(Some),
            }),
            priority: self.priority.and_then(|v| e.check("priority", Priority::parse(v))),
        };
        if e.is_empty() { Ok(patch) } else { Err(e) }
    }
}

/// `{"tasks": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskList {
    pub tasks: Vec<Task>,
    /// With `?limit=`: pass it as `?cursor=` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `{"status": "approved" | "denied", "approval": {...}}`: a decided tool approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalDecided {
    pub status: String,
    pub approval: crate::domain::approval::Approval,
}
