//! The one error type of the facade.
//!
//! Every operation returns [`Error`]. Its [`Error::code`] is the stable, snake_case word clients
//! match on; transports (HTTP in `agentd`, exit codes in `agentctl`) map the variant, never the
//! message. Internal causes are kept for logging and never shown to a caller.

use std::collections::BTreeMap;
use std::fmt;

use crate::domain::quota::Quota;

/// What a caller can get wrong, field by field: field name to the problem, in sentences.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidationErrors(BTreeMap<String, String>);

impl ValidationErrors {
    pub fn new() -> Self {
        Self::default()
    }

    /// One problem with one field.
    pub fn single(field: impl Into<String>, problem: impl Into<String>) -> Self {
        let mut errors = Self::new();
        errors.add(field, problem);
        errors
    }

    /// Records a problem; the first one reported for a field wins.
    pub fn add(&mut self, field: impl Into<String>, problem: impl Into<String>) {
        self.0.entry(field.into()).or_insert_with(|| problem.into());
    }

    /// Keeps the parsed value, or records why it was refused.
    pub fn check<T>(&mut self, field: &str, parsed: Result<T, String>) -> Option<T> {
        match parsed {
            Ok(value) => Some(value),
            Err(problem) => {
                self.add(field, problem);
                None
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn fields(&self) -> &BTreeMap<String, String> {
        &self.0
    }

    /// `Ok(())` when nothing was recorded.
    pub fn into_result(self) -> Result<(), Error> {
        if self.is_empty() { Ok(()) } else { Err(Error::Validation(self)) }
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (field, problem) in &self.0 {
            if !first {
                f.write_str("; ")?;
            }
            write!(f, "{field}: {problem}")?;
            first = false;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationErrors {}

/// The kinds of resource a lookup can miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Agent,
    Task,
    Connection,
    Mapping,
    Template,
    McpServer,
    Schedule,
    Approval,
    Workspace,
    Member,
    Invite,
    ApiKey,
    Webhook,
    WebhookDelivery,
    Trigger,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Agent => "agent",
            Resource::Task => "task",
            Resource::Connection => "connection",
            Resource::Mapping => "mapping",
            Resource::Template => "template",
            Resource::McpServer => "mcp_server",
            Resource::Schedule => "schedule",
            Resource::Approval => "approval",
            Resource::Workspace => "workspace",
            Resource::Member => "member",
            Resource::Invite => "invite",
            Resource::ApiKey => "api_key",
            Resource::Webhook => "webhook",
            Resource::WebhookDelivery => "webhook_delivery",
            Resource::Trigger => "trigger",
        }
    }
}

/// Requests that clash with the current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    AgentExists,
    EmailTaken,
    AgentNotMapped,
    TaskNotEditable,
    McpServerExists,
    /// The task waits for no approval (never did, or it was decided already).
    NotAwaitingApproval,
    /// The task ended (complete or failed): there is nothing to cancel.
    TaskFinished,
    /// The task was cancelled already.
    TaskAlreadyCancelled,
    /// The change would leave a workspace without an owner.
    LastOwner,
    /// The user is a member of the workspace already.
    AlreadyMember,
    /// A call to a trigger that is disabled.
    TriggerDisabled,
}

impl Conflict {
    pub fn code(self) -> &'static str {
        match self {
            Conflict::AgentExists => "agent_exists",
            Conflict::EmailTaken => "email_taken",
            Conflict::AgentNotMapped => "agent_not_mapped",
            Conflict::TaskNotEditable => "task_not_editable",
            Conflict::McpServerExists => "mcp_server_exists",
            Conflict::NotAwaitingApproval => "not_awaiting_approval",
            Conflict::TaskFinished => "task_finished",
            Conflict::TaskAlreadyCancelled => "task_already_cancelled",
            Conflict::LastOwner => "last_owner",
            Conflict::AlreadyMember => "already_member",
            Conflict::TriggerDisabled => "trigger_disabled",
        }
    }
}

/// Requests refused for a reason that is not a field's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Discord does not accept the bot token.
    InvalidBotToken,
    /// The bot cannot see the guild.
    GuildNotAccessible,
    /// A webhook whose signature does not match its body (or is missing, or too old).
    InvalidSignature,
    /// A Discord interaction whose Ed25519 signature does not match (or is missing, too old,
    /// or for an endpoint with no key): Discord expects 401 for it.
    InvalidInteractionSignature,
    /// A call to a trigger (`/hooks/{id}`) without a valid Standard Webhooks signature, or
    /// signed too long ago or too far ahead: 401, with the same word as Stripe's refusal.
    InvalidHookSignature,
}

impl Refusal {
    pub fn code(self) -> &'static str {
        match self {
            Refusal::InvalidBotToken => "invalid_bot_token",
            Refusal::GuildNotAccessible => "guild_not_accessible",
            Refusal::InvalidSignature => "invalid_signature",
            Refusal::InvalidInteractionSignature => "invalid_interaction_signature",
            Refusal::InvalidHookSignature => "invalid_signature",
        }
    }
}

/// Every way an operation of the facade can fail.
/// Why the database refused a write, when the cause lies outside the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageFault {
    /// The disk (or the database server's disk) has no room left.
    Full,
    /// The database cannot be reached, is restarting, or stayed locked too long.
    Unavailable,
}

impl StorageFault {
    pub fn code(self) -> &'static str {
        match self {
            StorageFault::Full => "storage_full",
            StorageFault::Unavailable => "storage_unavailable",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input was refused; nothing changed.
    #[error("validation failed: {0}")]
    Validation(ValidationErrors),

    /// The request is well-formed but refused; nothing changed.
    #[error("{message}")]
    Refused { kind: Refusal, message: String },

    /// Missing, malformed, unknown or revoked credentials. Deliberately says nothing more.
    #[error("authentication required")]
    Unauthorized,

    /// The caller may not do this, although the resource exists and is theirs to see.
    #[error("{0}")]
    Forbidden(String),

    /// The resource does not exist for this caller (another user's resources do not exist).
    #[error("{resource} not found: {id}", resource = .resource.as_str())]
    NotFound { resource: Resource, id: String },

    /// The request clashes with the current state; the message says how.
    #[error("{message}")]
    Conflict { kind: Conflict, message: String },

    /// The user's plan allows no more of this.
    #[error("the {plan} plan allows {limit} agents")]
    PlanLimitReached { plan: String, limit: u32 },

    /// One of the operator's quotas (`quotas.<name>`) allows no more of this.
    #[error("quota {} is {limit}", quota.as_str())]
    QuotaExceeded { quota: crate::domain::quota::Quota, limit: u64 },

    /// A feature whose settings are missing; the message names the setting.
    #[error("{0}")]
    NotConfigured(String),

    /// An outside service (Discord, Stripe, a model provider) failed; the message says which.
    #[error("{0}")]
    Upstream(String),

    /// Something on our side broke. The cause is for the logs only.
    /// A statement failed for a reason outside the service; `cause` is for logs only.
    #[error("storage fault ({code}): {cause}", code = .fault.code())]
    Storage { fault: StorageFault, cause: String },

    #[error("internal error: {0}")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// The stable snake_case code clients match on.
    pub fn code(&self) -> String {
        match self {
            Error::Validation(_) => "validation_failed".into(),
            Error::Refused { kind, .. } => kind.code().into(),
            Error::Unauthorized => "unauthorized".into(),
            Error::Forbidden(_) => "forbidden".into(),
            Error::NotFound { resource, .. } => format!("{}_not_found", resource.as_str()),
            Error::Conflict { kind, .. } => kind.code().into(),
            Error::PlanLimitReached { .. } => "plan_limit_reached".into(),
            Error::QuotaExceeded { .. } => "quota_exceeded".into(),
            Error::NotConfigured(_) => "not_configured".into(),
            Error::Upstream(_) => "upstream_error".into(),
            Error::Storage { fault, .. } => fault.code().into(),
            Error::Internal(_) => "internal".into(),
        }
    }

    pub fn not_found(resource: Resource, id: impl Into<String>) -> Self {
        Error::NotFound { resource, id: id.into() }
    }

    pub fn conflict(kind: Conflict, message: impl Into<String>) -> Self {
        Error::Conflict { kind, message: message.into() }
    }

    pub fn refused(kind: Refusal, message: impl Into<String>) -> Self {
        Error::Refused { kind, message: message.into() }
    }

    pub fn internal(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Internal(cause.into())
    }

    /// A message fit for a person. Internal causes are replaced by a generic sentence.
    pub fn public_message(&self) -> String {
        match self {
            Error::Validation(_) => "The request has invalid fields.".into(),
            Error::Unauthorized => {
                "Authentication required: log in again to get a fresh token.".into()
            }
            Error::NotFound { resource, id } => {
                format!("No {} with id '{id}'.", resource.as_str())
            }
            Error::PlanLimitReached { plan, limit } => format!(
                "The {plan} plan allows {limit} agents; delete one or upgrade the plan to create more."
            ),
            Error::QuotaExceeded { quota, limit } if *quota == Quota::MinEnqueuePeriod => format!(
                "An enqueue schedule may fire at most once every {limit} s on this server \
                 (quota {}): use a longer period or overlap skip_if_active.",
                quota.as_str()
            ),
            Error::QuotaExceeded { quota: Quota::TriggerCallsPerMinute, limit } => format!(
                "This trigger accepts at most {limit} calls in any 60 seconds; send this one \
                 again shortly."
            ),
            Error::QuotaExceeded { quota, limit } => format!(
                "This server allows {limit} {} (quota {}); remove some, or ask the operator \
                 to raise quotas.{}.",
                quota.counts(),
                quota.as_str(),
                quota.as_str()
            ),
            Error::Storage { fault: StorageFault::Full, .. } => {
                "The server's disk is full, so nothing could be saved. Try again once an \
                 operator has freed space."
                    .into()
            }
            Error::Storage { fault: StorageFault::Unavailable, .. } => {
                "The database cannot be reached right now, so the change may not have been \
                 saved. Try again shortly."
                    .into()
            }
            Error::Internal(_) => "Something went wrong on our side.".into(),
            other => other.to_string(),
        }
    }
}

impl From<crate::domain::billing::AgentLimitReached> for Error {
    fn from(reached: crate::domain::billing::AgentLimitReached) -> Self {
        use crate::domain::billing::AgentLimitReached;
        match reached {
            AgentLimitReached::Plan { plan, limit } => Error::PlanLimitReached { plan, limit },
            AgentLimitReached::Quota { limit } => {
                Error::QuotaExceeded { quota: Quota::AgentsPerUser, limit: u64::from(limit) }
            }
        }
    }
}

impl From<ValidationErrors> for Error {
    fn from(errors: ValidationErrors) -> Self {
        Error::Validation(errors)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_words() {
        assert_eq!(Error::not_found(Resource::Agent, "x").code(), "agent_not_found");
        assert_eq!(Error::not_found(Resource::Task, "x").code(), "task_not_found");
        assert_eq!(Error::conflict(Conflict::EmailTaken, "m").code(), "email_taken");
        assert_eq!(
            Error::PlanLimitReached { plan: "free".into(), limit: 3 }.code(),
            "plan_limit_reached"
        );
    }

    #[test]
    fn internal_causes_never_reach_the_public_message() {
        let error = Error::internal("connection refused at 10.0.0.3:5432 password=hunter2");
        assert!(!error.public_message().contains("hunter2"));
        assert_eq!(error.code(), "internal");
    }

    #[test]
    fn the_first_problem_of_a_field_is_kept() {
        let mut errors = ValidationErrors::new();
        errors.add("name", "is required");
        errors.add("name", "is too long");
        assert_eq!(errors.fields()["name"], "is required");
    }
}
