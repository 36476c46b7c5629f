//! Discord's interactions in its wire format: the payload Discord POSTs to the interactions
//! endpoint (a ping, a slash command, a click on Approve, Deny or Cancel, an autocomplete), read
//! into the domain's [`Request`]; the service's [`Reply`] written as Discord's interaction
//! response; the slash commands the service registers; who may run what.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::approval::parse_custom_id;
use crate::domain::interaction::{AgentAction, Command, Reply, Request, parse_cancel_custom_id};

/// Interaction types.
const PING: u8 = 1;
const APPLICATION_COMMAND: u8 = 2;
const MESSAGE_COMPONENT: u8 = 3;
const AUTOCOMPLETE: u8 = 4;
/// Administrator and Manage Server: either lets a member run commands that change something.
const ADMINISTRATOR: u64 = 1 << 3;
const MANAGE_GUILD: u64 = 1 << 5;
/// Discord's flag for an answer only its asker sees.
const EPHEMERAL: u64 = 1 << 6;
/// Longest message content Discord accepts.
pub const MAX_CONTENT: usize = 2000;

/// An interaction as Discord sends it; fields the service does not use are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct Interaction {
    pub id: String,
    pub application_id: String,
    #[serde(rename = "type")]
    pub kind: u8,
    #[serde(default)]
    pub token: String,
    #[serde(default)]
    pub guild_id: Option<String>,
    #[serde(default)]
    pub channel_id: Option<String>,
    #[serde(default)]
    pub member: Option<Member>,
    #[serde(default)]
    pub data: Option<Data>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Member {
    pub user: User,
    #[serde(default)]
    pub roles: Vec<String>,
    /// The member's permissions in the channel, a decimal bit set.
    #[serde(default)]
    pub permissions: String,
    #[serde(default)]
    pub nick: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub id: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub global_name: Option<String>,
}

/// A command's name and options, or a component's `custom_id`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Data {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub options: Vec<CommandOption>,
    #[serde(default)]
    pub custom_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CommandOption {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: u8,
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub options: Vec<CommandOption>,
    #[serde(default)]
    pub focused: bool,
}

impl Member {
    /// The name shown in the server: nickname, display name, or username.
    pub fn display_name(&self) -> String {
        self.nick
            .clone()
            .or_else(|| self.user.global_name.clone())
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| self.user.username.clone())
    }

    /// Whether the member may run a command that changes something: Manage Server (or
    /// Administrator), or one of the roles the connection's owner allowed.
    pub fn may_change(&self, allowed_roles: &[String]) -> bool {
        let permissions = self.permissions.parse::<u64>().unwrap_or(0);
        permissions & (ADMINISTRATOR | MANAGE_GUILD) != 0
            || self.roles.iter().any(|role| allowed_roles.contains(role))
    }
}

impl Interaction {
    /// Reads what the interaction asks for.
    pub fn request(&self) -> Request {
        let data = self.data.clone().unwrap_or_default();
        match self.kind {
            PING => Request::Ping,
            APPLICATION_COMMAND => command(&data).map_or(Request::Unknown, Request::Command),
            MESSAGE_COMPONENT => {
                let custom_id = data.custom_id.as_deref().unwrap_or_default();
                if let Some((decision, id)) = parse_custom_id(custom_id) {
                    Request::Decide { decision, approval_id: id.to_owned() }
                } else if let Some(task_id) = parse_cancel_custom_id(custom_id) {
                    Request::Cancel { task_id: task_id.to_owned() }
                } else {
                    Request::Unknown
                }
            }
            AUTOCOMPLETE => {
                let partial = focused(&data.options)
                    .and_then(|o| o.value.as_ref())
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                Request::Autocomplete { partial }
            }
            _ => Request::Unknown,
        }
    }
}

fn focused(options: &[CommandOption]) -> Option<&CommandOption> {
    options.iter().find_map(|o| if o.focused { Some(o) } else { focused(&o.options) })
}

fn command(data: &Data) -> Option<Command> {
    let text = |options: &[CommandOption], name: &str| {
        options
            .iter()
            .find(|o| o.name == name)
            .and_then(|o| o.value.as_ref())
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let sub = data.options.iter().find(|o| o.kind == 1);
    let options = sub.map_or(&data.options[..], |s| &s.options[..]);
    let agent = || text(options, "agent");
    match (data.name.as_str(), sub.map(|s| s.name.as_str())) {
        ("agents", None) => Some(Command::Agents),
        ("task", Some("add")) => Some(Command::TaskAdd {
            agent: agent()?,
            title: text(options, "title")?,
            description: text(options, "description"),
            priority: options
                .iter()
                .find(|o| o.name == "priority")
                .and_then(|o| o.value.as_ref())
                .and_then(Value::as_i64),
        }),
        ("agent", Some(action)) => {
            let action = match action {
                "start" => AgentAction::Start,
                "stop" => AgentAction::Stop,
                "vacation" => AgentAction::Vacation,
                _ => return None,
            };
            Some(Command::Agent { action, agent: agent()? })
        }
        ("ask", None) => Some(Command::Ask { agent: agent()?, prompt: text(options, "prompt")? }),
        _ => None,
    }
}

/// The commands registered in each connected server (the body of Discord's bulk overwrite).
pub fn commands() -> Value {
    let agent = json!({"type": 3, "name": "agent", "description": "The agent (its id)",
        "required": true, "autocomplete": true});
    let on_agent = |name: &str, description: &str| json!({"type": 1, "name": name, "description": description, "options": [agent.clone()]});
    json!([
        {"type": 1, "name": "agents", "description": "Status and queue of this server's agents",
         "contexts": [0]},
        {"type": 1, "name": "task", "description": "Work for an agent", "contexts": [0],
         "options": [{"type": 1, "name": "add", "description": "Add a task to an agent's backlog",
            "options": [agent.clone(),
                {"type": 3, "name": "title", "description": "What to do, on one line",
                 "required": true, "max_length": 200},
                {"type": 3, "name": "description", "description": "Details",
                 "required": false, "max_length": 4000},
                {"type": 4, "name": "priority", "description": "Higher runs first (default 0)",
                 "required": false}]}]},
        {"type": 1, "name": "agent", "description": "Start, stop or send an agent on vacation",
         "contexts": [0],
         "options": [on_agent("start", "Make the agent work through its backlog"),
                     on_agent("stop", "Stop the agent after its current task"),
                     on_agent("vacation", "Pause the agent until it is started again")]},
        {"type": 1, "name": "ask", "description": "Ask an agent; its answer comes back here",
         "contexts": [0],
         "options": [agent,
            {"type": 3, "name": "prompt", "description": "What to ask", "required": true,
             "max_length": 2000}]}
    ])
}

/// Content cut to Discord's limit.
pub fn fit(content: &str) -> String {
    if content.chars().count() <= MAX_CONTENT {
        return content.to_owned();
    }
    let mut cut: String = content.chars().take(MAX_CONTENT - 1).collect();
    cut.push('…');
    cut
}

/// The body of a message answer or follow-up. Mentions never ping.
pub fn message_data(content: &str, ephemeral: bool) -> Value {
    let mut data = json!({"content": fit(content), "allowed_mentions": {"parse": []}});
    if ephemeral {
        data["flags"] = json!(EPHEMERAL);
    }
    data
}

/// The answer in Discord's wire format (an interaction response: its `type` and `data`).
pub fn wire(reply: &Reply) -> Value {
    match reply {
        Reply::Pong => json!({"type": 1}),
        Reply::Message { content, ephemeral } => {
            json!({"type": 4, "data": message_data(content, *ephemeral)})
        }
        Reply::Deferred { ephemeral: true } => json!({"type": 5, "data": {"flags": EPHEMERAL}}),
        Reply::Deferred { ephemeral: false } => json!({"type": 5}),
        Reply::Update(body) => {
            let mut data = serde_json::to_value(body).unwrap_or_else(|_| json!({}));
            data["components"] = json!([]);
            json!({"type": 7, "data": data})
        }
        Reply::Choices(names) => {
            let choices: Vec<Value> = names
                .iter()
                .take(25)
                .map(|(name, value)| {
                    json!({"name": name.chars().take(100).collect::<String>(), "value": value})
                })
                .collect();
            json!({"type": 8, "data": {"choices": choices}})
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::approval::Decision;

    fn interaction(payload: Value) -> Interaction {
        let mut body = json!({"id": "1", "application_id": "2", "token": "t", "guild_id": "3",
            "member": {"user": {"id": "4", "username": "ana"}, "roles": ["55"], "permissions": "1024"}});
        body.as_object_mut().unwrap().extend(payload.as_object().unwrap().clone());
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn commands_are_read_with_their_options() {
        let add = interaction(json!({"type": 2, "data": {"name": "task", "options": [{"type": 1,
            "name": "add", "options": [{"name": "agent", "type": 3, "value": "ops"},
            {"name": "title", "type": 3, "value": "Check logs"},
            {"name": "priority", "type": 4, "value": 5}]}]}}));
        assert_eq!(
            add.request(),
            Request::Command(Command::TaskAdd {
                agent: "ops".into(),
                title: "Check logs".into(),
                description: None,
                priority: Some(5)
            })
        );
        let ask = interaction(json!({"type": 2, "data": {"name": "ask", "options": [
            {"name": "agent", "type": 3, "value": "ops"}, {"name": "prompt", "type": 3, "value": "hi"}]}}));
        assert_eq!(
            ask.request(),
            Request::Command(Command::Ask { agent: "ops".into(), prompt: "hi".into() })
        );
        let stop = interaction(json!({"type": 2, "data": {"name": "agent", "options": [{"type": 1,
            "name": "stop", "options": [{"name": "agent", "type": 3, "value": "ops"}]}]}}));
        assert_eq!(
            stop.request(),
            Request::Command(Command::Agent { action: AgentAction::Stop, agent: "ops".into() })
        );
        let missing = interaction(json!({"type": 2, "data": {"name": "ask", "options": []}}));
        assert_eq!(missing.request(), Request::Unknown);
    }

    #[test]
    fn buttons_and_autocomplete_are_read() {
        let click = interaction(
            json!({"type": 3, "data": {"custom_id": "approval:approve:abc", "component_type": 2}}),
        );
        assert_eq!(
            click.request(),
            Request::Decide { decision: Decision::Approve, approval_id: "abc".into() }
        );
        let cancel = interaction(
            json!({"type": 3, "data": {"custom_id": "task:cancel:t-1", "component_type": 2}}),
        );
        assert_eq!(cancel.request(), Request::Cancel { task_id: "t-1".into() });
        let other = interaction(
            json!({"type": 3, "data": {"custom_id": "task:retry:t-1", "component_type": 2}}),
        );
        assert_eq!(other.request(), Request::Unknown);
        let typing = interaction(
            json!({"type": 4, "data": {"name": "task", "options": [{"type": 1,
            "name": "add", "options": [{"name": "agent", "type": 3, "value": "op", "focused": true}]}]}}),
        );
        assert_eq!(typing.request(), Request::Autocomplete { partial: "op".into() });
    }

    #[test]
    fn manage_server_administrator_or_an_allowed_role_may_change() {
        let mut member = interaction(json!({"type": 2})).member.unwrap();
        assert!(!member.may_change(&[]));
        assert!(member.may_change(&["55".into()]));
        member.permissions = (1u64 << 5).to_string();
        assert!(member.may_change(&[]));
        member.permissions = (1u64 << 3).to_string();
        assert!(member.may_change(&[]));
        member.permissions = "not a number".into();
        assert!(!member.may_change(&[]));
    }

    #[test]
    fn answers_fit_discord() {
        let long = wire(&Reply::private("x".repeat(5000)));
        assert_eq!(long["data"]["content"].as_str().unwrap().chars().count(), MAX_CONTENT);
        assert_eq!(long["data"]["flags"], 64);
        let many: Vec<(String, String)> = (0..40).map(|i| (i.to_string(), i.to_string())).collect();
        assert_eq!(wire(&Reply::Choices(many))["data"]["choices"].as_array().unwrap().len(), 25);
        assert_eq!(commands().as_array().unwrap().len(), 4);
    }
}
