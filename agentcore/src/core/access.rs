//! Recognising a request: a person's session token or a workspace's API key, in the workspace
//! the request names (its personal one when it names none), with the caller's role there. What
//! it reads is cached per node and forgotten on revocation ([`super::tokens`]), so a logout, a
//! removed member or a revoked key is refused on every node within a second.

use super::{Core, Principal, unauthorized_unless};
use crate::domain::access::split_key;
use crate::domain::user::UserId;
use crate::domain::workspace::{Actor, Role, WorkspaceId};
use crate::error::{Error, Resource, Result};
use chrono::{DateTime, Utc};

/// How often, at most, a key's `last_used_at` is written.
const TOUCH_EVERY: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// What authenticating with a key needs, as stored.
#[derive(Debug, Clone)]
pub(crate) struct KeyGrant {
    workspace: WorkspaceId,
    role: Role,
    name: String,
    secret_hash: String,
    usable_until: Option<DateTime<Utc>>,
    revoked: bool,
}

impl Core {
    /// The caller behind a bearer token (a session token this service signed, unexpired and not
    /// revoked, or an API key), acting in `workspace` (its id; the personal workspace when
    /// `None`). A workspace the caller is no member of is `workspace_not_found`, as if it did not
    /// exist; a key acts only in its own workspace.
    pub async fn authenticate(&self, token: &str, workspace: Option<&str>) -> Result<Principal> {
        if let Some(id) = split_key(token) {
            return self.authenticate_key(id, token, workspace).await;
        }
        let user = self.authenticate_user(token).await?;
        let workspace = match workspace {
            None => WorkspaceId::personal(&user),
            Some(text) => {
                WorkspaceId::parse(text).map_err(|_| Error::not_found(Resource::Workspace, text))?
            }
        };
        let role = self
            .role_in(&workspace, &user)
            .await?
            .ok_or_else(|| Error::not_found(Resource::Workspace, workspace.as_str()))?;
        Ok(Principal { workspace, role, actor: Actor::User { id: user }, address: None })
    }

    /// The user a session token names, if it is still good.
    async fn authenticate_user(&self, token: &str) -> Result<UserId> {
        let claims = self.auth().verify(token)?;
        let user_id = UserId::parse(&claims.sub).map_err(|_| Error::Unauthorized)?;
        let versions = &self.access().tokens;
        let version = match versions.get(&user_id) {
            Some(version) => version,
            None => {
                let read_from = versions.generation();
                let record = unauthorized_unless(self.store().user_by_id(&user_id).await?)?;
                versions.remember(&user_id, record.token_version, read_from);
                record.token_version
            }
        };
        if version != claims.ver {
            return Err(Error::Unauthorized);
        }
        Ok(user_id)
    }

    /// `user`'s role in `workspace`, from this node's cache when it is still trusted.
    pub(crate) async fn role_in(
        &self,
        workspace: &WorkspaceId,
        user: &UserId,
    ) -> Result<Option<Role>> {
        let members = &self.access().members;
        let key = (workspace.clone(), user.clone());
        if let Some(role) = members.get(&key) {
            return Ok(role);
        }
        let read_from = members.generation();
        let role = self.store().member_role(workspace, user).await?;
        members.remember(&key, role, read_from);
        Ok(role)
    }

    async fn authenticate_key(
        &self,
        id: &str,
        presented: &str,
        workspace: Option<&str>,
    ) -> Result<Principal> {
        let keys = &self.access().keys;
        let grant = match keys.get(&id.to_owned()) {
            Some(grant) => grant,
            None => {
                let read_from = keys.generation();
                let record = unauthorized_unless(self.store().key(id).await?)?;
                let at = crate::domain::now();
                if record.key.last_used_at.is_none_or(|last| at - last > TOUCH_EVERY) {
                    // A record of use, not a gate: a failed write must not refuse the request.
                    if let Err(error) = self.store().touch_key(id, at).await {
                        tracing::warn!(%error, key = id, "cannot record an API key's use");
                    }
                }
                let grant = KeyGrant {
                    workspace: record.workspace,
                    role: record.key.role,
                    name: record.key.name,
                    secret_hash: record.secret_hash,
                    usable_until: record.key.expires_at,
                    revoked: record.key.revoked_at.is_some(),
                };
                keys.remember(&id.to_owned(), grant.clone(), read_from);
                grant
            }
        };
        let matches = self.auth().secret_matches(presented, &grant.secret_hash);
        let now = crate::domain::now();
        if !matches || grant.revoked || grant.usable_until.is_some_and(|until| until <= now) {
            return Err(Error::Unauthorized);
        }
        if workspace.is_some_and(|named| named != grant.workspace.as_str()) {
            return Err(Error::not_found(Resource::Workspace, workspace.unwrap_or_default()));
        }
        Ok(Principal {
            workspace: grant.workspace,
            role: grant.role,
            actor: Actor::Key { id: id.to_owned(), name: grant.name },
            address: None,
        })
    }

    /// Who acts, in words for a record (a task's `cancelled_by`, an invite's `created_by`): a
    /// person's email, `key:<name>`, `discord:<id>`, or `service`.
    pub(crate) async fn actor_label(&self, who: &Principal) -> Result<String> {
        Ok(match &who.actor {
            Actor::User { id } => unauthorized_unless(self.store().user_by_id(id).await?)?.email,
            Actor::Key { name, .. } => format!("key:{name}"),
            Actor::Discord { id, .. } => format!("discord:{id}"),
            Actor::Service => "service".to_owned(),
        })
    }
}
