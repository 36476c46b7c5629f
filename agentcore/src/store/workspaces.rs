//! Workspaces and their members: who belongs where, with which role. A change of members
//! tells every node at commit (`Notice::Members`), so a removed member's next request is refused
//! everywhere.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::Notice;
use super::db::{SqlStore, Tx, query, query_as, query_scalar};
use super::shared::{publish, watched};
use crate::domain::user::UserId;
use crate::domain::workspace::{Member, Role, Workspace, WorkspaceId, WorkspaceName};
use crate::error::{Conflict, Error, Resource, Result};

/// What becomes of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberChange {
    Role(Role),
    Remove,
}

#[async_trait]
pub trait WorkspaceStore: Send + Sync {
    /// The workspaces `user` belongs to, with their role in each, personal first.
    async fn workspaces_of(&self, user: &UserId) -> Result<Vec<Workspace>>;
    /// One workspace as a caller with `role` sees it (`personal` when it is `viewer`'s own).
    async fn workspace(
        &self,
        id: &WorkspaceId,
        viewer: Option<&UserId>,
        role: Role,
    ) -> Result<Workspace>;
    /// `user`'s role in `workspace`; `None` when they are not a member (or it does not exist).
    async fn member_role(&self, workspace: &WorkspaceId, user: &UserId) -> Result<Option<Role>>;
    /// A new workspace with `owner` as its only member.
    async fn insert_workspace(
        &self,
        id: &WorkspaceId,
        name: &WorkspaceName,
        owner: &UserId,
        at: DateTime<Utc>,
    ) -> Result<()>;
    /// How many workspaces `user` owns and are not personal.
    async fn owned_workspaces(&self, user: &UserId) -> Result<i64>;
    async fn rename_workspace(&self, workspace: &WorkspaceId, name: &WorkspaceName) -> Result<()>;
    /// The members, in the order they joined.
    async fn members(&self, workspace: &WorkspaceId) -> Result<Vec<Member>>;
    /// Changes a member's role or removes them; returns the role they had. Fails with
    /// `member_not_found`, or `last_owner` when no owner would be left.
    async fn change_member(
        &self,
        workspace: &WorkspaceId,
        user: &UserId,
        change: MemberChange,
        at: DateTime<Utc>,
    ) -> Result<Role>;
}

#[derive(sqlx::FromRow)]
struct WorkspaceRow {
    id: String,
    name: String,
    personal_of: Option<String>,
    role: String,
    plan: String,
    created_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct MemberRow {
    user_id: String,
    email: String,
    name: String,
    role: String,
    created_at: DateTime<Utc>,
}

impl WorkspaceRow {
    /// The workspace as `viewer`, with `role` there, sees it: `personal` when it is theirs.
    fn seen_by(self, viewer: Option<&UserId>, role: Role) -> Workspace {
        Workspace {
            personal: self.personal_of.is_some()
                && self.personal_of.as_deref() == viewer.map(UserId::as_str),
            id: WorkspaceId::from_trusted(self.id),
            name: self.name,
            role,
            plan: self.plan,
            created_at: self.created_at,
        }
    }
}

pub(super) fn role_of(text: &str) -> Result<Role> {
    Role::parse(text).map_err(Error::internal)
}

#[async_trait]
impl<S: SqlStore> WorkspaceStore for S {
    async fn workspaces_of(&self, user: &UserId) -> Result<Vec<Workspace>> {
        let rows: Vec<WorkspaceRow> = query_as(sql::WORKSPACES_OF)
            .bind(user.as_str())
            .fetch_all(&mut self.read().await?)
            .await?;
        rows.into_iter()
            .map(|row| {
                let role = role_of(&row.role)?;
                Ok(row.seen_by(Some(user), role))
            })
            .collect()
    }

    async fn workspace(
        &self,
        id: &WorkspaceId,
        viewer: Option<&UserId>,
        role: Role,
    ) -> Result<Workspace> {
        let row: Option<WorkspaceRow> = query_as(sql::WORKSPACE)
            .bind(id.as_str())
            .bind(role.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        let row = row.ok_or_else(|| Error::not_found(Resource::Workspace, id.as_str()))?;
        Ok(row.seen_by(viewer, role))
    }

    async fn member_role(&self, workspace: &WorkspaceId, user: &UserId) -> Result<Option<Role>> {
        let role: Option<String> = query_scalar(sql::MEMBER_ROLE)
            .bind(workspace.as_str())
            .bind(user.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        role.as_deref().map(role_of).transpose()
    }

    async fn insert_workspace(
        &self,
        id: &WorkspaceId,
        name: &WorkspaceName,
        owner: &UserId,
        at: DateTime<Utc>,
    ) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            query(sql::INSERT_WORKSPACE)
                .bind(id.as_str())
                .bind(name.as_str())
                .bind(at)
                .execute(&mut tx)
                .await?;
            query(sql::INSERT_MEMBER)
                .bind(id.as_str())
                .bind(owner.as_str())
                .bind(Role::Owner.as_str())
                .bind(at)
                .execute(&mut tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn owned_workspaces(&self, user: &UserId) -> Result<i64> {
        Ok(query_scalar(sql::OWNED_WORKSPACES)
            .bind(user.as_str())
            .fetch_one(&mut self.read().await?)
            .await?)
    }

    async fn rename_workspace(&self, workspace: &WorkspaceId, name: &WorkspaceName) -> Result<()> {
        watched(self.storage_health(), async {
            query(sql::RENAME_WORKSPACE)
                .bind(workspace.as_str())
                .bind(name.as_str())
                .bind(crate::domain::now())
                .execute(self.writer())
                .await?;
            Ok(())
        })
        .await
    }

    async fn members(&self, workspace: &WorkspaceId) -> Result<Vec<Member>> {
        let rows: Vec<MemberRow> = query_as(sql::MEMBERS)
            .bind(workspace.as_str())
            .fetch_all(&mut self.read().await?)
            .await?;
        rows.into_iter()
            .map(|row| {
                Ok(Member {
                    user_id: UserId::from_trusted(row.user_id),
                    email: row.email,
                    name: row.name,
                    role: role_of(&row.role)?,
                    joined_at: row.created_at,
                })
            })
            .collect()
    }

    async fn change_member(
        &self,
        workspace: &WorkspaceId,
        user: &UserId,
        change: MemberChange,
        at: DateTime<Utc>,
    ) -> Result<Role> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            lock_workspace(&mut tx, workspace).await?;
            let had: Option<String> = query_scalar(sql::MEMBER_ROLE)
                .bind(workspace.as_str())
                .bind(user.as_str())
                .fetch_optional(&mut tx)
                .await?;
            let had =
                role_of(&had.ok_or_else(|| Error::not_found(Resource::Member, user.as_str()))?)?;
            let stays_owner = change == MemberChange::Role(Role::Owner);
            if had == Role::Owner && !stays_owner {
                let owners: i64 =
                    query_scalar(sql::OWNERS).bind(workspace.as_str()).fetch_one(&mut tx).await?;
                if owners <= 1 {
                    return Err(Error::conflict(
                        Conflict::LastOwner,
                        "A workspace keeps at least one owner: make another member an owner first.",
                    ));
                }
            }
            match change {
                MemberChange::Role(role) => {
                    query(sql::SET_ROLE)
                        .bind(workspace.as_str())
                        .bind(user.as_str())
                        .bind(role.as_str())
                        .bind(at)
                        .execute(&mut tx)
                        .await?;
                }
                MemberChange::Remove => {
                    query(sql::REMOVE_MEMBER)
                        .bind(workspace.as_str())
                        .bind(user.as_str())
                        .execute(&mut tx)
                        .await?;
                }
            }
            publish(&mut tx, &Notice::Members(workspace.clone())).await?;
            tx.commit().await?;
            Ok(had)
        })
        .await
    }
}

/// Locks the workspace's row for the transaction (its members and owners change one at a
/// time), or fails with `workspace_not_found`.
pub(super) async fn lock_workspace(tx: &mut Tx, workspace: &WorkspaceId) -> Result<()> {
    let statement = format!("SELECT id FROM workspaces WHERE id = $1{}", tx.dialect().lock());
    let found: Option<String> =
        query_scalar(&statement).bind(workspace.as_str()).fetch_optional(&mut *tx).await?;
    found.map(|_| ()).ok_or_else(|| Error::not_found(Resource::Workspace, workspace.as_str()))
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) const WORKSPACES_OF: &str = "SELECT w.id, w.name, w.personal_of, m.role, w.plan, \
        w.created_at FROM workspace_members m JOIN workspaces w ON w.id = m.workspace_id \
        WHERE m.user_id = $1 \
        ORDER BY CASE WHEN w.personal_of = $1 THEN 0 ELSE 1 END, w.created_at, w.id";
    pub(crate) const WORKSPACE: &str = "SELECT id, name, personal_of, $2 AS role, plan, \
        created_at FROM workspaces WHERE id = $1";
    pub(crate) const MEMBER_ROLE: &str =
        "SELECT role FROM workspace_members WHERE workspace_id = $1 AND user_id = $2";
    pub(crate) const INSERT_WORKSPACE: &str = "INSERT INTO workspaces (id, name, created_at, \
        updated_at) VALUES ($1, $2, $3, $3)";
    pub(crate) const INSERT_MEMBER: &str = "INSERT INTO workspace_members (workspace_id, user_id, \
        role, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)";
    pub(crate) const OWNED_WORKSPACES: &str = "SELECT COUNT(*) FROM workspace_members m \
        JOIN workspaces w ON w.id = m.workspace_id \
        WHERE m.user_id = $1 AND m.role = 'owner' AND w.personal_of IS NULL";
    pub(crate) const RENAME_WORKSPACE: &str =
        "UPDATE workspaces SET name = $2, updated_at = $3 WHERE id = $1";
    pub(crate) const MEMBERS: &str = "SELECT m.user_id, u.email, u.name, m.role, m.created_at \
        FROM workspace_members m JOIN users u ON u.id = m.user_id \
        WHERE m.workspace_id = $1 ORDER BY m.created_at, m.user_id";
    pub(crate) const OWNERS: &str =
        "SELECT COUNT(*) FROM workspace_members WHERE workspace_id = $1 AND role = 'owner'";
    pub(crate) const SET_ROLE: &str = "UPDATE workspace_members SET role = $3, updated_at = $4 \
        WHERE workspace_id = $1 AND user_id = $2";
    pub(crate) const REMOVE_MEMBER: &str =
        "DELETE FROM workspace_members WHERE workspace_id = $1 AND user_id = $2";
}
