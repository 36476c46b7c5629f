//! Ways into a workspace: invites (a single-use link with a role and an expiry) and API keys (a
//! workspace and a role for scripts, never tied to a person's sessions). Their secrets are shown
//! once and stored only as keyed hashes.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::workspace::Role;

/// What every API key starts with, so secret scanners (GitHub's, gitleaks) can find leaked ones.
pub const KEY_PREFIX: &str = "agk_";
/// How long an invite lasts unless asked otherwise, and at most.
pub const INVITE_HOURS: i64 = 72;
pub const MAX_INVITE_HOURS: i64 = 30 * 24;
/// Invites waiting for an answer per workspace, and keys not revoked per workspace.
pub const MAX_PENDING_INVITES: usize = 100;
pub const MAX_KEYS: usize = 100;
/// How long a key's name may be.
pub const MAX_KEY_NAME_CHARS: usize = 100;

/// An invite waiting for an answer, as admins see it (never its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Invite {
    pub id: String,
    /// The role the person who accepts it gets.
    pub role: Role,
    /// Whom it was meant for: a note for the admins; anyone holding the link can accept it.
    pub email: Option<String>,
    /// Who made it: an email, or `key:<name>`.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// An invite just made: the one time its token is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedInvite {
    #[serde(flatten)]
    pub invite: Invite,
    /// The secret to accept it with (`POST /api/invites/{token}/accept`, or the dashboard's
    /// `/invite/{token}`). Shown only now.
    pub token: String,
}

/// An API key as admins see it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiKey {
    pub id: String,
    /// The key's first characters (`agk_<id>`), to recognise it.
    pub prefix: String,
    pub name: String,
    pub role: Role,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl ApiKey {
    /// What the key's secret starts with: `agk_<id>`.
    pub fn prefix_of(id: &str) -> String {
        format!("{KEY_PREFIX}{id}")
    }

    /// Whether the key lets requests in at `at`.
    pub fn usable(&self, at: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|expires| expires > at)
    }
}

/// A key just made: the one time its secret is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedKey {
    #[serde(flatten)]
    pub key: ApiKey,
    /// The whole key, `agk_<id>_<secret>`: send it as `Authorization: Bearer <key>`. Shown only
    /// now.
    pub secret: String,
}

/// The parts of a presented key: its id and the whole text (which is what is hashed).
pub fn split_key(presented: &str) -> Option<&str> {
    let rest = presented.strip_prefix(KEY_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let ok = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    (ok(id, KEY_ID_CHARS) && ok(secret, 64)).then_some(id)
}

/// A key id's length in hex characters (64 random bits).
pub const KEY_ID_CHARS: usize = 16;

/// What an admin asks for when inviting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInvite {
    pub role: Role,
    pub email: Option<super::user::Email>,
    pub lasts: Duration,
}

/// What an admin asks for when making a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKey {
    pub name: String,
    pub role: Role,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A key's name: 1 to 100 characters, no control characters.
pub fn parse_key_name(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if super::text::char_len(value) > MAX_KEY_NAME_CHARS {
        return Err(format!("must be at most {MAX_KEY_NAME_CHARS} characters"));
    }
    if value.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    Ok(value.to_owned())
}

/// A key's role: any but owner (a key cannot own a workspace).
pub fn parse_key_role(value: &str) -> Result<Role, String> {
    match Role::parse(value)? {
        Role::Owner => Err("must be admin, member or viewer: a key cannot be an owner".into()),
        role => Ok(role),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_keys_split() {
        let id = "0123456789abcdef";
        let secret = "a".repeat(64);
        assert_eq!(split_key(&format!("agk_{id}_{secret}")), Some(id));
        assert_eq!(split_key(&format!("agk_{id}_{}", "a".repeat(63))), None);
        assert_eq!(split_key(&format!("agk_{}_{secret}", id.to_uppercase())), None);
        assert_eq!(split_key(&format!("xyz_{id}_{secret}")), None);
        assert_eq!(split_key("eyJhbGciOiJIUzI1NiJ9.e30.sig"), None);
    }

    #[test]
    fn a_key_is_usable_until_revoked_or_expired() {
        let now = crate::domain::now();
        let mut key = ApiKey {
            id: "k".into(),
            prefix: ApiKey::prefix_of("k"),
            name: "ci".into(),
            role: Role::Member,
            created_by: "ada@example.com".into(),
            created_at: now,
            expires_at: Some(now + Duration::hours(1)),
            last_used_at: None,
            revoked_at: None,
        };
        assert!(key.usable(now));
        assert!(!key.usable(now + Duration::hours(2)));
        key.expires_at = None;
        key.revoked_at = Some(now);
        assert!(!key.usable(now));
    }

    #[test]
    fn keys_cannot_own() {
        assert!(parse_key_role("owner").is_err());
        assert_eq!(parse_key_role("viewer"), Ok(Role::Viewer));
        assert!(parse_key_name("  ").is_err());
    }
}
