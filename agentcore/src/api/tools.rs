//! Tools, memory and steps: what agents act with, and the record of what they did.

use serde::{Deserialize, Serialize};

use crate::domain::mcp::McpServerTools;
use crate::domain::steps::Step;
use crate::domain::tools::{MEMORY_CHARS, MemoryText, ToolInfo};
use crate::error::ValidationErrors;

use super::required;

/// `{"tools": [...], "mcp_servers": [...]}`: every built-in tool, and the tools of each MCP
/// server the caller's agents may use (or why they could not be listed).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolList {
    pub tools: Vec<ToolInfo>,
    #[serde(default)]
    pub mcp_servers: Vec<McpServerTools>,
}

/// `{"steps": [...]}`: a task's run, oldest step first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepList {
    pub steps: Vec<Step>,
}

/// The body of `PUT /api/agents/{id}/memory`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetMemoryRequest {
    /// The whole block; `""` clears it.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false, max_length = 8000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

impl SetMemoryRequest {
    pub fn parse(&self) -> Result<MemoryText, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let memory = required(&mut e, "memory", &self.memory)
            .and_then(|v| e.check("memory", MemoryText::parse(v)));
        match memory {
            Some(memory) if e.is_empty() => Ok(memory),
            _ => Err(e),
        }
    }
}

const _: () = assert!(MEMORY_CHARS == 8000, "the OpenAPI max_length above says 8000");
