//! Workspaces, their members, invites and API keys, as typed calls. Each acts in the client's
//! workspace (`X-Workspace`) but the list of workspaces, creating one and accepting an invite,
//! which are the person's own.

use axum::http::Method;

use agentcore::api::{
    Deleted, InviteList, InviteRequest, KeyList, KeyRequest, MemberList, MemberRequest,
    WorkspaceList, WorkspaceRequest,
};
use agentcore::domain::access::{ApiKey, CreatedInvite, CreatedKey};
use agentcore::domain::workspace::{Member, Workspace};

use super::Reply;
use crate::client::{Client, segment};
use crate::failure::Failure;

fn member_path(user: &str) -> String {
    format!("/api/workspace/members/{}", segment(user))
}

impl Client {
    /// The caller's workspaces with their role in each (an API key: its own).
    pub async fn workspaces(&self) -> Result<Reply<WorkspaceList>, Failure> {
        self.get_as("/api/workspaces").await
    }

    pub async fn create_workspace(
        &self,
        request: &WorkspaceRequest,
    ) -> Result<Reply<Workspace>, Failure> {
        self.post_as("/api/workspaces", Some(request)).await
    }

    /// The workspace the client acts in.
    pub async fn current_workspace(&self) -> Result<Reply<Workspace>, Failure> {
        self.get_as("/api/workspace").await
    }

    pub async fn members(&self) -> Result<Reply<MemberList>, Failure> {
        self.get_as("/api/workspace/members").await
    }

    pub async fn set_member_role(
        &self,
        user: &str,
        request: &MemberRequest,
    ) -> Result<Reply<Member>, Failure> {
        self.typed(Method::PATCH, &member_path(user), Some(request)).await
    }

    /// Removes a member; the caller's own id leaves.
    pub async fn remove_member(&self, user: &str) -> Result<Reply<Deleted>, Failure> {
        self.delete_as(&member_path(user)).await
    }

    pub async fn invites(&self) -> Result<Reply<InviteList>, Failure> {
        self.get_as("/api/workspace/invites").await
    }

    /// A new invite, with its token (shown only in this answer).
    pub async fn create_invite(
        &self,
        request: &InviteRequest,
    ) -> Result<Reply<CreatedInvite>, Failure> {
        self.post_as("/api/workspace/invites", Some(request)).await
    }

    pub async fn delete_invite(&self, id: &str) -> Result<Reply<Deleted>, Failure> {
        self.delete_as(&format!("/api/workspace/invites/{}", segment(id))).await
    }

    /// Joins the workspace an invite's token is for: the workspace.
    pub async fn accept_invite(&self, token: &str) -> Result<Reply<Workspace>, Failure> {
        self.post_as(&format!("/api/invites/{}/accept", segment(token)), None::<&()>).await
    }

    pub async fn keys(&self) -> Result<Reply<KeyList>, Failure> {
        self.get_as("/api/workspace/keys").await
    }

    /// A new key, with its secret (shown only in this answer).
    pub async fn create_key(&self, request: &KeyRequest) -> Result<Reply<CreatedKey>, Failure> {
        self.post_as("/api/workspace/keys", Some(request)).await
    }

    /// Revokes a key: the key, revoked.
    pub async fn revoke_key(&self, id: &str) -> Result<Reply<ApiKey>, Failure> {
        self.delete_as(&format!("/api/workspace/keys/{}", segment(id))).await
    }
}
