//! Workspaces and who may act in them: the workspaces, members, invites and API keys, and the
//! one-time answers that carry an invite's token or a key's secret.

use agentcore::api::{InviteList, KeyList, MemberList, WorkspaceList};
use agentcore::domain::access::{CreatedInvite, CreatedKey};

use super::{Render, Screen, cell, flat, rows};

impl Render for WorkspaceList {
    fn render(&self, screen: Screen) -> String {
        let headers = ["ID", "NAME", "ROLE", "PERSONAL", "PLAN"];
        rows(screen, &self.workspaces, headers, |workspace| {
            [
                cell(&workspace.id),
                workspace.name.clone(),
                cell(&workspace.role),
                workspace.personal.to_string(),
                workspace.plan.clone(),
            ]
        })
    }
}

impl Render for MemberList {
    fn render(&self, screen: Screen) -> String {
        rows(screen, &self.members, ["USER", "EMAIL", "NAME", "ROLE", "JOINED"], |member| {
            [
                cell(&member.user_id),
                member.email.clone(),
                member.name.clone(),
                cell(&member.role),
                cell(&member.joined_at),
            ]
        })
    }
}

impl Render for InviteList {
    fn render(&self, screen: Screen) -> String {
        let headers = ["ID", "ROLE", "EMAIL", "CREATED BY", "CREATED", "EXPIRES"];
        rows(screen, &self.invites, headers, |invite| {
            [
                invite.id.clone(),
                cell(&invite.role),
                cell(&invite.email),
                invite.created_by.clone(),
                cell(&invite.created_at),
                cell(&invite.expires_at),
            ]
        })
    }
}

impl Render for KeyList {
    fn render(&self, screen: Screen) -> String {
        let headers = ["ID", "NAME", "ROLE", "CREATED BY", "EXPIRES", "LAST USED", "REVOKED"];
        rows(screen, &self.keys, headers, |key| {
            [
                key.id.clone(),
                key.name.clone(),
                cell(&key.role),
                key.created_by.clone(),
                cell(&key.expires_at),
                cell(&key.last_used_at),
                cell(&key.revoked_at),
            ]
        })
    }
}

/// A new invite, its token and the link to share (the dashboard's `/invite/<token>`).
pub(crate) struct InviteLink<'a> {
    pub invite: &'a CreatedInvite,
    pub link: String,
}

impl Render for InviteLink<'_> {
    fn render(&self, screen: Screen) -> String {
        format!(
            "{}\nToken: {}\nLink: {}",
            flat(screen, &self.invite.invite),
            self.invite.token,
            self.link
        )
    }
}

/// A new key and its secret.
impl Render for CreatedKey {
    fn render(&self, screen: Screen) -> String {
        format!("{}\nSecret: {}", flat(screen, &self.key), self.secret)
    }
}

impl Render for agentcore::AuditPage {
    fn render(&self, screen: Screen) -> String {
        let headers = ["SEQ", "AT", "ACTOR", "ACTION", "TARGET", "ADDRESS"];
        rows(screen, &self.entries, headers, |entry| {
            [
                entry.seq.to_string(),
                cell(&entry.at),
                entry.actor_label.clone(),
                entry.action.clone(),
                format!("{} {}", entry.target_kind, entry.target_id),
                entry.address.clone().unwrap_or_else(|| "-".into()),
            ]
        })
    }
}

impl Render for agentcore::domain::audit::Verified {
    fn render(&self, screen: Screen) -> String {
        flat(screen, self)
    }
}
