//! `agentctl workspaces`, `workspace`, `members`, `invites` and `keys`: the workspaces a person
//! belongs to, which one commands act in (`--workspace`, else the profile's choice), and who
//! may act there. Names (a workspace's, a member's e-mail) are looked up in the service's
//! lists; what may be done is the service's to say.

use agentcore::api::{InviteRequest, KeyRequest, MemberRequest, WorkspaceRequest};
use agentcore::domain::workspace::{Workspace, WorkspaceId};

use super::Context;
use crate::cli::{
    Command, InvitesCommand, KeysCommand, MembersCommand, Output, WorkspaceCommand,
    WorkspacesCommand,
};
use crate::client::{Client, segment};
use crate::failure::Failure;
use crate::render::InviteLink;

/// The environment variable whose API key, when set, is sent instead of the profile's login.
pub(super) const API_KEY_VARIABLE: &str = "AGENTD_API_KEY";

/// The API key a script gives in the environment, if any.
pub(super) fn api_key() -> Option<String> {
    let key = std::env::var(API_KEY_VARIABLE).ok()?;
    let key = key.trim();
    (!key.is_empty()).then(|| key.to_owned())
}

/// Whether the command acts in a workspace (sends `X-Workspace`), rather than as the person:
/// the account, the list of workspaces, choosing one, accepting an invite.
fn acts_in_workspace(command: &Command) -> bool {
    !matches!(
        command,
        Command::Register { .. }
            | Command::Login { .. }
            | Command::Logout
            | Command::Whoami
            | Command::Workspaces { .. }
            | Command::Workspace(WorkspaceCommand::Use { .. })
            | Command::Invites { command: Some(InvitesCommand::Accept { .. }) }
            | Command::Completions { .. }
            | Command::Run
    )
}

impl Context {
    /// The id of the workspace `command` acts in: `--workspace`'s (a name looked up), else the
    /// profile's choice (not with an API key, which acts in its own); `None`: the personal one.
    pub(super) async fn workspace_for(
        &self,
        client: &Client,
        command: &Command,
    ) -> Result<Option<String>, Failure> {
        if !acts_in_workspace(command) || client.token.is_none() {
            return Ok(None);
        }
        match &self.global.workspace {
            Some(given) if WorkspaceId::parse(given).is_ok() => Ok(Some(given.clone())),
            Some(given) => Ok(Some(find(client, given).await?.0.id.to_string())),
            None if api_key().is_some() => Ok(None),
            None => Ok(self.profile.as_ref().and_then(|p| p.workspace.clone())),
        }
    }

    /// What chose the workspace commands act in, for `workspace current`.
    fn chosen_by(&self) -> String {
        if self.global.workspace.is_some() {
            "Chosen by --workspace (or AGENTCTL_WORKSPACE).".to_owned()
        } else if api_key().is_some() {
            format!("The API key's own workspace ({API_KEY_VARIABLE}).")
        } else if self.profile.as_ref().is_some_and(|p| p.workspace.is_some()) {
            format!(
                "Chosen with `agentctl workspace use`, kept in profile '{}'.",
                self.global.profile
            )
        } else {
            "Your personal workspace: none is chosen.".to_owned()
        }
    }

    /// Where a person opens an invite: the dashboard's `/invite/<token>` on the server.
    fn invite_link(&self, token: &str) -> String {
        let path = format!("/invite/{}", segment(token));
        if self.is_local() {
            format!("{path} on the dashboard's address")
        } else {
            format!("{}{path}", self.server().trim_end_matches('/'))
        }
    }
}

/// The caller's workspace with `given` as its id, else as its name (exactly, else ignoring
/// case), with its JSON as listed.
async fn find(client: &Client, given: &str) -> Result<(Workspace, String), Failure> {
    let listed = client.workspaces().await?;
    let all = &listed.body.workspaces;
    let named = |same: &dyn Fn(&str) -> bool| -> Vec<usize> {
        (0..all.len()).filter(|&i| same(&all[i].name)).collect()
    };
    let exact = named(&|name| name == given);
    let folded = named(&|name| name.to_lowercase() == given.to_lowercase());
    let index = match all.iter().position(|w| w.id.as_str() == given) {
        Some(index) => index,
        None => match (exact.as_slice(), folded.as_slice()) {
            ([index], _) | ([], [index]) => *index,
            ([], []) => {
                return Err(Failure::not_found(format!(
                    "none of your workspaces has the id or name '{given}'; `agentctl workspaces` \
                     lists them"
                )));
            }
            _ => {
                return Err(Failure::usage(format!(
                    "more than one of your workspaces is named '{given}': give its id \
                     (`agentctl workspaces` lists them)"
                )));
            }
        },
    };
    Ok((all[index].clone(), listed.answer.value["workspaces"][index].to_string()))
}

pub(super) async fn workspaces(
    cx: &Context,
    client: &Client,
    command: Option<WorkspacesCommand>,
) -> Result<(), Failure> {
    match command.unwrap_or(WorkspacesCommand::List) {
        WorkspacesCommand::List => cx.emit(&client.workspaces().await?),
        WorkspacesCommand::Create { name } => {
            let created = client.create_workspace(&WorkspaceRequest { name: Some(name) }).await?;
            cx.emit(&created)?;
            eprintln!(
                "Act in it with --workspace {0}, or from now on with `agentctl workspace use {0}`.",
                created.body.id
            );
            Ok(())
        }
    }
}

pub(super) async fn workspace(
    cx: &mut Context,
    client: &Client,
    command: WorkspaceCommand,
) -> Result<(), Failure> {
    match command {
        WorkspaceCommand::Use { workspace } => choose(cx, client, &workspace).await,
        WorkspaceCommand::Current => {
            cx.emit(&client.current_workspace().await?)?;
            eprintln!("{}", cx.chosen_by());
            Ok(())
        }
    }
}

/// `workspace use`: keeps the workspace's id in the profile (the personal one: none).
async fn choose(cx: &mut Context, client: &Client, given: &str) -> Result<(), Failure> {
    if api_key().is_some() {
        return Err(Failure::usage(format!(
            "{API_KEY_VARIABLE} is set, and a key acts in its own workspace only; unset it to \
             choose the workspace of the profile's login"
        )));
    }
    let Some(mut profile) = cx.profile.clone() else {
        return Err(Failure::auth(format!(
            "profile '{}' is not logged in: run `agentctl login` first",
            cx.global.profile
        )));
    };
    let (chosen, raw) = find(client, given).await?;
    profile.workspace = (!chosen.personal).then(|| chosen.id.to_string());
    cx.profiles.save(&cx.global.profile, &profile)?;
    cx.profile = Some(profile);
    cx.show(&raw, &chosen)?;
    if chosen.personal {
        eprintln!("Commands act in your personal workspace again.");
    } else {
        eprintln!(
            "Commands act in '{}' from now on (profile '{}').",
            chosen.name, cx.global.profile
        );
    }
    Ok(())
}

pub(super) async fn members(
    cx: &mut Context,
    client: &Client,
    command: Option<MembersCommand>,
) -> Result<(), Failure> {
    match command.unwrap_or(MembersCommand::List) {
        MembersCommand::List => cx.emit(&client.members().await?),
        MembersCommand::Role { member, role } => {
            let user = member_id(client, &member).await?;
            let request = MemberRequest { role: Some(role) };
            cx.emit(&client.set_member_role(&user, &request).await?)
        }
        MembersCommand::Remove { member } => {
            let user = member_id(client, &member).await?;
            cx.confirm(&format!(
                "Remove {member} from the workspace? Only a new invite brings them back."
            ))?;
            cx.emit(&client.remove_member(&user).await?)
        }
        MembersCommand::Leave => leave(cx, client).await,
    }
}

/// The user id of the member `given` names: their id, or their e-mail (ignoring case).
async fn member_id(client: &Client, given: &str) -> Result<String, Failure> {
    let members = client.members().await?.body.members;
    members
        .iter()
        .find(|m| m.user_id.as_str() == given || m.email.eq_ignore_ascii_case(given))
        .map(|m| m.user_id.to_string())
        .ok_or_else(|| {
            Failure::not_found(format!(
                "no member of this workspace has the id or e-mail '{given}'; `agentctl members` \
                 lists them"
            ))
        })
}

/// `members leave`: removes the caller; a profile that chose the workspace forgets it.
async fn leave(cx: &mut Context, client: &Client) -> Result<(), Failure> {
    let me = client.me().await?.body;
    let here = client.current_workspace().await?.body;
    cx.confirm(&format!("Leave workspace '{}'? Only a new invite brings you back.", here.name))?;
    let left = client.remove_member(me.id.as_str()).await?;
    let chose_it = |p: &crate::profile::Profile| p.workspace.as_deref() == Some(here.id.as_str());
    if let Some(mut profile) = cx.profile.clone().filter(chose_it) {
        profile.workspace = None;
        cx.profiles.save(&cx.global.profile, &profile)?;
        cx.profile = Some(profile);
        eprintln!("Commands act in your personal workspace again.");
    }
    cx.emit(&left)
}

pub(super) async fn invites(
    cx: &Context,
    client: &Client,
    command: Option<InvitesCommand>,
) -> Result<(), Failure> {
    match command.unwrap_or(InvitesCommand::List) {
        InvitesCommand::List => cx.emit(&client.invites().await?),
        InvitesCommand::Create { role, email, hours } => {
            let request = InviteRequest { role: Some(role), email, expires_in_hours: hours };
            let created = client.create_invite(&request).await?;
            let link = cx.invite_link(&created.body.token);
            let invite = &created.body.invite;
            cx.show(
                &created.answer.raw,
                &InviteLink { invite: &created.body, link: link.clone() },
            )?;
            if cx.global.output == Output::Json {
                eprintln!("Link: {link}");
            }
            eprintln!(
                "The token is shown only this once. Anyone with the link can join as {} until {}.",
                invite.role.as_str(),
                invite.expires_at.format("%Y-%m-%d %H:%M UTC")
            );
            Ok(())
        }
        InvitesCommand::Delete { id } => cx.emit(&client.delete_invite(&id).await?),
        InvitesCommand::Accept { invite } => {
            let joined = client.accept_invite(&invite_token(&invite)?).await?;
            cx.emit(&joined)?;
            eprintln!(
                "You joined '{}' as {}: act in it with --workspace, or from now on with \
                 `agentctl workspace use`.",
                joined.body.name,
                joined.body.role.as_str()
            );
            Ok(())
        }
    }
}

/// The token of an invite's link (`…/invite/<token>`), or the token given as it is.
fn invite_token(given: &str) -> Result<String, Failure> {
    let given = given.trim();
    let token = match given.rsplit_once("/invite/") {
        Some((_, rest)) => rest.split(['?', '#', '/']).next().unwrap_or_default(),
        None => given,
    };
    if token.is_empty() {
        return Err(Failure::usage(format!("no invite token in '{given}'")));
    }
    Ok(token.to_owned())
}

pub(super) async fn keys(
    cx: &Context,
    client: &Client,
    command: Option<KeysCommand>,
) -> Result<(), Failure> {
    match command.unwrap_or(KeysCommand::List) {
        KeysCommand::List => cx.emit(&client.keys().await?),
        KeysCommand::Create { name, role, expires } => {
            let request = KeyRequest { name: Some(name), role: Some(role), expires_at: expires };
            cx.emit(&client.create_key(&request).await?)?;
            eprintln!(
                "The secret is shown only this once: keep it now. Scripts send it as \
                 {API_KEY_VARIABLE}."
            );
            Ok(())
        }
        KeysCommand::Revoke { id } => {
            // The prefix `agk_<id>` the list shows names the key too.
            let id = id.strip_prefix("agk_").and_then(|rest| rest.split('_').next()).unwrap_or(&id);
            cx.confirm(&format!("Revoke key {id}? Requests with it are refused from now on."))?;
            cx.emit(&client.revoke_key(id).await?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::invite_token;

    #[test]
    fn an_invite_is_accepted_by_its_link_or_its_token() {
        let token = |given: &str| invite_token(given).unwrap();
        assert_eq!(token("abc123"), "abc123");
        assert_eq!(token(" https://agents.example.com/invite/abc123 "), "abc123");
        assert_eq!(token("/invite/abc123?from=mail#top"), "abc123");
        assert!(invite_token("https://agents.example.com/invite/").is_err());
    }
}
