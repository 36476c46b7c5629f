//! Accounts: users, their password hashes and token versions.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::db::{SqlStore, query, query_as, query_scalar};
use super::rows::UserRow;
use super::shared::{publish, watched};
use super::{Notice, db_error};
use crate::domain::user::UserId;
use crate::error::{Conflict, Error, Result};

/// The users of the service.
#[async_trait]
pub trait UserStore: Send + Sync {
    /// Inserts the user with their personal workspace (of the user's id), where they are the
    /// owner. Fails with `email_taken` when the email key exists.
    async fn insert_user(&self, user: &UserRecord) -> Result<()>;
    async fn user_by_email_key(&self, email_key: &str) -> Result<Option<UserRecord>>;
    async fn user_by_id(&self, id: &UserId) -> Result<Option<UserRecord>>;
    /// Invalidates every token issued so far and tells every node (at commit); returns the new
    /// version.
    async fn bump_token_version(&self, id: &UserId) -> Result<i64>;
}

/// A user row, with what only the service may see.
#[derive(Debug, Clone)]
pub struct UserRecord {
    pub id: UserId,
    pub email: String,
    pub email_key: String,
    pub name: String,
    pub password_hash: String,
    pub token_version: i64,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
impl<S: SqlStore> UserStore for S {
    async fn insert_user(&self, user: &UserRecord) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            query(sql::INSERT_USER)
                .bind(user.id.as_str())
                .bind(&user.email)
                .bind(&user.email_key)
                .bind(&user.name)
                .bind(&user.password_hash)
                .bind(user.token_version)
                .bind(user.created_at)
                .execute(&mut tx)
                .await
                .map_err(|e| {
                    let taken = "An account with this email already exists.";
                    db_error(e, Some(Error::conflict(Conflict::EmailTaken, taken)))
                })?;
            query(sql::INSERT_PERSONAL_WORKSPACE)
                .bind(user.id.as_str())
                .bind(&user.name)
                .bind(user.created_at)
                .execute(&mut tx)
                .await?;
            query(sql::INSERT_PERSONAL_OWNER)
                .bind(user.id.as_str())
                .bind(user.created_at)
                .execute(&mut tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn user_by_email_key(&self, email_key: &str) -> Result<Option<UserRecord>> {
        let row: Option<UserRow> = query_as(&sql::select_user_by_email())
            .bind(email_key)
            .fetch_optional(&mut self.read().await?)
            .await?;
        Ok(row.map(UserRecord::from))
    }

    async fn user_by_id(&self, id: &UserId) -> Result<Option<UserRecord>> {
        let row: Option<UserRow> = query_as(&sql::select_user_by_id())
            .bind(id.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        Ok(row.map(UserRecord::from))
    }

    async fn bump_token_version(&self, id: &UserId) -> Result<i64> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            let version: Option<i64> = query_scalar(sql::BUMP_TOKEN_VERSION)
                .bind(id.as_str())
                .bind(crate::domain::now())
                .fetch_optional(&mut tx)
                .await?;
            let version = version.ok_or(Error::Unauthorized)?;
            publish(&mut tx, &Notice::Revoked(id.clone())).await?;
            tx.commit().await?;
            Ok(version)
        })
        .await
    }
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) const INSERT_USER: &str = "INSERT INTO users \
        (id, email, email_key, name, password_hash, token_version, created_at, updated_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $7)";
    pub(crate) const INSERT_PERSONAL_WORKSPACE: &str = "INSERT INTO workspaces \
        (id, name, personal_of, created_at, updated_at) VALUES ($1, $2, $1, $3, $3)";
    pub(crate) const INSERT_PERSONAL_OWNER: &str = "INSERT INTO workspace_members \
        (workspace_id, user_id, role, created_at, updated_at) VALUES ($1, $1, 'owner', $2, $2)";
    pub(crate) const USER_COLUMNS: &str =
        "SELECT id, email, email_key, name, password_hash, token_version, created_at FROM users";
    pub(crate) fn select_user_by_email() -> String {
        format!("{USER_COLUMNS} WHERE email_key = $1")
    }
    pub(crate) fn select_user_by_id() -> String {
        format!("{USER_COLUMNS} WHERE id = $1")
    }
    pub(crate) const BUMP_TOKEN_VERSION: &str = "UPDATE users SET token_version = token_version + 1, \
        updated_at = $2 WHERE id = $1 RETURNING token_version";
}
