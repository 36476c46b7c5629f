//! Workspaces, members, invites and API keys: the request bodies and the lists.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::access::{
    self, ApiKey, Invite, NewInvite, NewKey, parse_key_name, parse_key_role,
};
use crate::domain::user::Email;
use crate::domain::workspace::{Member, Role, Workspace, WorkspaceName};
use crate::error::ValidationErrors;

use super::required;

/// The body of `POST /api/workspaces` and `PATCH /api/workspace`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkspaceRequest {
    /// 1 to 100 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 100)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl WorkspaceRequest {
    pub fn parse(&self) -> Result<WorkspaceName, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let name = required(&mut e, "name", &self.name)
            .and_then(|v| e.check("name", WorkspaceName::parse(v)));
        name.filter(|_| e.is_empty()).ok_or(e)
    }
}

/// The body of `PATCH /api/workspace/members/{user_id}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemberRequest {
    /// `owner`, `admin`, `member` or `viewer`.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

impl MemberRequest {
    pub fn parse(&self) -> Result<Role, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let role =
            required(&mut e, "role", &self.role).and_then(|v| e.check("role", Role::parse(v)));
        role.filter(|_| e.is_empty()).ok_or(e)
    }
}

/// The body of `POST /api/workspace/invites`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InviteRequest {
    /// The role the person who accepts gets: `owner` (by owners only), `admin`, `member` or
    /// `viewer`; no higher than the inviter's.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Whom it is for: a note for the admins (anyone holding the link can accept it).
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 254))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// How long it can be accepted: 1 to 720 hours (default 72).
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 1, maximum = 720))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_hours: Option<i64>,
}

impl InviteRequest {
    pub fn parse(&self) -> Result<NewInvite, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let role =
            required(&mut e, "role", &self.role).and_then(|v| e.check("role", Role::parse(v)));
        let email = self.email.as_deref().and_then(|v| e.check("email", Email::parse(v)));
        let hours = self.expires_in_hours.unwrap_or(access::INVITE_HOURS);
        if !(1..=access::MAX_INVITE_HOURS).contains(&hours) {
            e.add("expires_in_hours", format!("must be 1 to {}", access::MAX_INVITE_HOURS));
        }
        match role {
            Some(role) if e.is_empty() => {
                Ok(NewInvite { role, email, lasts: Duration::hours(hours) })
            }
            _ => Err(e),
        }
    }
}

/// The body of `POST /api/workspace/keys`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyRequest {
    /// What the key is for, 1 to 100 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 100)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `admin`, `member` or `viewer`; no higher than the creator's.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// When it stops working (RFC 3339, in the future); none: until revoked.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl KeyRequest {
    pub fn parse(&self) -> Result<NewKey, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let name =
            required(&mut e, "name", &self.name).and_then(|v| e.check("name", parse_key_name(v)));
        let role =
            required(&mut e, "role", &self.role).and_then(|v| e.check("role", parse_key_role(v)));
        if self.expires_at.is_some_and(|at| at <= crate::domain::now()) {
            e.add("expires_at", "must be in the future");
        }
        match (name, role) {
            (Some(name), Some(role)) if e.is_empty() => {
                Ok(NewKey { name, role, expires_at: self.expires_at })
            }
            _ => Err(e),
        }
    }
}

/// `{"workspaces": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkspaceList {
    pub workspaces: Vec<Workspace>,
}

/// `{"members": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemberList {
    pub members: Vec<Member>,
}

/// `{"invites": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InviteList {
    pub invites: Vec<Invite>,
}

/// `{"keys": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyList {
    pub keys: Vec<ApiKey>,
}

/// `GET /api/audit`'s query, as sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct AuditParams {
    /// Entries numbered below this (the `next_before` of the page before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    /// 1 to 500 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Only this action (`agent.updated`, `member.removed`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Only this actor's entries (a user id, a key id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Only entries about this kind of object (`agent`, `member`, `key`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_kind: Option<String>,
    /// Only entries about the object with this id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_id: Option<String>,
}

impl AuditParams {
    pub fn parse(&self) -> Result<crate::store::AuditFilter, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let limit = self.limit.unwrap_or(100);
        if !(1..=crate::domain::audit::MAX_PAGE).contains(&limit) {
            e.add("limit", format!("must be 1 to {}", crate::domain::audit::MAX_PAGE));
        }
        let text = |e: &mut ValidationErrors, field: &str, value: &Option<String>| {
            let value = value.as_deref().map(str::trim).filter(|v| !v.is_empty())?;
            if value.len() > 200 || value.contains('\0') {
                e.add(field, "must be at most 200 characters, without NUL");
                return None;
            }
            Some(value.to_owned())
        };
        let filter = crate::store::AuditFilter {
            before: self.before,
            after: None,
            action: text(&mut e, "action", &self.action),
            actor_id: text(&mut e, "actor", &self.actor),
            target_kind: text(&mut e, "target_kind", &self.target_kind),
            target_id: text(&mut e, "target_id", &self.target_id),
            limit,
        };
        if e.is_empty() { Ok(filter) } else { Err(e) }
    }
}
