//! The team page (`/team`): the workspace the dashboard acts in, its members and their roles, its
//! pending invites and its API keys, with the forms the viewer's role allows. What a member or a
//! viewer may not read (invites, keys) is left out, and what they may not do has no form; the
//! facade refuses it anyway, and a refusal is shown in its own words above the form.
//!
//! An invite's link and a key's secret are shown once, on the page that answers their form, and
//! never again: the store keeps only their hashes.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::header::HeaderValue;
use axum::response::Response;
use minijinja::{Value, context};

use agentcore::Principal;
use agentcore::api::{InviteRequest, KeyRequest, MemberRequest, WorkspaceRequest};
use agentcore::domain::now;
use agentcore::domain::workspace::{Need, Role};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{invite_id, key_id, member_id};
use crate::ui::form::Fields;
use crate::ui::render::FormErrors;
use crate::ui::session::{self, Csrf, Viewer};

use super::{Shown, done, fail, refused, signed_in};

/// `GET /team`.
pub(crate) async fn page(State(state): State<AppState>, Viewer(who): Viewer, csrf: Csrf) -> Shown {
    team_page(&state, &who, &csrf, Value::UNDEFINED, Value::UNDEFINED).await
}

/// The team page. `form`: the form that was refused (`which`, its `values` and `errors`);
/// `made`: an invite's link or a key's secret, shown this once.
pub(super) async fn team_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    form: Value,
    made: Value,
) -> Shown {
    let members = state.core.members(who).await.map_err(fail)?;
    let manage = who.role.allows(Need::Manage);
    let at = now();
    let (invites, keys) = if manage {
        let invites = state.core.invites(who).await.map_err(fail)?;
        let keys = state.core.keys(who).await.map_err(fail)?;
        let invites: Vec<Value> = invites
            .into_iter()
            .map(|invite| context! { expired => invite.expires_at <= at, invite })
            .collect();
        let keys: Vec<Value> =
            keys.into_iter().map(|key| context! { usable => key.usable(at), key }).collect();
        (invites, keys)
    } else {
        (Vec::new(), Vec::new())
    };
    // The roles the viewer may hand out: none above their own, and a key is never an owner.
    let roles: Vec<&str> =
        Role::ALL.into_iter().filter(|r| who.role.includes(*r)).map(Role::as_str).collect();
    let key_roles: Vec<&str> = roles.iter().copied().filter(|r| *r != "owner").collect();
    let me = who.actor.user().map(ToString::to_string);
    signed_in(
        state,
        who,
        "team.html",
        context! {
            csrf => csrf.0, nav => "team", members, invites, keys, manage, me, roles, key_roles,
            form, made,
        },
    )
    .await
}

/// `POST /team/name`: renames the workspace (owners and admins).
pub(crate) async fn rename(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    fields: Fields,
) -> Shown {
    let request = WorkspaceRequest { name: fields.get("name") };
    let renamed =
        async { Ok::<_, ApiError>(state.core.rename_workspace(&who, request.parse()?).await?) };
    match renamed.await {
        Ok(_) => done("/team", "The workspace was renamed."),
        Err(error) => answer(&state, &who, &csrf, "name", &fields, error).await,
    }
}

/// `POST /team/members/{user_id}/{command}`: `role` (the field `role`) or `remove`; removing
/// oneself is leaving, which takes the dashboard back to the personal workspace.
pub(crate) async fn member(
    State(state): State<AppState>,
    headers: HeaderMap,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((user, command)): Path<(String, String)>,
    fields: Fields,
) -> Shown {
    let user = member_id(&user).map_err(fail)?;
    let result = match command.as_str() {
        "role" => {
            let request = MemberRequest { role: fields.get("role") };
            let changed = async {
                Ok::<_, ApiError>(state.core.set_member_role(&who, &user, request.parse()?).await?)
            };
            changed.await.map(drop)
        }
        "remove" => state.core.remove_member(&who, &user).await.map_err(ApiError::from),
        _ => return Err(fail(ApiError::RouteNotFound)),
    };
    match result {
        Ok(()) if who.actor.user() == Some(&user) && command == "remove" => {
            let left = crate::ui::flash::done("/", "You left the workspace.");
            Ok(session::with_cookies(left, [session::workspace_cookie(&state, &headers, None)]))
        }
        Ok(()) if command == "remove" => done("/team", "The member was removed."),
        Ok(()) => done("/team", "The role was changed."),
        Err(error) => answer(&state, &who, &csrf, "members", &fields, error).await,
    }
}

/// `POST /team/invites`: a new invite (role, optional email, hours); the answer shows its link.
pub(crate) async fn invite(
    State(state): State<AppState>,
    headers: HeaderMap,
    Viewer(who): Viewer,
    csrf: Csrf,
    fields: Fields,
) -> Shown {
    let mut errors = agentcore::ValidationErrors::new();
    let request = InviteRequest {
        role: fields.get("role"),
        email: fields.text("email"),
        expires_in_hours: fields.number("expires_in_hours", &mut errors),
    };
    let created = async {
        errors.into_result()?;
        Ok::<_, ApiError>(state.core.create_invite(&who, request.parse()?).await?)
    };
    match created.await {
        Ok(created) => {
            let link = format!("{}/invite/{}", session::origin(&state, &headers), created.token);
            let made = context! { invite => created.invite, path => format!("/invite/{}", created.token), link };
            shown_once(team_page(&state, &who, &csrf, Value::UNDEFINED, made).await)
        }
        Err(error) => answer(&state, &who, &csrf, "invite", &fields, error).await,
    }
}

/// `POST /team/invites/{id}/withdraw`: its link stops working.
pub(crate) async fn withdraw(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    Path(id): Path<String>,
) -> Shown {
    let id = invite_id(&id).map_err(fail)?;
    state.core.delete_invite(&who, &id).await.map_err(fail)?;
    done("/team", "The invite was withdrawn: its link no longer works.")
}

/// `POST /team/keys`: a new API key (name, role, optional expiry: a date, which is its first
/// moment in UTC, or an RFC 3339 time); the answer shows its secret.
pub(crate) async fn create_key(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    fields: Fields,
) -> Shown {
    let mut errors = agentcore::ValidationErrors::new();
    let expires_at = fields.text("expires_at").and_then(|raw| {
        errors.check("expires_at", expiry(&raw).ok_or_else(|| format!("'{raw}' is not a date")))
    });
    let request = KeyRequest { name: fields.get("name"), role: fields.get("role"), expires_at };
    let created = async {
        errors.into_result()?;
        Ok::<_, ApiError>(state.core.create_key(&who, request.parse()?).await?)
    };
    match created.await {
        Ok(created) => {
            let made = context! { key => created.key, secret => created.secret };
            shown_once(team_page(&state, &who, &csrf, Value::UNDEFINED, made).await)
        }
        Err(error) => answer(&state, &who, &csrf, "key", &fields, error).await,
    }
}

/// `POST /team/keys/{id}/revoke`: the key is refused from now on.
pub(crate) async fn revoke_key(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    Path(id): Path<String>,
) -> Shown {
    let id = key_id(&id).map_err(fail)?;
    let key = state.core.revoke_key(&who, &id).await.map_err(fail)?;
    done("/team", format!("The key {} was revoked.", key.name))
}

/// A date (`2030-01-31`, from a date field: its first moment in UTC) or an RFC 3339 time.
fn expiry(raw: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    if let Ok(date) = chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d") {
        return date.and_hms_opt(0, 0, 0).map(|at| at.and_utc());
    }
    chrono::DateTime::parse_from_rfc3339(raw).ok().map(|at| at.to_utc())
}

/// The team page again for a refused form, with the refusal's status, its words and its
/// errors beside their fields.
pub(super) async fn answer(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    which: &str,
    fields: &Fields,
    error: ApiError,
) -> Shown {
    let form = context! { which, values => fields.values(), errors => FormErrors::of(&error) };
    let page = team_page(state, who, csrf, form, Value::UNDEFINED).await?;
    refused(shown_once(Ok(page))?, &error)
}

/// A page answering a form at `/team`'s address, so that reloading it (htmx puts the address
/// in the history) shows the team page and not the form's answer again.
fn shown_once(page: Shown) -> Shown {
    let mut page: Response = page?;
    page.headers_mut().insert("hx-push-url", HeaderValue::from_static("/team"));
    Ok(page)
}
