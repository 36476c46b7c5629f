//! The wire format of the HTTP API: request bodies as clients send them, and the response
//! envelopes. Requests keep every field optional so that one pass can report every problem;
//! `parse` turns them into domain inputs or a [`ValidationErrors`] naming each bad field.

use serde::{Deserialize, Deserializer, Serialize};

use crate::domain::activity::ActivityEntry;
use crate::domain::agent::{
    AgentId, AgentName, AgentPatch, AgentStatus, AgentSummary, ChannelName, ModelName, NewAgent,
    RolePrompt, ThrottleSeconds, Workspace,
};
use crate::domain::chat::{
    BotToken, ChannelId, ChannelInfo, Connection, GuildId, Mapping, OutgoingMessage,
};
use crate::domain::onboarding::{CompanyName, Template};
use crate::domain::task::{NewTask, Priority, Task, TaskDescription, TaskPatch, TaskTitle};
use crate::domain::user::{Credentials, Email, NewUser, Password, UserName};
use crate::error::ValidationErrors;

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

fn required<'a>(
    errors: &mut ValidationErrors,
    field: &str,
    value: &'a Option<String>,
) -> Option<&'a str> {
    if value.is_none() {
        errors.add(field, "is required");
    }
    value.as_deref()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false, format = Email))]
    pub email: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 8, max_length = 1024)
    )]
    pub password: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 100)
    )]
    pub name: Option<String>,
}

impl RegisterRequest {
    pub fn parse(&self) -> Result<NewUser, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let email = required(&mut errors, "email", &self.email)
            .and_then(|v| errors.check("email", Email::parse(v)));
        let password = required(&mut errors, "password", &self.password)
            .and_then(|v| errors.check("password", Password::parse(v)));
        let name = required(&mut errors, "name", &self.name)
            .and_then(|v| errors.check("name", UserName::parse(v)));
        match (email, password, name) {
            (Some(email), Some(password), Some(name)) if errors.is_empty() => {
                Ok(NewUser { email, password, name })
            }
            _ => Err(errors),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoginRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub email: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub password: Option<String>,
}

impl LoginRequest {
    pub fn parse(&self) -> Result<Credentials, ValidationErrors> {
        let mut errors = ValidationErrors::new();
        let email = required(&mut errors, "email", &self.email);
        let password = required(&mut errors, "password", &self.password);
        match (email, password) {
            (Some(email), Some(password)) => {
                Ok(Credentials { email: email.to_owned(), password: password.into() })
            }
            _ => Err(errors),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateAgentRequest {
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, pattern = "^[a-z0-9][a-z0-9_-]{0,62}$")
    )]
    pub id: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 100)
    )]
    pub name: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 32000)
    )]
    pub role_prompt: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub channel: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub workspace: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 0, maximum = 86400))]
    pub throttle_seconds: Option<f64>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub model: Option<String>,
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
        match (id, name, role_prompt, channel, throttle) {
            (Some(id), Some(name), Some(role_prompt), Some(channel), Some(throttle_seconds))
                if e.is_empty() =>
            {
                Ok(NewAgent {
                    id,
                    name,
                    role_prompt,
                    channel,
                    workspace: workspace.flatten(),
                    throttle_seconds,
                    model: model.flatten(),
                })
            }
            _ => Err(e),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateAgentRequest {
    #[cfg_attr(feature = "openapi", schema(nullable = false, min_length = 1, max_length = 100))]
    pub name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, min_length = 1, max_length = 32000))]
    pub role_prompt: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub channel: Option<String>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Option<String>>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, value_type = Option<crate::domain::agent::AgentStatus>))]
    pub status: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 0, maximum = 86400))]
    pub throttle_seconds: Option<f64>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub model: Option<Option<String>>,
}

impl UpdateAgentRequest {
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
        };
        if e.is_empty() { Ok(patch) } else { Err(e) }
    }
}

/// The optional body of `POST .../vacation`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VacationRequest {
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateTaskRequest {
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 200)
    )]
    pub title: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 20000))]
    pub description: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = -2147483648, maximum = 2147483647))]
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
    pub title: Option<String>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = -2147483648, maximum = 2147483647))]
    pub priority: Option<i64>,
}

impl UpdateTaskRequest {
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

/// `POST /api/onboarding/setup`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetupRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub company_name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub role_template: Option<String>,
}

impl SetupRequest {
    /// The company and the template id (looked up by the facade: unknown is a 404).
    pub fn parse(&self) -> Result<(CompanyName, String), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let company = required(&mut e, "company_name", &self.company_name)
            .and_then(|v| e.check("company_name", CompanyName::parse(v)));
        let template = required(&mut e, "role_template", &self.role_template);
        match (company, template) {
            (Some(company), Some(template)) if e.is_empty() => Ok((company, template.to_owned())),
            _ => Err(e),
        }
    }
}

/// `{"templates": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TemplateList {
    pub templates: Vec<Template>,
}

/// `{"agents": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentList {
    pub agents: Vec<AgentSummary>,
}

/// `{"tasks": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskList {
    pub tasks: Vec<Task>,
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

/// `POST /api/chat/callback`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub code: Option<String>,
    /// Only a hint: the guild Discord names in the token exchange is the one stored.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub guild_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub state: Option<String>,
}

impl CallbackRequest {
    /// The code and the state to verify.
    pub fn parse(&self) -> Result<(String, Option<String>), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let code = required(&mut e, "code", &self.code)
            .and_then(|v| e.check("code", text_field(v, 1, 512)));
        if let Some(guild_id) = &self.guild_id {
            e.check("guild_id", GuildId::parse(guild_id));
        }
        match code {
            Some(code) if e.is_empty() => Ok((code, self.state.clone())),
            _ => Err(e),
        }
    }
}

/// `POST /api/chat/connect`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConnectRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub bot_token: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub guild_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub guild_name: Option<String>,
}

impl ConnectRequest {
    pub fn parse(&self) -> Result<(GuildId, BotToken, Option<String>), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let token = required(&mut e, "bot_token", &self.bot_token)
            .and_then(|v| e.check("bot_token", BotToken::parse(v)));
        let guild = required(&mut e, "guild_id", &self.guild_id)
            .and_then(|v| e.check("guild_id", GuildId::parse(v)));
        let name =
            self.guild_name.as_deref().and_then(|v| e.check("guild_name", text_field(v, 0, 100)));
        match (guild, token) {
            (Some(guild), Some(token)) if e.is_empty() => Ok((guild, token, name)),
            _ => Err(e),
        }
    }
}

/// `POST /api/chat/mappings/{guild_id}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MapRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub channel_id: Option<String>,
    /// Accepted for compatibility; the name stored is the channel's real one.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub channel_name: Option<String>,
}

impl MapRequest {
    pub fn parse(&self) -> Result<(AgentId, ChannelId), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let agent = required(&mut e, "agent_id", &self.agent_id)
            .and_then(|v| e.check("agent_id", AgentId::parse(v)));
        let channel = required(&mut e, "channel_id", &self.channel_id)
            .and_then(|v| e.check("channel_id", ChannelId::parse(v)));
        if let Some(name) = &self.channel_name {
            e.check("channel_name", text_field(name, 0, 100));
        }
        match (agent, channel) {
            (Some(agent), Some(channel)) if e.is_empty() => Ok((agent, channel)),
            _ => Err(e),
        }
    }
}

/// `POST /api/chat/send/{guild_id}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SendRequest {
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 2000))]
    pub content: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 256))]
    pub embed_title: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 4096))]
    pub embed_description: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 0, maximum = 16777215))]
    pub embed_color: Option<i64>,
}

impl SendRequest {
    pub fn parse(&self) -> Result<(AgentId, OutgoingMessage), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let agent = required(&mut e, "agent_id", &self.agent_id)
            .and_then(|v| e.check("agent_id", AgentId::parse(v)));
        let content =
            self.content.as_deref().and_then(|v| e.check("content", OutgoingMessage::content(v)));
        let title = self
            .embed_title
            .as_deref()
            .and_then(|v| e.check("embed_title", OutgoingMessage::embed_title(v)));
        let description = self
            .embed_description
            .as_deref()
            .and_then(|v| e.check("embed_description", OutgoingMessage::embed_description(v)));
        let color =
            self.embed_color.and_then(|v| e.check("embed_color", OutgoingMessage::embed_color(v)));
        if !e.is_empty() {
            return Err(e);
        }
        let Some(message) = OutgoingMessage::new(content, title, description, color) else {
            e.add("content", "a message needs content, an embed title or an embed description");
            return Err(e);
        };
        agent.map(|agent| (agent, message)).ok_or(e)
    }
}

fn text_field(value: &str, min: usize, max: usize) -> Result<String, String> {
    crate::domain::text::text(value, min, max)
}

/// `{"connections": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConnectionList {
    pub connections: Vec<Connection>,
}

/// `{"channels": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelList {
    pub channels: Vec<ChannelInfo>,
}

/// `{"mappings": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MappingList {
    pub mappings: Vec<Mapping>,
}

/// `{"status": "mapped", ...}`: the mapping, with the contract's status word.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Mapped {
    pub status: String,
    #[serde(flatten)]
    pub mapping: Mapping,
}

/// `{"status": "ok", "guild_name"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConnectionTest {
    pub status: String,
    pub guild_name: String,
}

/// `{"status": "disconnected", "guild_id"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Disconnected {
    pub status: String,
    pub guild_id: String,
}

/// `{"status": "unmapped", "agent_id"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Unmapped {
    pub status: String,
    pub agent_id: String,
}
