//! Confirmation before every destructive action, without JavaScript: a destructive button is a
//! link to its action's own address, where a GET shows what will be lost (with counts) and a
//! POST form to that same address, carrying the CSRF token, with a link back that keeps
//! everything. The POST is the action as before; it answers with a message (`flash.rs`).
//!
//! The same GET handlers answer a GET on the non-destructive commands that share these
//! addresses (start, approve, a role change, ...): nothing is done, and the browser is sent to
//! the page the button lives on, so a reload or a shared link never repeats an action.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use minijinja::context;
use serde::{Deserialize, Serialize};

use agentcore::{Error, Principal, Resource};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{guild_id, invite_id, key_id, member_id, schedule_id};
use crate::ui::session::{Csrf, Viewer};

use super::{Shown, agent_id, agent_url, fail, see, signed_in, task_id};

/// What a confirmation page asks.
#[derive(Debug, Default, Serialize)]
pub(super) struct Ask {
    /// The question, as the page's heading.
    pub(super) title: String,
    /// What happens, in a sentence.
    pub(super) intro: String,
    /// What will be lost, a line each.
    pub(super) lost: Vec<String>,
    /// The address the confirming form posts to (the action's own).
    pub(super) action: String,
    /// The confirming button's words.
    pub(super) button: String,
    /// Where "keep" goes back to, and its words.
    pub(super) back: String,
    pub(super) keep: String,
    /// Hidden fields the action needs besides the CSRF token.
    pub(super) hidden: BTreeMap<String, String>,
}

pub(super) async fn ask(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    nav: &str,
    ask: Ask,
) -> Shown {
    let keep = if ask.keep.is_empty() { "Cancel".to_owned() } else { ask.keep.clone() };
    signed_in(state, who, "confirm.html", context! { csrf => csrf.0, nav, ask, keep }).await
}

/// `n` things, in words: "1 task", "3 tasks".
fn count(n: impl Into<i64>, one: &str, many: &str) -> String {
    match n.into() {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
}

/// `GET /agents/{id}/do/{command}`: deleting asks; start, stop and vacation go to the page.
pub(crate) async fn agent_command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((id, command)): Path<(String, String)>,
) -> Shown {
    let id = agent_id(&id)?;
    match command.as_str() {
        "delete" => {}
        "start" | "stop" | "vacation" => return see(&agent_url(&id)),
        _ => return Err(fail(ApiError::RouteNotFound)),
    }
    let core = &state.core;
    // The counts only: one finished task read, not the agent's whole history.
    let agent = core.agent_page(&who, &id, 1, None).await.map_err(fail)?.agent;
    let b = &agent.backlog_summary;
    let tasks =
        b.queued + b.in_progress + b.awaiting_approval + b.complete + b.failed + b.cancelled;
    let schedules = core.schedules(&who, &id).await.map_err(fail)?.schedules.len();
    let memory = core.memory(&who, &id).await.map_err(fail)?.chars;
    let mapping = core.mappings(&who).await.map_err(fail)?.into_iter().find(|m| m.agent_id == id);
    let mut lost = vec![format!(
        "{} in its backlog ({} queued, {} running, {} done, {} failed, {} cancelled), with \
         their results and steps",
        count(tasks, "task", "tasks"),
        b.queued + b.awaiting_approval,
        b.in_progress,
        b.complete,
        b.failed,
        b.cancelled
    )];
    lost.push("its whole activity log".into());
    if schedules > 0 {
        lost.push(count(schedules as i64, "schedule", "schedules"));
    }
    if memory > 0 {
        lost.push(format!("its memory ({})", count(memory as i64, "character", "characters")));
    }
    if let Some(mapping) = mapping {
        lost.push(format!("its Discord channel mapping (#{})", mapping.channel_name));
    }
    let page = Ask {
        title: format!("Delete the agent {} ({id})?", agent.name),
        intro: "This cannot be undone. It removes the agent and:".into(),
        lost,
        action: format!("/agents/{id}/do/delete"),
        button: "Delete the agent".into(),
        back: agent_url(&id),
        ..Ask::default()
    };
    ask(&state, &who, &csrf, "agents", page).await
}

/// Where a task's button was: its own page (`to=task`) or the agent's backlog.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Origin {
    to: Option<String>,
}

/// `GET /agents/{id}/tasks/{task_id}/{command}`: deleting and cancelling ask; retry, approve
/// and deny go to the task's page.
pub(crate) async fn task_command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((id, task, command)): Path<(String, String, String)>,
    Query(from): Query<Origin>,
) -> Shown {
    let (id, task_id) = (agent_id(&id)?, task_id(&task)?);
    let task_url = format!("{}/tasks/{task_id}", agent_url(&id));
    if matches!(command.as_str(), "retry" | "approve" | "deny") {
        return see(&task_url);
    }
    let task = state.core.task(&who, &id, &task_id).await.map_err(fail)?;
    let on_task_page = from.to.as_deref() == Some("task");
    let back = if on_task_page { task_url.clone() } else { format!("{}#backlog", agent_url(&id)) };
    let mut hidden = BTreeMap::new();
    if on_task_page && command == "cancel" {
        hidden.insert("to".to_owned(), "task".to_owned());
    }
    let page = match command.as_str() {
        "delete" => {
            let mut lost = vec![format!("the task, {}", task.status)];
            if task.result.is_some() || task.error.is_some() {
                lost.push("its result".into());
            }
            if task.steps > 0 {
                lost.push(format!("its {}", count(task.steps, "step", "steps")));
            }
            Ask {
                title: format!("Delete the task “{}”?", task.title),
                intro: "This cannot be undone. It removes:".into(),
                lost,
                button: "Delete the task".into(),
                ..Ask::default()
            }
        }
        "cancel" => Ask {
            title: format!("Cancel the task “{}”?", task.title),
            intro: format!(
                "It is {} now; it stops {}and stays in the backlog as cancelled, with what it \
                 did so far.",
                task.status,
                if task.status.as_str() == "in_progress" { "after its current step " } else { "" }
            ),
            button: "Cancel the task".into(),
            keep: "Keep the task".into(),
            ..Ask::default()
        },
        _ => return Err(fail(ApiError::RouteNotFound)),
    };
    let action = format!("{task_url}/{command}");
    ask(&state, &who, &csrf, "agents", Ask { action, back, hidden, ..page }).await
}

/// `GET /agents/{id}/schedules/{schedule_id}/{command}`: deleting asks; enable and disable go
/// to the agent's schedules.
pub(crate) async fn schedule_command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((id, schedule, command)): Path<(String, String, String)>,
) -> Shown {
    let id = agent_id(&id)?;
    let back = format!("{}#schedules", agent_url(&id));
    match command.as_str() {
        "delete" => {}
        "enable" | "disable" => return see(&back),
        _ => return Err(fail(ApiError::RouteNotFound)),
    }
    let schedule_id = schedule_id(&schedule).map_err(fail)?;
    let schedule = state.core.schedule(&who, &id, &schedule_id).await.map_err(fail)?;
    let page = Ask {
        title: format!("Delete the schedule “{}”?", schedule.title),
        intro: format!(
            "It stops queueing tasks ({} in {}). The tasks it queued already stay.",
            schedule.cron, schedule.timezone
        ),
        action: format!("{}/schedules/{schedule_id}/delete", agent_url(&id)),
        button: "Delete the schedule".into(),
        back,
        ..Ask::default()
    };
    ask(&state, &who, &csrf, "agents", page).await
}

/// `GET /team/members/{user_id}/{command}`: removing a member, or leaving, asks; a role change
/// goes to the team page.
pub(crate) async fn member_command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((user, command)): Path<(String, String)>,
) -> Shown {
    match command.as_str() {
        "remove" => {}
        "role" => return see("/team"),
        _ => return Err(fail(ApiError::RouteNotFound)),
    }
    let user = member_id(&user).map_err(fail)?;
    let members = state.core.members(&who).await.map_err(fail)?;
    let member = members
        .into_iter()
        .find(|m| m.user_id == user)
        .ok_or_else(|| fail(Error::not_found(Resource::Member, user.to_string())))?;
    let leaving = who.actor.user() == Some(&user);
    let page = if leaving {
        Ask {
            title: "Leave this workspace?".into(),
            intro: "You lose access to its agents, tasks and keys until someone invites you \
                    again; what you made stays with the workspace."
                .into(),
            button: "Leave the workspace".into(),
            ..Ask::default()
        }
    } else {
        Ask {
            title: format!("Remove {} ({}) from this workspace?", member.name, member.email),
            intro: format!(
                "They lose their {} access to its agents, tasks and keys; what they made stays.",
                member.role.as_str()
            ),
            button: "Remove the member".into(),
            ..Ask::default()
        }
    };
    let action = format!("/team/members/{user}/remove");
    ask(&state, &who, &csrf, "team", Ask { action, back: "/team".into(), ..page }).await
}

/// `GET /team/invites/{id}/withdraw`.
pub(crate) async fn withdraw_invite(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(id): Path<String>,
) -> Shown {
    let id = invite_id(&id).map_err(fail)?;
    let invites = state.core.invites(&who).await.map_err(fail)?;
    let invite = invites
        .into_iter()
        .find(|i| i.id == id)
        .ok_or_else(|| fail(Error::not_found(Resource::Invite, id.clone())))?;
    let whom = invite.email.clone().unwrap_or_else(|| "anyone with the link".into());
    let page = Ask {
        title: format!("Withdraw the invite for {whom}?"),
        intro: format!(
            "Its link, as {}, stops working; you can make a new one later.",
            invite.role.as_str()
        ),
        action: format!("/team/invites/{id}/withdraw"),
        button: "Withdraw the invite".into(),
        back: "/team".into(),
        ..Ask::default()
    };
    ask(&state, &who, &csrf, "team", page).await
}

/// `GET /team/keys/{id}/revoke`.
pub(crate) async fn revoke_key(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(id): Path<String>,
) -> Shown {
    let id = key_id(&id).map_err(fail)?;
    let keys = state.core.keys(&who).await.map_err(fail)?;
    let key = keys
        .into_iter()
        .find(|k| k.id == id)
        .ok_or_else(|| fail(Error::not_found(Resource::ApiKey, id.clone())))?;
    let used = key.last_used_at.map_or("never used".to_owned(), |at| {
        format!("last used {}", at.format("%Y-%m-%d %H:%M UTC"))
    });
    let page = Ask {
        title: format!("Revoke the key {} ({}_…)?", key.name, key.prefix),
        intro: format!(
            "Every program using it ({used}) is refused from now on. This cannot be undone."
        ),
        action: format!("/team/keys/{id}/revoke"),
        button: "Revoke the key".into(),
        back: "/team".into(),
        ..Ask::default()
    };
    ask(&state, &who, &csrf, "team", page).await
}

/// `GET /discord/{guild_id}/{command}`: disconnecting asks; map and test go to the guild's
/// page.
pub(crate) async fn guild_command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((guild, command)): Path<(String, String)>,
) -> Shown {
    let guild = guild_id(&guild).map_err(fail)?;
    match command.as_str() {
        "disconnect" => {}
        "map" | "test" => return see(&format!("/discord/{guild}")),
        _ => return Err(fail(ApiError::RouteNotFound)),
    }
    let connection = state
        .core
        .connections(&who)
        .await
        .map_err(fail)?
        .into_iter()
        .find(|c| c.guild_id == guild.as_str())
        .ok_or_else(|| fail(Error::not_found(Resource::Connection, guild.as_str())))?;
    let mapped: Vec<String> = state
        .core
        .mappings(&who)
        .await
        .map_err(fail)?
        .into_iter()
        .filter(|m| m.guild_id == guild.as_str())
        .map(|m| format!("{} to #{}", m.agent_id, m.channel_name))
        .collect();
    let mut lost = vec![format!(
        "{}{}: those agents stop posting to Discord",
        count(mapped.len() as i64, "channel mapping", "channel mappings"),
        if mapped.is_empty() { String::new() } else { format!(" ({})", mapped.join(", ")) }
    )];
    lost.push("the bot's access from this service (add it again to reconnect)".into());
    let page = Ask {
        title: format!("Disconnect {}?", connection.guild_name),
        intro: "This removes:".into(),
        lost,
        action: format!("/discord/{guild}/disconnect"),
        button: "Disconnect".into(),
        back: format!("/discord/{guild}"),
        ..Ask::default()
    };
    ask(&state, &who, &csrf, "discord", page).await
}

/// The agent to unmap, and the Discord page the button was on.
#[derive(Debug, Deserialize)]
pub(crate) struct Unmap {
    agent_id: Option<String>,
    back: Option<String>,
}

/// `GET /discord/unmap?agent_id=…`: stopping an agent's posts asks.
pub(crate) async fn unmap(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Query(unmap): Query<Unmap>,
) -> Shown {
    let back = super::chat::discord_back(unmap.back);
    let Some(raw) = unmap.agent_id else { return see(&back) };
    let agent = agent_id(&raw)?;
    let mapping = state
        .core
        .mappings(&who)
        .await
        .map_err(fail)?
        .into_iter()
        .find(|m| m.agent_id == agent)
        .ok_or_else(|| fail(Error::not_found(Resource::Mapping, agent.as_str())))?;
    let hidden = BTreeMap::from([("agent_id".to_owned(), raw), ("back".to_owned(), back.clone())]);
    let page = Ask {
        title: format!("Stop {agent} posting to #{}?", mapping.channel_name),
        intro: "Its results and status changes no longer reach that channel; the agent and its \
                tasks stay."
            .into(),
        action: "/discord/unmap".into(),
        button: "Unmap".into(),
        back,
        hidden,
        ..Ask::default()
    };
    ask(&state, &who, &csrf, "discord", page).await
}
