//! `/api/workspaces`, `/api/workspace` and `/api/invites`: the caller's workspaces, the members
//! of the one a request acts in (`X-Workspace`), its invites and its API keys.

use axum::Json as Reply;
use axum::extract::State;
use axum::http::StatusCode;

use agentcore::api::{
    Deleted, InviteList, InviteRequest, KeyList, KeyRequest, MemberList, MemberRequest,
    WorkspaceList, WorkspaceRequest,
};
use agentcore::domain::access::{ApiKey, CreatedInvite, CreatedKey};
use agentcore::domain::workspace::{Member, Workspace};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Caller, Json, Path, invite_id, key_id, member_id};

#[utoipa::path(get, path = "/api/workspaces", operation_id = "list_workspaces", tag = "workspaces", security(("bearer" = [])),
    responses((status = 200, description = "The workspaces the caller belongs to, with their role in each, their personal one first (an API key: its own).", body = WorkspaceList)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<WorkspaceList>, ApiError> {
    Ok(Reply(WorkspaceList { workspaces: state.core.workspaces(&who).await? }))
}

#[utoipa::path(post, path = "/api/workspaces", operation_id = "create_workspace", tag = "workspaces", security(("bearer" = [])),
    request_body = WorkspaceRequest,
    responses((status = 201, description = "A new team workspace, with the caller as its owner. Send its `id` as `X-Workspace` to act in it.", body = Workspace),
        (status = 403, description = "`forbidden`: an API key cannot create workspaces.", body = crate::error::ErrorBody),
        (status = 429, description = "`quota_exceeded`: the caller owns 20 team workspaces (`workspaces_per_user`).", body = crate::error::ErrorBody)))]
pub(super) async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<WorkspaceRequest>,
) -> Result<(StatusCode, Reply<Workspace>), ApiError> {
    let created = state.core.create_workspace(&who, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(created)))
}

#[utoipa::path(get, path = "/api/workspace", operation_id = "show_workspace", tag = "workspaces", security(("bearer" = [])),
    responses((status = 200, description = "The workspace the request acts in, with the caller's role.", body = Workspace)))]
pub(super) async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<Workspace>, ApiError> {
    Ok(Reply(state.core.workspace(&who).await?))
}

#[utoipa::path(patch, path = "/api/workspace", operation_id = "rename_workspace", tag = "workspaces", security(("bearer" = [])),
    request_body = WorkspaceRequest,
    responses((status = 200, description = "The workspace, renamed (owners and admins).", body = Workspace)))]
pub(super) async fn rename(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<WorkspaceRequest>,
) -> Result<Reply<Workspace>, ApiError> {
    Ok(Reply(state.core.rename_workspace(&who, request.parse()?).await?))
}

#[utoipa::path(get, path = "/api/workspace/members", operation_id = "list_members", tag = "workspaces", security(("bearer" = [])),
    responses((status = 200, description = "The workspace's members and their roles, in the order they joined.", body = MemberList)))]
pub(super) async fn members(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<MemberList>, ApiError> {
    Ok(Reply(MemberList { members: state.core.members(&who).await? }))
}

#[utoipa::path(patch, path = "/api/workspace/members/{user_id}", operation_id = "set_member_role", tag = "workspaces", security(("bearer" = [])),
    params(("user_id" = String, Path, description = "The member's user id.")),
    request_body = MemberRequest,
    responses((status = 200, description = "The member with their new role. Owners and admins change roles; only owners make or unmake owners.", body = Member),
        (status = 409, description = "`last_owner`: the workspace would be left without an owner.", body = crate::error::ErrorBody)))]
pub(super) async fn set_role(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(user): Path<String>,
    Json(request): Json<MemberRequest>,
) -> Result<Reply<Member>, ApiError> {
    let role = request.parse()?;
    Ok(Reply(state.core.set_member_role(&who, &member_id(&user)?, role).await?))
}

#[utoipa::path(delete, path = "/api/workspace/members/{user_id}", operation_id = "remove_member", tag = "workspaces", security(("bearer" = [])),
    params(("user_id" = String, Path, description = "The member's user id; the caller's own to leave.")),
    responses((status = 200, description = "The member is gone: their next request in this workspace is `workspace_not_found`, on every node.", body = Deleted),
        (status = 409, description = "`last_owner`: the last owner cannot leave or be removed.", body = crate::error::ErrorBody)))]
pub(super) async fn remove(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(user): Path<String>,
) -> Result<Reply<Deleted>, ApiError> {
    let user = member_id(&user)?;
    state.core.remove_member(&who, &user).await?;
    Ok(Reply(Deleted { deleted: user.to_string() }))
}

#[utoipa::path(get, path = "/api/workspace/invites", operation_id = "list_invites", tag = "workspaces", security(("bearer" = [])),
    responses((status = 200, description = "Invites not yet accepted, expired ones included, newest first (never their tokens).", body = InviteList)))]
pub(super) async fn invites(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<InviteList>, ApiError> {
    Ok(Reply(InviteList { invites: state.core.invites(&who).await? }))
}

#[utoipa::path(post, path = "/api/workspace/invites", operation_id = "create_invite", tag = "workspaces", security(("bearer" = [])),
    request_body = InviteRequest,
    responses((status = 201, description = "The invite and, this once, its `token`: the link is `/invite/<token>` on the dashboard, or `POST /api/invites/<token>/accept`.", body = CreatedInvite),
        (status = 429, description = "`quota_exceeded`: 100 invites wait for an answer (`pending_invites_per_workspace`), or the members and waiting invites reach 1,000 (`members_per_workspace`).", body = crate::error::ErrorBody)))]
pub(super) async fn invite(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<InviteRequest>,
) -> Result<(StatusCode, Reply<CreatedInvite>), ApiError> {
    let created = state.core.create_invite(&who, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(created)))
}

#[utoipa::path(delete, path = "/api/workspace/invites/{id}", operation_id = "delete_invite", tag = "workspaces", security(("bearer" = [])),
    params(("id" = String, Path, description = "The invite's id.")),
    responses((status = 200, description = "The invite is withdrawn: its link no longer works.", body = Deleted)))]
pub(super) async fn withdraw(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<Deleted>, ApiError> {
    state.core.delete_invite(&who, &invite_id(&id)?).await?;
    Ok(Reply(Deleted { deleted: id }))
}

#[utoipa::path(post, path = "/api/invites/{token}/accept", operation_id = "accept_invite", tag = "workspaces", security(("bearer" = [])),
    params(("token" = String, Path, description = "The invite's token, from its link.")),
    responses((status = 200, description = "The caller (a person, signed in) is a member of the workspace, with the invite's role; the invite is used up.", body = Workspace),
        (status = 404, description = "`invite_not_found`: unknown, used, withdrawn or expired.", body = crate::error::ErrorBody),
        (status = 409, description = "`already_member`: the invite stays unused.", body = crate::error::ErrorBody)))]
pub(super) async fn accept(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(token): Path<String>,
) -> Result<Reply<Workspace>, ApiError> {
    Ok(Reply(state.core.accept_invite(&who, &token).await?))
}

#[utoipa::path(get, path = "/api/workspace/keys", operation_id = "list_keys", tag = "workspaces", security(("bearer" = [])),
    responses((status = 200, description = "The workspace's API keys, revoked ones included, newest first (never their secrets).", body = KeyList)))]
pub(super) async fn keys(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<Reply<KeyList>, ApiError> {
    Ok(Reply(KeyList { keys: state.core.keys(&who).await? }))
}

#[utoipa::path(post, path = "/api/workspace/keys", operation_id = "create_key", tag = "workspaces", security(("bearer" = [])),
    request_body = KeyRequest,
    responses((status = 201, description = "The key and, this once, its `secret` (`agk_...`): send it as `Authorization: Bearer <secret>`.", body = CreatedKey),
        (status = 429, description = "`quota_exceeded`: the workspace has 100 keys not revoked (`api_keys_per_workspace`).", body = crate::error::ErrorBody)))]
pub(super) async fn create_key(
    State(state): State<AppState>,
    Caller(who): Caller,
    Json(request): Json<KeyRequest>,
) -> Result<(StatusCode, Reply<CreatedKey>), ApiError> {
    let created = state.core.create_key(&who, request.parse()?).await?;
    Ok((StatusCode::CREATED, Reply(created)))
}

#[utoipa::path(delete, path = "/api/workspace/keys/{id}", operation_id = "revoke_key", tag = "workspaces", security(("bearer" = [])),
    params(("id" = String, Path, description = "The key's id.")),
    responses((status = 200, description = "The key, revoked: refused on every node within a second.", body = ApiKey)))]
pub(super) async fn revoke_key(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Reply<ApiKey>, ApiError> {
    Ok(Reply(state.core.revoke_key(&who, &key_id(&id)?).await?))
}
