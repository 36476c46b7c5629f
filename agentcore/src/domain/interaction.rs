//! What a Discord interaction asks of the service (a slash command, a decision on an
//! approval, a task's cancel, an autocomplete) and what the service answers, in the service's
//! words. The Discord adapter (`discord/interaction.rs`) reads Discord's payloads into these and writes the
//! answers in Discord's wire format.

use super::approval::Decision;
use super::message::MessageBody;
use super::task::{Task, TaskStatus};

/// What an interaction asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Ping,
    Command(Command),
    /// A click on an approval's button.
    Decide {
        decision: Decision,
        approval_id: String,
    },
    /// A click on the Cancel button of a task's "Working on" post.
    Cancel {
        task_id: String,
    },
    /// Agent names that start with `partial`, for the option being typed.
    Autocomplete {
        partial: String,
    },
    /// A command or component this service does not know (an old registration, say).
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Agents,
    TaskAdd { agent: String, title: String, description: Option<String>, priority: Option<i64> },
    Agent { action: AgentAction, agent: String },
    Ask { agent: String, prompt: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentAction {
    Start,
    Stop,
    Vacation,
}

impl Command {
    /// Whether the command changes something (and needs the permission to).
    pub fn changes(&self) -> bool {
        !matches!(self, Command::Agents)
    }

    /// How it is logged: `/task add`, `/agent start`, ...
    pub fn label(&self) -> &'static str {
        match self {
            Command::Agents => "/agents",
            Command::TaskAdd { .. } => "/task add",
            Command::Agent { action: AgentAction::Start, .. } => "/agent start",
            Command::Agent { action: AgentAction::Stop, .. } => "/agent stop",
            Command::Agent { action: AgentAction::Vacation, .. } => "/agent vacation",
            Command::Ask { .. } => "/ask",
        }
    }
}

/// The service's answer to an interaction.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The answer to Discord's check of the endpoint.
    Pong,
    /// A message shown at once; `ephemeral`: only to the member who asked.
    Message { content: String, ephemeral: bool },
    /// "Thinking…": the answer follows through the interaction's webhook.
    Deferred { ephemeral: bool },
    /// The clicked message replaced (an approval's message once decided), without buttons.
    Update(MessageBody),
    /// Autocomplete choices: shown name and value.
    Choices(Vec<(String, String)>),
}

impl Reply {
    /// A message only the member who asked sees.
    pub fn private(content: impl Into<String>) -> Self {
        Reply::Message { content: content.into(), ephemeral: true }
    }
}

/// The `custom_id` of the Cancel button on the task's "Working on" post.
pub fn cancel_custom_id(task_id: &str) -> String {
    format!("task:cancel:{task_id}")
}

/// The task of a Cancel button's `custom_id`.
pub fn parse_cancel_custom_id(custom_id: &str) -> Option<&str> {
    custom_id.strip_prefix("task:cancel:").filter(|id| !id.is_empty())
}

/// Who cancelled, as people read it: `discord:<name>` is `<name> (Discord)`.
pub fn canceller(cancelled_by: &str) -> String {
    match cancelled_by.strip_prefix("discord:") {
        Some(name) => format!("{name} (Discord)"),
        None => cancelled_by.to_owned(),
    }
}

/// The answer to a Cancel click on a task that ended before it: how it ended.
pub fn nothing_to_cancel(task: &Task) -> String {
    let title = task.title.chars().take(200).collect::<String>();
    match (task.status, task.cancelled_by.as_deref()) {
        (TaskStatus::Cancelled, Some(by)) => {
            format!("\"{title}\" was cancelled already, by {}.", canceller(by))
        }
        (TaskStatus::Cancelled, None) => format!("\"{title}\" was cancelled already."),
        (TaskStatus::Failed, _) => {
            format!("\"{title}\" failed already: there is nothing to cancel.")
        }
        (status, _) => format!("\"{title}\" is {status} already: there is nothing to cancel."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_custom_ids_round_trip_and_refuse_others() {
        let id = cancel_custom_id("0190-abc");
        assert_eq!(parse_cancel_custom_id(&id), Some("0190-abc"));
        assert_eq!(parse_cancel_custom_id("task:cancel:"), None);
        assert_eq!(parse_cancel_custom_id("approval:approve:1"), None);
        // Discord's limit on a custom_id, with the longest id a task may have.
        assert!(cancel_custom_id(&"x".repeat(64)).chars().count() <= 100);
    }

    #[test]
    fn a_click_after_the_end_says_how_the_task_ended() {
        let at = crate::domain::now();
        let task = |status, cancelled_by: Option<&str>| Task {
            id: crate::domain::task::TaskId::parse("t1").unwrap(),
            agent_id: crate::domain::agent::AgentId::parse("ops").unwrap(),
            title: "Rotate keys".into(),
            description: None,
            priority: 0,
            status,
            result: None,
            error: None,
            attempts: 1,
            created_at: at,
            updated_at: at,
            started_at: None,
            completed_at: None,
            usage: None,
            steps: 0,
            created_by: crate::domain::task::CreatedBy::User,
            depth: 0,
            cancelled_by: cancelled_by.map(str::to_owned),
            trace: None,
        };
        let said = |status, by| nothing_to_cancel(&task(status, by));
        assert_eq!(
            said(TaskStatus::Complete, None),
            "\"Rotate keys\" is complete already: there is nothing to cancel."
        );
        assert!(said(TaskStatus::Failed, None).contains("failed already"));
        assert_eq!(
            said(TaskStatus::Cancelled, Some("discord:ana")),
            "\"Rotate keys\" was cancelled already, by ana (Discord)."
        );
        assert!(
            said(TaskStatus::Cancelled, Some("bo@example.com")).ends_with("by bo@example.com.")
        );
    }
}
