//! Tool approvals: which calls wait for a person (`approval_tools`), an approval as stored and
//! shown, who decided, and the Discord message that asks and then says who decided.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::activity::{Action, NewActivity};
use super::agent::AgentId;
use super::chat::NewPost;
use super::mcp::{McpServerName, split_tool};
use super::message::{ActionRow, Button, Embed, MessageBody};
use super::tool_result::ToolError;
use super::tools::ToolName;

/// The tools whose calls wait for a person's approval: built-in names or `<server>__<tool>`,
/// each once, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalTools(Vec<String>);

impl ApprovalTools {
    pub const MAX: usize = 32;

    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let mut tools: Vec<String> = Vec::new();
        for name in names {
            let name = name.as_ref();
            let valid = match split_tool(name) {
                Some((server, tool)) => McpServerName::parse(server)
                    .ok()
                    .and_then(|server| super::mcp::qualified_tool(&server, tool))
                    .is_some(),
                None => name.parse::<ToolName>().is_ok(),
            };
            if !valid {
                return Err(format!(
                    "'{name}' is neither a built-in tool nor an MCP tool named <server>__<tool>"
                ));
            }
            if !tools.iter().any(|t| t == name) {
                tools.push(name.to_owned());
            }
        }
        if tools.len() > Self::MAX {
            return Err(format!("at most {} tools", Self::MAX));
        }
        Ok(Self(tools))
    }

    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// As stored: a JSON array of names.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "[]".into())
    }

    /// Reads the stored form; a name that no longer parses is dropped.
    pub fn from_json(stored: &str) -> Self {
        let names: Vec<String> = serde_json::from_str(stored).unwrap_or_default();
        Self::parse(&names).unwrap_or_default()
    }
}

/// Whether a call of `tool` waits for approval under `approval_tools`.
pub fn needs_approval(approval_tools: &[String], tool: &str) -> bool {
    approval_tools.iter().any(|t| t == tool)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
        }
    }
}

impl FromStr for ApprovalStatus {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "pending" => Ok(ApprovalStatus::Pending),
            "approved" => Ok(ApprovalStatus::Approved),
            "denied" => Ok(ApprovalStatus::Denied),
            _ => Err(format!("unknown approval status '{value}'")),
        }
    }
}

/// A tool call waiting for, or decided by, a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Approval {
    pub id: String,
    pub task_id: String,
    pub agent_id: AgentId,
    pub tool: String,
    /// The call's arguments, as the model sent them.
    pub arguments: serde_json::Value,
    pub status: ApprovalStatus,
    /// Who decided; `null` while pending, and for a call nobody answered in time.
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    /// When an unanswered call counts as denied.
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    /// The model's id of the call (internal).
    #[serde(skip)]
    pub call_id: String,
}

/// Approve or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Who decides: a Discord member, the owner through the API, or nobody in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decider {
    /// A Discord member, by the name shown in the server.
    Member(String),
    /// The agent's owner, through the API, the CLI or the dashboard.
    Owner,
    Timeout,
}

impl Decider {
    /// As stored in `decided_by` (`None` for a timeout).
    pub fn label(&self) -> Option<String> {
        match self {
            Decider::Member(name) => Some(format!("{name} (Discord)")),
            Decider::Owner => Some("the owner".into()),
            Decider::Timeout => None,
        }
    }
}

/// `decision` by `decider` at `at` applied to `approval`: the approval as decided and the
/// activity entry that says so; or, when it was decided already, the message that says by whom.
pub fn decide(
    mut approval: Approval,
    decision: Decision,
    decider: &Decider,
    at: DateTime<Utc>,
) -> Result<(Approval, NewActivity), String> {
    if approval.status != ApprovalStatus::Pending {
        let who = approval.decided_by.as_deref().unwrap_or("the timeout");
        return Err(format!("This call was {} already, by {who}.", approval.status.as_str()));
    }
    let (status, action, verb) = match decision {
        Decision::Approve => (ApprovalStatus::Approved, Action::ToolApproved, "approved"),
        Decision::Deny => (ApprovalStatus::Denied, Action::ToolDenied, "denied"),
    };
    approval.status = status;
    approval.decided_by = decider.label();
    approval.decided_at = Some(at);
    let by = match &approval.decided_by {
        Some(who) => format!(" by {who}"),
        None => ": nobody answered in time".to_owned(),
    };
    let details = format!("Call of {} {verb}{by}.", approval.tool);
    let entry = NewActivity::for_task(action, &approval.task_id, details);
    Ok((approval, entry))
}

/// What the model is told of a denied call.
pub fn denied_result(decided_by: Option<&str>) -> ToolError {
    ToolError::Denied { by: decided_by.map(str::to_owned) }
}

/// The `custom_id` of a decision's button.
pub fn custom_id(decision: Decision, approval_id: &str) -> String {
    format!("approval:{decision}:{approval_id}")
}

/// The decision and approval of a button's `custom_id`.
pub fn parse_custom_id(custom_id: &str) -> Option<(Decision, &str)> {
    let rest = custom_id.strip_prefix("approval:")?;
    let (decision, id) = rest.split_once(':')?;
    let decision = match decision {
        "approve" => Decision::Approve,
        "deny" => Decision::Deny,
        _ => return None,
    };
    (!id.is_empty()).then_some((decision, id))
}

/// Characters of a call's arguments shown in the message.
const SHOWN_ARGUMENTS: usize = 1500;

fn arguments_block(arguments: &str) -> String {
    let pretty = serde_json::from_str::<serde_json::Value>(arguments)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|_| arguments.to_owned());
    let mut shown: String =
        pretty.replace("```", "`\u{200b}``").chars().take(SHOWN_ARGUMENTS).collect();
    if pretty.chars().count() > SHOWN_ARGUMENTS {
        shown.push('…');
    }
    format!("```json\n{shown}\n```")
}

/// The post asking for a decision: the tool, its arguments and the two buttons.
pub fn request_post(
    approval: &Approval,
    task_title: &str,
    arguments: &str,
    timeout_label: &str,
) -> NewPost {
    let embed = Embed {
        title: Some(format!("Approval needed: {}", approval.tool)),
        description: Some(format!(
            "Agent **{}** wants to call `{}` for the task \"{}\".\n{}\nUnanswered calls are \
             denied after {timeout_label}.",
            approval.agent_id,
            approval.tool,
            task_title.chars().take(200).collect::<String>(),
            arguments_block(arguments)
        )),
        color: Some(0xF1_C4_0F),
    };
    let mut body = MessageBody::new(None, Some(embed));
    body.components = vec![ActionRow::buttons(vec![
        Button::new(Button::SUCCESS, "Approve", custom_id(Decision::Approve, &approval.id)),
        Button::new(Button::DANGER, "Deny", custom_id(Decision::Deny, &approval.id)),
    ])];
    NewPost::new(body)
}

/// The same message once decided: who decided, no buttons.
pub fn decided_body(approval: &Approval) -> MessageBody {
    let outcome = match (approval.status, approval.decided_by.as_deref()) {
        (ApprovalStatus::Approved, Some(who)) => format!("Approved by {who}."),
        (ApprovalStatus::Approved, None) => "Approved.".to_owned(),
        (_, Some(who)) => format!("Denied by {who}."),
        (_, None) => "Denied: nobody answered in time.".to_owned(),
    };
    let embed = Embed {
        title: Some(format!("{}: {}", approval.tool, outcome.trim_end_matches('.'))),
        description: Some(format!(
            "Agent **{}**, task `{}`.\n{outcome}",
            approval.agent_id, approval.task_id
        )),
        color: Some(if approval.status == ApprovalStatus::Approved {
            0x2E_CC_71
        } else {
            0xE7_4C_3C
        }),
    };
    MessageBody::new(None, Some(embed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_tools_take_built_in_and_mcp_names_once() {
        let tools = ApprovalTools::parse(&["http_fetch", "files__write", "http_fetch"]).unwrap();
        assert_eq!(tools.names(), ["http_fetch", "files__write"]);
        assert!(ApprovalTools::parse(&["rm_rf"]).unwrap_err().contains("'rm_rf'"));
        assert!(ApprovalTools::parse(&["Bad__x"]).is_err());
        assert!(ApprovalTools::parse(&["files__"]).is_err());
        assert_eq!(ApprovalTools::from_json(&tools.to_json()), tools);
        assert!(needs_approval(tools.names(), "files__write"));
        assert!(!needs_approval(tools.names(), "memory"));
    }

    #[test]
    fn custom_ids_round_trip_and_refuse_others() {
        let id = custom_id(Decision::Deny, "0190-abc");
        assert_eq!(parse_custom_id(&id), Some((Decision::Deny, "0190-abc")));
        assert_eq!(parse_custom_id("approval:maybe:1"), None);
        assert_eq!(parse_custom_id("approval:approve:"), None);
        assert_eq!(parse_custom_id("other"), None);
    }

    #[test]
    fn a_denial_tells_the_model_who_or_that_time_ran_out() {
        let by_ana = denied_result(Some("ana (Discord)")).to_string();
        assert!(by_ana.starts_with("denied by ana (Discord)"), "{by_ana}");
        assert!(denied_result(None).to_string().contains("in time"));
    }

    #[test]
    fn arguments_are_shown_in_a_code_block_that_cannot_be_closed_early() {
        let block = arguments_block(r#"{"url": "```x"}"#);
        assert_eq!(block.matches("```").count(), 2, "{block}");
        assert!(arguments_block(&"x".repeat(5000)).ends_with("…\n```"));
    }

    fn pending() -> Approval {
        let at: DateTime<Utc> = "2026-11-27T08:00:00Z".parse().unwrap();
        Approval {
            id: "a1".into(),
            task_id: "t1".into(),
            agent_id: AgentId::parse("scout").unwrap(),
            tool: "http_fetch".into(),
            arguments: serde_json::json!({}),
            status: ApprovalStatus::Pending,
            decided_by: None,
            decided_at: None,
            expires_at: at,
            created_at: at,
            call_id: "c1".into(),
        }
    }

    #[test]
    fn a_decision_sets_who_and_when_and_says_so_in_the_activity() {
        let at: DateTime<Utc> = "2026-11-27T09:00:00Z".parse().unwrap();
        let member = Decider::Member("ada".into());
        let (approved, entry) = decide(pending(), Decision::Approve, &member, at).unwrap();
        assert_eq!(approved.status, ApprovalStatus::Approved);
        assert_eq!(approved.decided_by.as_deref(), Some("ada (Discord)"));
        assert_eq!(approved.decided_at, Some(at));
        assert_eq!(entry.action, Action::ToolApproved);
        assert_eq!(entry.task_id.as_deref(), Some("t1"));
        assert_eq!(entry.details, "Call of http_fetch approved by ada (Discord).");

        let (denied, entry) = decide(pending(), Decision::Deny, &Decider::Timeout, at).unwrap();
        assert_eq!((denied.status, denied.decided_by), (ApprovalStatus::Denied, None));
        assert_eq!(entry.action, Action::ToolDenied);
        assert_eq!(entry.details, "Call of http_fetch denied: nobody answered in time.");
    }

    #[test]
    fn a_decided_call_is_not_decided_again() {
        let at: DateTime<Utc> = "2026-11-27T09:00:00Z".parse().unwrap();
        let (approved, _) = decide(pending(), Decision::Approve, &Decider::Owner, at).unwrap();
        let again = decide(approved, Decision::Deny, &Decider::Owner, at).unwrap_err();
        assert_eq!(again, "This call was approved already, by the owner.");
        let (expired, _) = decide(pending(), Decision::Deny, &Decider::Timeout, at).unwrap();
        let late = decide(expired, Decision::Approve, &Decider::Owner, at).unwrap_err();
        assert_eq!(late, "This call was denied already, by the timeout.");
    }
}
