//! Workspaces and who is in them: creating and renaming workspaces, members and their roles,
//! invites, and API keys.

use serde_json::json;

use super::{Core, Principal};
use crate::auth::random_secret;
use crate::domain::access::{
    self, ApiKey, CreatedInvite, CreatedKey, Invite, KEY_ID_CHARS, NewInvite, NewKey,
};
use crate::domain::now;
use crate::domain::quota::Quota;
use crate::domain::user::UserId;
use crate::domain::workspace::{
    MAX_MEMBERS, MAX_OWNED_WORKSPACES, Member, Need, Role, Workspace, WorkspaceId, WorkspaceName,
};
use crate::error::{Error, Resource, Result};
use crate::store::{InviteRecord, KeyRecord, MemberChange};

impl Core {
    /// The workspaces the caller belongs to, personal first; a key sees only its own.
    pub async fn workspaces(&self, who: &Principal) -> Result<Vec<Workspace>> {
        match who.actor.user() {
            Some(user) => self.store().workspaces_of(user).await,
            None => Ok(vec![self.workspace(who).await?]),
        }
    }

    /// The workspace the request acts in.
    pub async fn workspace(&self, who: &Principal) -> Result<Workspace> {
        self.store().workspace(&who.workspace, who.actor.user(), who.role).await
    }

    /// A new team workspace, with the caller (a person) as its owner.
    pub async fn create_workspace(
        &self,
        who: &Principal,
        name: WorkspaceName,
    ) -> Result<Workspace> {
        let user = who.user()?;
        if self.store().owned_workspaces(user).await? >= MAX_OWNED_WORKSPACES {
            return Err(Error::QuotaExceeded {
                quota: Quota::WorkspacesPerUser,
                limit: MAX_OWNED_WORKSPACES as u64,
            });
        }
        let id = WorkspaceId::generate();
        self.store().insert_workspace(&id, &name, user, now()).await?;
        tracing::info!(workspace = %id, user_id = %user, "workspace created");
        let created = self.store().workspace(&id, Some(user), Role::Owner).await?;
        let mut owner = who.clone();
        owner.workspace = id.clone();
        let after = json!({"name": created.name});
        self.record(&owner, "workspace.created", ("workspace", id.as_str()), None, Some(after))
            .await;
        Ok(created)
    }

    pub async fn rename_workspace(
        &self,
        who: &Principal,
        name: WorkspaceName,
    ) -> Result<Workspace> {
        who.require(Need::Manage)?;
        let before = self.workspace(who).await?;
        self.store().rename_workspace(&who.workspace, &name).await?;
        let after = Workspace { name: name.as_str().to_owned(), ..before.clone() };
        let (was, is) = (json!({"name": before.name}), json!({"name": after.name}));
        self.record(
            who,
            "workspace.renamed",
            ("workspace", who.workspace.as_str()),
            Some(was),
            Some(is),
        )
        .await;
        Ok(after)
    }

    pub async fn members(&self, who: &Principal) -> Result<Vec<Member>> {
        who.require(Need::Read)?;
        self.store().members(&who.workspace).await
    }

    /// Changes a member's role. Admins manage admins, members and viewers; only an owner makes
    /// or unmakes an owner. The last owner stays (`last_owner`).
    pub async fn set_member_role(
        &self,
        who: &Principal,
        user: &UserId,
        role: Role,
    ) -> Result<Member> {
        who.require(Need::Manage)?;
        let current = self.member(who, user).await?;
        if (current.role == Role::Owner || role == Role::Owner) && who.role != Role::Owner {
            return Err(Error::Forbidden(Need::Own.refusal()));
        }
        self.store().change_member(&who.workspace, user, MemberChange::Role(role), now()).await?;
        self.forget_member(&who.workspace);
        tracing::info!(workspace = %who.workspace, user_id = %user, role = %role, "member role changed");
        let changed = Member { role, ..current.clone() };
        let (was, is) = (json!({"role": current.role}), json!({"role": changed.role}));
        self.record(who, "member.role_changed", ("member", user.as_str()), Some(was), Some(is))
            .await;
        Ok(changed)
    }

    /// Removes a member; anyone may remove themselves (leave). Removing an owner takes an
    /// owner; the last owner stays (`last_owner`). Their next request is refused on every node.
    pub async fn remove_member(&self, who: &Principal, user: &UserId) -> Result<()> {
        let leaving = who.actor.user() == Some(user);
        if !leaving {
            who.require(Need::Manage)?;
        }
        let current = self.member(who, user).await?;
        if current.role == Role::Owner && !leaving && who.role != Role::Owner {
            return Err(Error::Forbidden(Need::Own.refusal()));
        }
        self.store().change_member(&who.workspace, user, MemberChange::Remove, now()).await?;
        self.forget_member(&who.workspace);
        tracing::info!(workspace = %who.workspace, user_id = %user, "member removed");
        let was = json!({"email": current.email, "role": current.role});
        let action = if leaving { "member.left" } else { "member.removed" };
        self.record(who, action, ("member", user.as_str()), Some(was), None).await;
        Ok(())
    }

    async fn member(&self, who: &Principal, user: &UserId) -> Result<Member> {
        self.store()
            .members(&who.workspace)
            .await?
            .into_iter()
            .find(|m| &m.user_id == user)
            .ok_or_else(|| Error::not_found(Resource::Member, user.as_str()))
    }

    fn forget_member(&self, workspace: &WorkspaceId) {
        self.access().forget_members(workspace);
    }

    /// A single-use invite with a role no higher than the caller's; its token is shown once.
    pub async fn create_invite(&self, who: &Principal, input: NewInvite) -> Result<CreatedInvite> {
        who.require(Need::Manage)?;
        if !who.role.includes(input.role) {
            return Err(Error::Forbidden(format!(
                "you cannot invite with a role above your own ({})",
                who.role
            )));
        }
        let pending = self.store().invites(&who.workspace).await?;
        let at = now();
        let waiting = pending.iter().filter(|i| i.expires_at > at).count();
        if waiting >= access::MAX_PENDING_INVITES {
            return Err(Error::QuotaExceeded {
                quota: Quota::PendingInvites,
                limit: access::MAX_PENDING_INVITES as u64,
            });
        }
        if self.store().members(&who.workspace).await?.len() + waiting >= MAX_MEMBERS {
            return Err(Error::QuotaExceeded { quota: Quota::Members, limit: MAX_MEMBERS as u64 });
        }
        let token = random_secret()?;
        let record = InviteRecord {
            id: uuid::Uuid::now_v7().to_string(),
            workspace: who.workspace.clone(),
            token_hash: self.auth().secret_hash(&token),
            role: input.role,
            email: input.email.map(|e| e.as_str().to_owned()),
            created_by: self.actor_label(who).await?,
            created_at: at,
            expires_at: at + input.lasts,
        };
        self.store().insert_invite(&record).await?;
        tracing::info!(workspace = %who.workspace, invite = %record.id, role = %record.role, "invite created");
        let after =
            json!({"role": record.role, "email": record.email, "expires_at": record.expires_at});
        self.record(who, "invite.created", ("invite", &record.id), None, Some(after)).await;
        Ok(CreatedInvite {
            invite: Invite {
                id: record.id,
                role: record.role,
                email: record.email,
                created_by: record.created_by,
                created_at: record.created_at,
                expires_at: record.expires_at,
            },
            token,
        })
    }

    pub async fn invites(&self, who: &Principal) -> Result<Vec<Invite>> {
        who.require(Need::Manage)?;
        self.store().invites(&who.workspace).await
    }

    pub async fn delete_invite(&self, who: &Principal, id: &str) -> Result<()> {
        who.require(Need::Manage)?;
        self.store().delete_invite(&who.workspace, id).await?;
        self.record(who, "invite.deleted", ("invite", id), None, None).await;
        Ok(())
    }

    /// Accepts an invite as the signed-in person: they become a member with its role. Unknown,
    /// used or expired tokens are all `invite_not_found`.
    pub async fn accept_invite(&self, who: &Principal, token: &str) -> Result<Workspace> {
        let user = who.user()?;
        let hash = self.auth().secret_hash(token);
        let (workspace, role) = self.store().accept_invite(&hash, user, now()).await?;
        self.forget_member(&workspace);
        tracing::info!(workspace = %workspace, user_id = %user, role = %role, "invite accepted");
        let joined = Principal { workspace: workspace.clone(), role, ..who.clone() };
        let after = json!({"role": role});
        self.record(&joined, "member.joined", ("member", user.as_str()), None, Some(after)).await;
        self.store().workspace(&workspace, Some(user), role).await
    }

    /// An API key for the caller's workspace, with a role no higher than the caller's; its
    /// secret is shown once and stored as a keyed hash.
    pub async fn create_key(&self, who: &Principal, input: NewKey) -> Result<CreatedKey> {
        who.require(Need::Manage)?;
        if !who.role.includes(input.role) {
            return Err(Error::Forbidden(format!(
                "a key cannot have a role above yours ({})",
                who.role
            )));
        }
        let keys = self.store().keys(&who.workspace).await?;
        if keys.iter().filter(|k| k.revoked_at.is_none()).count() >= access::MAX_KEYS {
            return Err(Error::QuotaExceeded {
                quota: Quota::ApiKeys,
                limit: access::MAX_KEYS as u64,
            });
        }
        let id = random_secret()?[..KEY_ID_CHARS].to_owned();
        let secret = format!("{}_{}", ApiKey::prefix_of(&id), random_secret()?);
        let key = ApiKey {
            prefix: ApiKey::prefix_of(&id),
            id,
            name: input.name,
            role: input.role,
            created_by: self.actor_label(who).await?,
            created_at: now(),
            expires_at: input.expires_at,
            last_used_at: None,
            revoked_at: None,
        };
        let record = KeyRecord {
            key: key.clone(),
            workspace: who.workspace.clone(),
            secret_hash: self.auth().secret_hash(&secret),
        };
        self.store().insert_key(&record).await?;
        tracing::info!(workspace = %who.workspace, key = %key.id, role = %key.role, "API key created");
        let after = json!({"name": key.name, "role": key.role, "expires_at": key.expires_at});
        self.record(who, "key.created", ("key", &key.id), None, Some(after)).await;
        Ok(CreatedKey { key, secret })
    }

    pub async fn keys(&self, who: &Principal) -> Result<Vec<ApiKey>> {
        who.require(Need::Manage)?;
        self.store().keys(&who.workspace).await
    }

    /// Revokes a key: refused on every node within a second.
    pub async fn revoke_key(&self, who: &Principal, id: &str) -> Result<ApiKey> {
        who.require(Need::Manage)?;
        self.store().revoke_key(&who.workspace, id, now()).await?;
        self.access().keys.forget(&id.to_owned());
        tracing::info!(workspace = %who.workspace, key = %id, "API key revoked");
        self.record(who, "key.revoked", ("key", id), None, None).await;
        self.store()
            .keys(&who.workspace)
            .await?
            .into_iter()
            .find(|k| k.id == id)
            .ok_or_else(|| Error::not_found(Resource::ApiKey, id))
    }
}
