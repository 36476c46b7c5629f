//! Workspaces: who owns agents and everything around them, and what each member may do there.
//!
//! Every row that belonged to a person belongs to a workspace. A user's personal workspace has
//! the user's own id, so a user with one workspace sees no difference; a team's workspace has
//! an id of its own. A member holds one [`Role`]; what a request may do is the caller's role
//! checked against the [`Need`] of the operation.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::text;
use super::user::UserId;

/// Team workspaces one person may own (their personal one aside).
pub const MAX_OWNED_WORKSPACES: i64 = 20;
/// Members of one workspace, with the invites waiting for an answer counted as members.
pub const MAX_MEMBERS: usize = 1_000;

/// A workspace's id: a UUID in its hyphenated text form (a personal workspace's is its user's).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct WorkspaceId(String);

impl WorkspaceId {
    pub(crate) fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }

    /// The personal workspace of `user`.
    pub fn personal(user: &UserId) -> Self {
        Self(user.as_str().to_owned())
    }

    /// Accepts only the canonical form ids are issued in.
    pub fn parse(value: &str) -> Result<Self, String> {
        match uuid::Uuid::try_parse(value) {
            Ok(id) if id.hyphenated().to_string() == value => Ok(Self(value.to_owned())),
            _ => Err("must be a workspace id".into()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn from_trusted(value: String) -> Self {
        Self(value)
    }
}

impl fmt::Display for WorkspaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A workspace's name: 1 to 100 characters, trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceName(String);

impl WorkspaceName {
    pub const MAX_CHARS: usize = 100;

    pub fn parse(value: &str) -> Result<Self, String> {
        let value = value.trim();
        if value.is_empty() {
            return Err("must not be empty".into());
        }
        if text::char_len(value) > Self::MAX_CHARS {
            return Err(format!("must be at most {} characters", Self::MAX_CHARS));
        }
        if value.chars().any(char::is_control) {
            return Err("must not contain control characters".into());
        }
        Ok(Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A member's role, from most to least trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything, including deleting the workspace and making other owners.
    Owner,
    /// Members, invites, API keys, billing, budgets, Discord connections and MCP servers.
    Admin,
    /// Agents, tasks, schedules, approvals, channel mappings and messages.
    Member,
    /// Reads everything a member reads; changes nothing.
    Viewer,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Owner, Role::Admin, Role::Member, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(value: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|role| role.as_str() == value)
            .ok_or_else(|| "must be one of: owner, admin, member, viewer".to_string())
    }

    /// Higher is more trusted.
    fn rank(self) -> u8 {
        match self {
            Role::Owner => 3,
            Role::Admin => 2,
            Role::Member => 1,
            Role::Viewer => 0,
        }
    }

    /// Whether this role grants at least what `other` does.
    pub fn includes(self, other: Role) -> bool {
        self.rank() >= other.rank()
    }

    /// Whether a caller with this role may do what `need` asks.
    pub fn allows(self, need: Need) -> bool {
        self.includes(need.role())
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an operation asks of the caller's role in the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Reading anything in the workspace.
    Read,
    /// Working with agents: agents, tasks, schedules, approvals, memory, mappings, messages.
    Work,
    /// Running the workspace: members, invites, keys, billing, budgets, connections, MCP servers.
    Manage,
    /// What only an owner does: owners, and the workspace itself.
    Own,
}

impl Need {
    fn role(self) -> Role {
        match self {
            Need::Read => Role::Viewer,
            Need::Work => Role::Member,
            Need::Manage => Role::Admin,
            Need::Own => Role::Owner,
        }
    }

    /// The words of the refusal when a role falls short.
    pub fn refusal(self) -> String {
        match self {
            Need::Read => "you are not a member of this workspace".into(),
            Need::Work => "a viewer cannot change anything in this workspace".into(),
            Need::Manage => "only an owner or an admin of this workspace can do this".into(),
            Need::Own => "only an owner of this workspace can do this".into(),
        }
    }
}

/// A workspace as its members see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Workspace {
    pub id: WorkspaceId,
    pub name: String,
    /// Whether this is the caller's personal workspace (the one used when none is named).
    pub personal: bool,
    /// The caller's role here.
    pub role: Role,
    /// The billing plan, which limits the workspace's agents.
    pub plan: String,
    pub created_at: DateTime<Utc>,
}

/// One member of a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Member {
    pub user_id: UserId,
    pub email: String,
    pub name: String,
    pub role: Role,
    pub joined_at: DateTime<Utc>,
}

/// Who acts: a signed-in user, or an API key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Actor {
    User {
        id: UserId,
    },
    Key {
        id: String,
        name: String,
    },
    /// A member of a connected Discord server, through a slash command or a button.
    Discord {
        id: String,
        name: String,
    },
    /// The service itself (a schedule, the runtime, a decision's follow-up).
    Service,
}

impl Actor {
    /// What kind of actor it is (`user`, `key`, `discord`, `service`) and its id in that kind.
    pub fn kind_and_id(&self) -> (&'static str, String) {
        match self {
            Actor::User { id } => ("user", id.to_string()),
            Actor::Key { id, .. } => ("key", id.clone()),
            Actor::Discord { id, .. } => ("discord", id.clone()),
            Actor::Service => ("service", "service".to_owned()),
        }
    }

    /// The user behind the request, if a person makes it.
    pub fn user(&self) -> Option<&UserId> {
        match self {
            Actor::User { id } => Some(id),
            Actor::Key { .. } | Actor::Discord { .. } | Actor::Service => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_nest() {
        assert!(Role::Owner.allows(Need::Own));
        assert!(!Role::Admin.allows(Need::Own));
        assert!(Role::Admin.allows(Need::Manage));
        assert!(!Role::Member.allows(Need::Manage));
        assert!(Role::Member.allows(Need::Work));
        assert!(!Role::Viewer.allows(Need::Work));
        assert!(Role::Viewer.allows(Need::Read));
        assert!(Role::Admin.includes(Role::Member) && !Role::Member.includes(Role::Admin));
    }

    #[test]
    fn roles_read_as_written() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Ok(role));
        }
        assert!(Role::parse("Owner").is_err());
    }

    #[test]
    fn names_are_bounded() {
        assert_eq!(WorkspaceName::parse("  Ops  ").unwrap().as_str(), "Ops");
        assert!(WorkspaceName::parse(" ").is_err());
        assert!(WorkspaceName::parse(&"x".repeat(101)).is_err());
        assert!(WorkspaceName::parse("a\u{7}b").is_err());
    }
}
