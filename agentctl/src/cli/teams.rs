//! The commands of workspaces and of who may act in them: members, invites and API keys.

use chrono::{DateTime, Utc};
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub(crate) enum WorkspacesCommand {
    /// Your workspaces, personal one first: id, name, your role, the plan
    List,
    /// A team workspace, with you as its owner
    Create { name: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum WorkspaceCommand {
    /// Act in this workspace (id or name) from now on, kept in the profile; naming your
    /// personal one clears the choice
    Use { workspace: String },
    /// The workspace commands act in now, and what chose it
    Current,
}

#[derive(Debug, Subcommand)]
pub(crate) enum MembersCommand {
    /// The members, in the order they joined
    List,
    /// Give a member (user id or e-mail) a role: owner, admin, member or viewer
    Role { member: String, role: String },
    /// Remove a member (user id or e-mail) from the workspace
    Remove { member: String },
    /// Leave the workspace yourself (its last owner cannot)
    Leave,
}

#[derive(Debug, Subcommand)]
pub(crate) enum InvitesCommand {
    /// Invites not yet accepted, expired ones included, newest first
    List,
    /// A single-use link to join with a role; its token is shown this once
    Create {
        /// owner, admin, member or viewer; no higher than yours
        #[arg(long)]
        role: String,
        /// Whom it is for: a note for the admins (anyone with the link can accept it)
        #[arg(long)]
        email: Option<String>,
        /// How long it can be accepted, 1 to 720 [default: 72]
        #[arg(long)]
        hours: Option<i64>,
    },
    /// Withdraw an invite: its link stops working
    Delete { id: String },
    /// Join a workspace with an invite's link (…/invite/<token>) or token
    Accept { invite: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum KeysCommand {
    /// The keys, revoked ones included, newest first
    List,
    /// A key for scripts (they send it as AGENTD_API_KEY); its secret is shown this once
    Create {
        /// What it is for
        name: String,
        /// admin, member or viewer; no higher than yours
        #[arg(long)]
        role: String,
        /// When it stops working, e.g. 2027-01-31T00:00:00Z [default: when revoked]
        #[arg(long, value_name = "RFC3339")]
        expires: Option<DateTime<Utc>>,
    },
    /// Revoke a key (its id, or its prefix agk_<id>): it is refused from now on
    Revoke { id: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AuditCommand {
    /// Entries, newest first (owners and admins)
    List {
        /// Only this action, e.g. agent.updated, member.removed
        #[arg(long)]
        action: Option<String>,
        /// Only this actor's entries (a user id or a key id)
        #[arg(long)]
        actor: Option<String>,
        /// Only entries about this kind of object: agent, member, key, ...
        #[arg(long)]
        target_kind: Option<String>,
        /// Only entries about the object with this id
        #[arg(long)]
        target_id: Option<String>,
        /// Entries per page, 1 to 500
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Entries numbered below this (the next page)
        #[arg(long)]
        before: Option<i64>,
    },
    /// The whole log as NDJSON, oldest first, to standard output
    Export,
    /// Check the chain of hashes here, from the server's export or a file `export` wrote;
    /// exits 5 when an entry was edited or removed, or the chain ends before `--head`
    Verify {
        /// An NDJSON file written by `audit export` [default: the server's log, read now]
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// A `last_hash` an earlier verification printed: the log must still contain it
        #[arg(long)]
        head: Option<String>,
    },
}
