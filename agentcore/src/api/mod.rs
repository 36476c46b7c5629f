//! The wire format of the HTTP API: request bodies as clients send them, and the response
//! envelopes. Requests keep every field optional so that one pass can report every problem;
//! `parse` turns them into domain inputs or a [`ValidationErrors`] naming each bad field.
//!
//! One module per area of the API; everything is re-exported here, so a type is
//! `agentcore::api::<Type>` whichever area it belongs to.

mod accounts;
mod agents;
mod backlog;
mod budget;
mod chat;
mod mcp;
mod models;
mod onboarding;
mod schedules;
mod tools;
mod triggers;
mod webhooks;
mod workspaces;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::ValidationErrors;

pub use accounts::*;
pub use agents::*;
pub use backlog::*;
pub use budget::*;
pub use chat::*;
pub use mcp::*;
pub use models::*;
pub use onboarding::*;
pub use schedules::*;
pub use tools::*;
pub use triggers::*;
pub use webhooks::*;
pub use workspaces::*;

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
pub(crate) fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

pub(crate) fn required<'a>(
    errors: &mut ValidationErrors,
    field: &str,
    value: &'a Option<String>,
) -> Option<&'a str> {
    if value.is_none() {
        errors.add(field, "is required");
    }
    value.as_deref()
}

/// `{"deleted": "<id>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Deleted {
    pub deleted: String,
}

/// `{"status": "..."}`, e.g. `logged_out`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusResponse {
    pub status: String,
}

pub(crate) fn text_field(value: &str, min: usize, max: usize) -> Result<String, String> {
    crate::domain::text::text(value, min, max)
}
