//! Which workspace the dashboard acts in: the header's switcher, a new team workspace, and an
//! invite's page (`/invite/{token}`), where a signed-in person joins. Each sets the workspace
//! cookie (`session::workspace_cookie`) only to a workspace the facade lists as the viewer's;
//! the session checks membership again on every request.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;

use agentcore::api::WorkspaceRequest;
use agentcore::domain::workspace::Workspace;
use agentcore::{Error, Resource};

use crate::AppState;
use crate::error::ApiError;
use crate::ui::form::Fields;
use crate::ui::render::Page;
use crate::ui::session::{self, Csrf, SignInFirst, Viewer};

use super::accounts::invite_path;
use super::{Shown, fail, team};

/// The pages the switcher goes back to; any other (an agent's page, which belongs to the
/// workspace left) is the overview.
const SECTIONS: [&str; 5] = ["/", "/team", "/usage", "/discord", "/onboarding"];

/// `POST /workspace`: act in `workspace`, one of the viewer's, from now on; then back to
/// `back` (one of [`SECTIONS`]). Any other id is `workspace_not_found`, and nothing is set.
pub(crate) async fn switch(
    State(state): State<AppState>,
    headers: HeaderMap,
    Viewer(who): Viewer,
    fields: Fields,
) -> Shown {
    let chosen = fields.get("workspace").unwrap_or_default();
    let workspaces = state.core.workspaces(&who).await.map_err(fail)?;
    let Some(workspace) = workspaces.into_iter().find(|w| w.id.as_str() == chosen) else {
        return Err(fail(Error::not_found(Resource::Workspace, &chosen)));
    };
    let back = fields.get("back");
    let back = SECTIONS.into_iter().find(|s| back.as_deref() == Some(*s)).unwrap_or("/");
    Ok(act_in(&state, &headers, &workspace, back))
}

/// `POST /workspaces`: a new team workspace (`name`), the viewer its owner; the dashboard
/// switches to it and shows its team page, to invite people.
pub(crate) async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    Viewer(who): Viewer,
    csrf: Csrf,
    fields: Fields,
) -> Shown {
    let request = WorkspaceRequest { name: fields.get("name") };
    let created =
        async { Ok::<_, ApiError>(state.core.create_workspace(&who, request.parse()?).await?) };
    match created.await {
        Ok(workspace) => Ok(act_in(&state, &headers, &workspace, "/team")),
        Err(error) => team::answer(&state, &who, &csrf, "workspace", &fields, error).await,
    }
}

/// `GET /invite/{token}`: signed in, a page to join with; not yet, the ways in (sign in or
/// register), each coming back here afterwards.
pub(crate) async fn invite(
    viewer: Result<Viewer, SignInFirst>,
    csrf: Csrf,
    Path(token): Path<String>,
) -> Response {
    let signed_in = match viewer {
        Ok(_) => true,
        Err(SignInFirst::Redirect) => false,
        Err(limited) => return limited.into_response(),
    };
    let Some(next) = invite_path(&format!("/invite/{token}")) else {
        return not_an_invite(&token);
    };
    Page::new("invite.html", context! { csrf => csrf.0, signed_in, next }).into_response()
}

/// `POST /invite/{token}`: the viewer joins with the invite's role, and the dashboard acts in
/// the workspace joined. A used, withdrawn or expired invite is `invite_not_found`; a member
/// already, `already_member`.
pub(crate) async fn join(
    State(state): State<AppState>,
    headers: HeaderMap,
    viewer: Result<Viewer, SignInFirst>,
    Path(token): Path<String>,
) -> Response {
    let Viewer(who) = match viewer {
        Ok(viewer) => viewer,
        Err(SignInFirst::Redirect) => match invite_path(&format!("/invite/{token}")) {
            Some(next) => return Redirect::to(&format!("/login?next={next}")).into_response(),
            None => return not_an_invite(&token),
        },
        Err(limited) => return limited.into_response(),
    };
    match state.core.accept_invite(&who, &token).await {
        Ok(workspace) => act_in(&state, &headers, &workspace, "/"),
        Err(error) => fail(error).into_response(),
    }
}

fn not_an_invite(token: &str) -> Response {
    fail(Error::not_found(Resource::Invite, token)).into_response()
}

/// A 303 to `to` that sets the workspace cookie to `workspace` (removes it for the personal
/// one, which is where a browser without it acts).
fn act_in(state: &AppState, headers: &HeaderMap, workspace: &Workspace, to: &str) -> Response {
    let id = (!workspace.personal).then(|| workspace.id.as_str());
    let cookie = session::workspace_cookie(state, headers, id);
    session::with_cookies(Redirect::to(to).into_response(), [cookie])
}
