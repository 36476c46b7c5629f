//! The ways into a workspace other than being a member: invites and API keys, both stored by a
//! keyed hash of their secret only. Accepting an invite is one statement that consumes it, so
//! it is used once whatever the number of nodes; revoking a key tells every node at commit.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::Notice;
use super::db::{SqlStore, query, query_as, query_scalar};
use super::shared::{publish, watched};
use super::workspaces::{lock_workspace, role_of};
use crate::domain::access::{ApiKey, Invite};
use crate::domain::user::UserId;
use crate::domain::workspace::{Role, WorkspaceId};
use crate::error::{Conflict, Error, Resource, Result};

#[async_trait]
pub trait AccessStore: Send + Sync {
    async fn insert_invite(&self, invite: &InviteRecord) -> Result<()>;
    /// The workspace's invites not yet accepted, expired ones included, newest first.
    async fn invites(&self, workspace: &WorkspaceId) -> Result<Vec<Invite>>;
    /// Withdraws an invite not yet accepted; fails with `invite_not_found`.
    async fn delete_invite(&self, workspace: &WorkspaceId, id: &str) -> Result<()>;
    /// Consumes the invite of this token hash and makes `user` a member with its role; returns
    /// the workspace and role. Fails with `invite_not_found` (unknown, used or expired) or
    /// `already_member` (the invite stays unused).
    async fn accept_invite(
        &self,
        token_hash: &str,
        user: &UserId,
        at: DateTime<Utc>,
    ) -> Result<(WorkspaceId, Role)>;

    async fn insert_key(&self, key: &KeyRecord) -> Result<()>;
    /// The workspace's keys, revoked ones included, newest first.
    async fn keys(&self, workspace: &WorkspaceId) -> Result<Vec<ApiKey>>;
    /// A key by id, with its hash, whatever its workspace.
    async fn key(&self, id: &str) -> Result<Option<KeyRecord>>;
    /// Revokes a key and tells every node; fails with `api_key_not_found`.
    async fn revoke_key(&self, workspace: &WorkspaceId, id: &str, at: DateTime<Utc>) -> Result<()>;
    /// Records that the key was used (at most about once a minute per node: see the caller).
    async fn touch_key(&self, id: &str, at: DateTime<Utc>) -> Result<()>;
}

/// An invite as stored.
#[derive(Debug, Clone)]
pub struct InviteRecord {
    pub id: String,
    pub workspace: WorkspaceId,
    pub token_hash: String,
    pub role: Role,
    pub email: Option<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// A key as stored: its public fields and its secret's hash.
#[derive(Debug, Clone)]
pub struct KeyRecord {
    pub key: ApiKey,
    pub workspace: WorkspaceId,
    pub secret_hash: String,
}

#[derive(sqlx::FromRow)]
struct InviteRow {
    id: String,
    role: String,
    email: Option<String>,
    created_by: String,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct KeyRow {
    id: String,
    workspace_id: String,
    name: String,
    secret_hash: String,
    role: String,
    created_by: String,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    last_used_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
}

impl TryFrom<KeyRow> for KeyRecord {
    type Error = Error;

    fn try_from(row: KeyRow) -> Result<Self> {
        Ok(KeyRecord {
            key: ApiKey {
                prefix: ApiKey::prefix_of(&row.id),
                id: row.id,
                name: row.name,
                role: role_of(&row.role)?,
                created_by: row.created_by,
                created_at: row.created_at,
                expires_at: row.expires_at,
                last_used_at: row.last_used_at,
                revoked_at: row.revoked_at,
            },
            workspace: WorkspaceId::from_trusted(row.workspace_id),
            secret_hash: row.secret_hash,
        })
    }
}

#[async_trait]
impl<S: SqlStore> AccessStore for S {
    async fn insert_invite(&self, invite: &InviteRecord) -> Result<()> {
        watched(self.storage_health(), async {
            query(sql::INSERT_INVITE)
                .bind(&invite.id)
                .bind(invite.workspace.as_str())
                .bind(&invite.token_hash)
                .bind(invite.role.as_str())
                .bind(&invite.email)
                .bind(&invite.created_by)
                .bind(invite.created_at)
                .bind(invite.expires_at)
                .execute(self.writer())
                .await?;
            Ok(())
        })
        .await
    }

    async fn invites(&self, workspace: &WorkspaceId) -> Result<Vec<Invite>> {
        let rows: Vec<InviteRow> = query_as(sql::INVITES)
            .bind(workspace.as_str())
            .fetch_all(&mut self.read().await?)
            .await?;
        rows.into_iter()
            .map(|row| {
                Ok(Invite {
                    id: row.id,
                    role: role_of(&row.role)?,
                    email: row.email,
                    created_by: row.created_by,
                    created_at: row.created_at,
                    expires_at: row.expires_at,
                })
            })
            .collect()
    }

    async fn delete_invite(&self, workspace: &WorkspaceId, id: &str) -> Result<()> {
        watched(self.storage_health(), async {
            let done = query(sql::DELETE_INVITE)
                .bind(workspace.as_str())
                .bind(id)
                .execute(self.writer())
                .await?;
            if done.rows_affected() == 0 {
                return Err(Error::not_found(Resource::Invite, id));
            }
            Ok(())
        })
        .await
    }

    async fn accept_invite(
        &self,
        token_hash: &str,
        user: &UserId,
        at: DateTime<Utc>,
    ) -> Result<(WorkspaceId, Role)> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let found: Option<(String, String)> = query_as(sql::CONSUME_INVITE)
                .bind(token_hash)
                .bind(user.as_str())
                .bind(at)
                .fetch_optional(&mut tx)
                .await?;
            let (workspace, role) = found.ok_or_else(|| {
                Error::not_found(Resource::Invite, "this invite is unknown, used or expired")
            })?;
            let workspace = WorkspaceId::from_trusted(workspace);
            lock_workspace(&mut tx, &workspace).await?;
            let role = role_of(&role)?;
            let member: Option<String> = query_scalar(super::workspaces::sql::MEMBER_ROLE)
                .bind(workspace.as_str())
                .bind(user.as_str())
                .fetch_optional(&mut tx)
                .await?;
            if member.is_some() {
                return Err(Error::conflict(
                    Conflict::AlreadyMember,
                    "You are a member of this workspace already.",
                ));
            }
            query(super::workspaces::sql::INSERT_MEMBER)
                .bind(workspace.as_str())
                .bind(user.as_str())
                .bind(role.as_str())
                .bind(at)
                .execute(&mut tx)
                .await?;
            publish(&mut tx, &Notice::Members(workspace.clone())).await?;
            tx.commit().await?;
            Ok((workspace, role))
        })
        .await
    }

    async fn insert_key(&self, key: &KeyRecord) -> Result<()> {
        watched(self.storage_health(), async {
            query(sql::INSERT_KEY)
                .bind(&key.key.id)
                .bind(key.workspace.as_str())
                .bind(&key.key.name)
                .bind(&key.secret_hash)
                .bind(key.key.role.as_str())
                .bind(&key.key.created_by)
                .bind(key.key.created_at)
                .bind(key.key.expires_at)
                .execute(self.writer())
                .await?;
            Ok(())
        })
        .await
    }

    async fn keys(&self, workspace: &WorkspaceId) -> Result<Vec<ApiKey>> {
        let rows: Vec<KeyRow> = query_as(&sql::keys_where("workspace_id = $1"))
            .bind(workspace.as_str())
            .fetch_all(&mut self.read().await?)
            .await?;
        rows.into_iter().map(|row| KeyRecord::try_from(row).map(|record| record.key)).collect()
    }

    async fn key(&self, id: &str) -> Result<Option<KeyRecord>> {
        let row: Option<KeyRow> = query_as(&sql::keys_where("id = $1"))
            .bind(id)
            .fetch_optional(&mut self.read().await?)
            .await?;
        row.map(KeyRecord::try_from).transpose()
    }

    async fn revoke_key(&self, workspace: &WorkspaceId, id: &str, at: DateTime<Utc>) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let done = query(sql::REVOKE_KEY)
                .bind(workspace.as_str())
                .bind(id)
                .bind(at)
                .execute(&mut tx)
                .await?;
            if done.rows_affected() == 0 {
                return Err(Error::not_found(Resource::ApiKey, id));
            }
            publish(&mut tx, &Notice::KeyRevoked(id.to_owned())).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn touch_key(&self, id: &str, at: DateTime<Utc>) -> Result<()> {
        watched(self.storage_health(), async {
            query(sql::TOUCH_KEY).bind(id).bind(at).execute(self.writer()).await?;
            Ok(())
        })
        .await
    }
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) const INSERT_INVITE: &str = "INSERT INTO invites (id, workspace_id, token_hash, \
        role, email, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
    pub(crate) const INVITES: &str = "SELECT id, role, email, created_by, created_at, expires_at \
        FROM invites WHERE workspace_id = $1 AND accepted_at IS NULL \
        ORDER BY created_at DESC, id LIMIT 1000";
    pub(crate) const DELETE_INVITE: &str =
        "DELETE FROM invites WHERE workspace_id = $1 AND id = $2 AND accepted_at IS NULL";
    pub(crate) const CONSUME_INVITE: &str = "UPDATE invites SET accepted_by = $2, \
        accepted_at = $3 WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > $3 \
        RETURNING workspace_id, role";
    pub(crate) const INSERT_KEY: &str = "INSERT INTO api_keys (id, workspace_id, name, \
        secret_hash, role, created_by, created_at, expires_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
    pub(crate) fn keys_where(filter: &str) -> String {
        format!(
            "SELECT id, workspace_id, name, secret_hash, role, created_by, created_at, \
             expires_at, last_used_at, revoked_at FROM api_keys WHERE {filter} \
             ORDER BY created_at DESC, id LIMIT 1000"
        )
    }
    pub(crate) const REVOKE_KEY: &str = "UPDATE api_keys SET revoked_at = $3 \
        WHERE workspace_id = $1 AND id = $2 AND revoked_at IS NULL";
    pub(crate) const TOUCH_KEY: &str = "UPDATE api_keys SET last_used_at = $2 WHERE id = $1";
}
