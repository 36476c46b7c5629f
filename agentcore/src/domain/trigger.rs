//! Inbound triggers: a URL (`/hooks/{id}`) on one of an agent's triggers that another system
//! calls with a Standard Webhooks signature; each accepted call queues a task whose title and
//! description are the trigger's templates filled from the call's JSON body (`template.rs`).
//! The bounds a caller meets are here, stated once (docs/api.md repeats them).

mod template;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::agent::AgentId;
use super::task::{NewTask, Priority, TaskDescription, TaskId, TaskTitle};
use super::text;

pub use template::{MAX_PATH_CHARS, MAX_PLACEHOLDERS, MAX_SEGMENTS, Template};

generated_id!(
    /// A trigger's id: a UUID v7 in its hyphenated text form; also its URL's last segment.
    TriggerId
);

/// The largest call body accepted, in bytes (413 beyond it, before the rest is read).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Triggers one workspace may have (fixed).
pub const TRIGGERS_PER_WORKSPACE: u32 = 100;
/// Calls one trigger accepts in any 60 seconds, by the database's clock (fixed).
pub const CALLS_PER_MINUTE: u32 = 60;
/// How long the secret before a rotation stays valid beside the new one.
pub const ROTATION_OVERLAP_HOURS: i64 = 24;
/// The longest name.
pub const MAX_NAME_CHARS: usize = 100;
/// The longest title template (a task title's limit: a template with no placeholder is a
/// valid title).
pub const MAX_TITLE_CHARS: usize = 200;
/// The longest description template (a task description's limit).
pub const MAX_DESCRIPTION_CHARS: usize = 20_000;

text::text_newtype!(
    /// What the trigger is for, for people: up to 100 characters on one line, possibly empty.
    TriggerName,
    |v| text::line(v, 0, MAX_NAME_CHARS)
);

/// A title template: a valid task title (1 to 200 characters on one line) whose placeholders
/// parse.
pub fn title_template(value: &str) -> Result<Template, String> {
    TaskTitle::parse(value)?;
    Template::parse(value)
}

/// A description template: a valid task description whose placeholders parse.
pub fn description_template(value: &str) -> Result<Template, String> {
    TaskDescription::parse(value)?;
    Template::parse(value)
}

/// A trigger to add.
#[derive(Debug, Clone)]
pub struct NewTrigger {
    pub agent_id: AgentId,
    pub name: TriggerName,
    pub title: Template,
    pub description: Option<Template>,
    pub priority: Priority,
    pub enabled: bool,
}

/// A change of a trigger; `description: Some(None)` clears it.
#[derive(Debug, Clone, Default)]
pub struct TriggerPatch {
    pub name: Option<TriggerName>,
    pub title: Option<Template>,
    pub description: Option<Option<Template>>,
    pub priority: Option<Priority>,
    pub enabled: Option<bool>,
}

/// A stored trigger (its sealed secrets apart: the store keeps them).
#[derive(Debug, Clone)]
pub struct TriggerRecord {
    pub id: TriggerId,
    pub agent_id: AgentId,
    pub name: TriggerName,
    pub title: Template,
    pub description: Option<Template>,
    pub priority: Priority,
    pub enabled: bool,
    pub calls: i64,
    pub last_called_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl TriggerRecord {
    pub fn create(new: NewTrigger, at: DateTime<Utc>) -> Self {
        Self {
            id: TriggerId::generate(),
            agent_id: new.agent_id,
            name: new.name,
            title: new.title,
            description: new.description,
            priority: new.priority,
            enabled: new.enabled,
            calls: 0,
            last_called_at: None,
            created_at: at,
            updated_at: at,
        }
    }

    /// This trigger with `patch` applied at `at`.
    pub fn patched(&self, patch: &TriggerPatch, at: DateTime<Utc>) -> Self {
        let mut next = self.clone();
        if let Some(name) = &patch.name {
            next.name = name.clone();
        }
        if let Some(title) = &patch.title {
            next.title = title.clone();
        }
        if let Some(description) = &patch.description {
            next.description = description.clone();
        }
        if let Some(priority) = patch.priority {
            next.priority = priority;
        }
        if let Some(enabled) = patch.enabled {
            next.enabled = enabled;
        }
        next.updated_at = at;
        next
    }

    /// The task a call with `body` queues. The filled title is made a valid task title (line
    /// breaks and control characters become spaces, cut at 200 characters); one left blank
    /// is `Call to trigger <name>` (or its id). The description is cut at 20,000 characters,
    /// NUL characters dropped; one left empty is none.
    pub fn task_for(&self, body: &Value) -> NewTask {
        let filled = self.title.fill(body, MAX_TITLE_CHARS);
        let line: String = filled.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let title = TaskTitle::parse(line.trim()).unwrap_or_else(|_| self.fallback_title());
        let description = self.description.as_ref().and_then(|template| {
            let filled: String =
                template.fill(body, MAX_DESCRIPTION_CHARS).chars().filter(|c| *c != '\0').collect();
            if filled.trim().is_empty() { None } else { TaskDescription::parse(&filled).ok() }
        });
        NewTask { title, description, priority: self.priority }
    }

    fn fallback_title(&self) -> TaskTitle {
        let named = if self.name.as_str().trim().is_empty() {
            self.id.as_str()
        } else {
            self.name.as_str()
        };
        let text: String =
            format!("Call to trigger {named}").chars().take(MAX_TITLE_CHARS).collect();
        // A name is one line of at most 100 characters, an id 36: always a valid title.
        TaskTitle::parse(&text).unwrap_or_else(|_| self.plain_title())
    }

    fn plain_title(&self) -> TaskTitle {
        #[allow(clippy::expect_used, reason = "a constant valid title")]
        TaskTitle::parse("Trigger call").expect("a valid title")
    }

    /// The trigger as the API shows it; `base` is the service's public origin, when known.
    pub fn public(&self, base: Option<&str>) -> Trigger {
        let path = format!("/hooks/{}", self.id);
        Trigger {
            id: self.id.clone(),
            agent: self.agent_id.clone(),
            name: self.name.as_str().to_owned(),
            title: self.title.as_str().to_owned(),
            description: self.description.as_ref().map(|d| d.as_str().to_owned()),
            priority: self.priority.get(),
            enabled: self.enabled,
            url: base.map_or(path.clone(), |base| format!("{base}{path}")),
            calls: self.calls,
            last_called_at: self.last_called_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A trigger as the API shows it (never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Trigger {
    pub id: TriggerId,
    /// The agent whose backlog its calls add to.
    pub agent: AgentId,
    pub name: String,
    /// The title template of the tasks it queues.
    pub title: String,
    /// The description template.
    pub description: Option<String>,
    pub priority: i32,
    /// A disabled trigger refuses calls (409 `trigger_disabled`).
    pub enabled: bool,
    /// Where to send calls: `/hooks/{id}`, absolute when the service knows its public address
    /// (the origin of `discord.redirect_uri`).
    pub url: String,
    /// Calls accepted (duplicates not counted).
    pub calls: i64,
    pub last_called_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A trigger just made: the one time its secret is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedTrigger {
    #[serde(flatten)]
    pub trigger: Trigger,
    /// The Standard Webhooks signing secret (`whsec_...`). Shown only now.
    pub secret: String,
}

/// A trigger's new secret, shown once; the previous one stays valid until `previous_valid_until`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RotatedSecret {
    pub secret: String,
    pub previous_valid_until: DateTime<Utc>,
}

/// The answer to an accepted call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HookAccepted {
    /// The task the call queued (the first delivery's, for a duplicate).
    pub task_id: TaskId,
    /// Whether this `webhook-id` was accepted before (then nothing new was written).
    pub duplicate: bool,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use serde_json::json;

    use super::*;

    fn record(title: &str, description: Option<&str>) -> TriggerRecord {
        TriggerRecord::create(
            NewTrigger {
                agent_id: AgentId::parse("alpha").unwrap(),
                name: TriggerName::parse("Alerts").unwrap(),
                title: title_template(title).unwrap(),
                description: description.map(|d| description_template(d).unwrap()),
                priority: Priority::parse(2).unwrap(),
                enabled: true,
            },
            Utc::now(),
        )
    }

    #[test]
    fn a_filled_title_is_made_one_line_and_cut_to_its_limit() {
        let trigger = record("Alert: {{name}}", Some("{{details}}"));
        let task = trigger.task_for(&json!({"name": "a\nb", "details": "x".repeat(30_000)}));
        assert_eq!(task.title.as_str(), "Alert: a b");
        assert_eq!(task.description.unwrap().as_str().chars().count(), MAX_DESCRIPTION_CHARS);
        let long = trigger.task_for(&json!({"name": "y".repeat(500)}));
        assert_eq!(long.title.as_str().chars().count(), MAX_TITLE_CHARS);
        assert!(long.description.is_none(), "an empty description is none");
    }

    #[test]
    fn a_blank_filled_title_falls_back_to_the_triggers_name() {
        let trigger = record("{{missing}}", None);
        assert_eq!(trigger.task_for(&json!({})).title.as_str(), "Call to trigger Alerts");
    }

    #[test]
    fn a_title_template_must_be_a_valid_title() {
        assert!(title_template("").is_err());
        assert!(title_template("two\nlines").is_err());
        assert!(title_template(&"t".repeat(201)).is_err());
        assert!(title_template("{{unclosed").is_err());
    }
}
