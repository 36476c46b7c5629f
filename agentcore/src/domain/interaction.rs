//! What a Discord interaction asks of the service (a slash command, a decision on an
//! approval, an autocomplete) and what the service answers, in the service's words. The Discord
//! adapter (`discord/interaction.rs`) reads Discord's payloads into these and writes the
//! answers in Discord's wire format.

use super::approval::Decision;
use super::message::MessageBody;

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
