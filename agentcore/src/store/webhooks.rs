//! Outbound webhooks' endpoints: their URL, the events they ask for, their sealed signing
//! secrets (and the previous one during a rotation's overlap), scoped to their workspace.
//! Their deliveries are `webhook_deliveries.rs`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::db::{SqlStore, query, query_as, query_scalar};
use super::shared::watched;
use crate::domain::quota::Quota;
use crate::domain::webhook::{Webhook, WebhookEvents, WebhookId, WebhookPatch};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Resource, Result};

/// A workspace's endpoints.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Stores a new endpoint, to be sent the owner's events after the latest one now. Fails
    /// with `quota_exceeded` when the owner has `max` endpoints already.
    async fn insert_webhook(
        &self,
        owner: &WorkspaceId,
        record: &WebhookRecord,
        max: u64,
    ) -> Result<()>;
    /// The owner's endpoints, oldest first.
    async fn webhooks(&self, owner: &WorkspaceId) -> Result<Vec<WebhookRecord>>;
    /// Fails with `webhook_not_found`.
    async fn webhook(&self, owner: &WorkspaceId, id: &WebhookId) -> Result<WebhookRecord>;
    /// Applies `patch` (enabling clears the failure run and the reason); fails with
    /// `webhook_not_found`.
    async fn update_webhook(
        &self,
        owner: &WorkspaceId,
        id: &WebhookId,
        patch: &WebhookPatch,
        at: DateTime<Utc>,
    ) -> Result<WebhookRecord>;
    /// Deletes an endpoint and its deliveries; fails with `webhook_not_found`.
    async fn delete_webhook(&self, owner: &WorkspaceId, id: &WebhookId) -> Result<()>;
    /// Makes `sealed` the secret, the current one the previous, which signs beside it for
    /// `overlap` (by the database's clock); returns until when.
    async fn rotate_webhook_secret(
        &self,
        owner: &WorkspaceId,
        id: &WebhookId,
        sealed: &str,
        overlap: Duration,
        at: DateTime<Utc>,
    ) -> Result<DateTime<Utc>>;
}

/// An endpoint's row with its sealed secrets.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebhookRecord {
    pub id: String,
    pub url: String,
    pub events: String,
    pub description: String,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub failure_run: i32,
    /// Sealed (`crypto::SecretBox`), to the owner and the endpoint.
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_until: Option<DateTime<Utc>>,
    /// The owner's latest event when it was made: it is sent the later ones.
    pub after_seq: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub secret_rotated_at: Option<DateTime<Utc>>,
}

impl WebhookRecord {
    /// As the API shows it: never a secret.
    pub fn public(&self) -> Webhook {
        Webhook {
            id: WebhookId::parse(&self.id).unwrap_or_else(|_| WebhookId::generate()),
            url: self.url.clone(),
            events: WebhookEvents::from_json(&self.events).types().to_vec(),
            description: self.description.clone(),
            enabled: self.enabled,
            disabled_reason: self.disabled_reason.clone(),
            failure_run: self.failure_run,
            created_at: self.created_at,
            updated_at: self.updated_at,
            secret_rotated_at: self.secret_rotated_at,
        }
    }
}

#[async_trait]
impl<S: SqlStore> WebhookStore for S {
    async fn insert_webhook(
        &self,
        owner: &WorkspaceId,
        record: &WebhookRecord,
        max: u64,
    ) -> Result<()> {
        watched(self.storage_health(), async {
            let mut tx = self.begin_write().await?;
            // The workspace's row first: two creations at once count one after the other.
            let lock = format!("{}{}", sql::LOCK_WORKSPACE, self.dialect().lock());
            query(&lock).bind(owner.as_str()).execute(&mut tx).await?;
            let count: i64 =
                query_scalar(sql::COUNT).bind(owner.as_str()).fetch_one(&mut tx).await?;
            if u64::try_from(count).unwrap_or(0) >= max {
                return Err(Error::QuotaExceeded { quota: Quota::Webhooks, limit: max });
            }
            let latest: Option<i64> = query_scalar(sql::LATEST_EVENT)
                .bind(owner.as_str())
                .fetch_optional(&mut tx)
                .await?;
            let latest = latest.unwrap_or(0);
            query(sql::INSERT)
                .bind(&record.id)
                .bind(owner.as_str())
                .bind(&record.url)
                .bind(&record.events)
                .bind(&record.description)
                .bind(record.enabled)
                .bind(&record.secret)
                .bind(latest)
                .bind(record.created_at)
                .execute(&mut tx)
                .await?;
            query(sql::START_CURSOR).bind(owner.as_str()).bind(latest).execute(&mut tx).await?;
            tx.commit().await
        })
        .await
    }

    async fn webhooks(&self, owner: &WorkspaceId) -> Result<Vec<WebhookRecord>> {
        let statement = format!("{} WHERE owner_id = $1 ORDER BY created_at, id", sql::SELECT);
        Ok(query_as(&statement).bind(owner.as_str()).fetch_all(&mut self.read().await?).await?)
    }

    async fn webhook(&self, owner: &WorkspaceId, id: &WebhookId) -> Result<WebhookRecord> {
        let statement = format!("{} WHERE owner_id = $1 AND id = $2", sql::SELECT);
        let row: Option<WebhookRecord> = query_as(&statement)
            .bind(owner.as_str())
            .bind(id.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        row.ok_or_else(|| Error::not_found(Resource::Webhook, id.as_str()))
    }

    async fn update_webhook(
        &self,
        owner: &WorkspaceId,
        id: &WebhookId,
        patch: &WebhookPatch,
        at: DateTime<Utc>,
    ) -> Result<WebhookRecord> {
        watched(self.storage_health(), async {
            let row: Option<WebhookRecord> = query_as(&sql::update())
                .bind(owner.as_str())
                .bind(id.as_str())
                .bind(patch.url.as_ref().map(|u| u.as_str()))
                .bind(patch.events.as_ref().map(WebhookEvents::to_json))
                .bind(patch.description.as_deref())
                .bind(patch.enabled)
                .bind(at)
                .fetch_optional(self.writer())
                .await?;
            row.ok_or_else(|| Error::not_found(Resource::Webhook, id.as_str()))
        })
        .await
    }

    async fn delete_webhook(&self, owner: &WorkspaceId, id: &WebhookId) -> Result<()> {
        watched(self.storage_health(), async {
            let done = query(sql::DELETE)
                .bind(owner.as_str())
                .bind(id.as_str())
                .execute(self.writer())
                .await?;
            if done.rows_affected() == 0 {
                return Err(Error::not_found(Resource::Webhook, id.as_str()));
            }
            Ok(())
        })
        .await
    }

    async fn rotate_webhook_secret(
        &self,
        owner: &WorkspaceId,
        id: &WebhookId,
        sealed: &str,
        overlap: Duration,
        at: DateTime<Utc>,
    ) -> Result<DateTime<Utc>> {
        watched(self.storage_health(), async {
            let until: Option<DateTime<Utc>> = query_scalar(&sql::rotate(self.dialect().clock()))
                .bind(owner.as_str())
                .bind(id.as_str())
                .bind(sealed)
                .bind(overlap.as_secs_f64())
                .bind(at)
                .fetch_optional(self.writer())
                .await?;
            until.ok_or_else(|| Error::not_found(Resource::Webhook, id.as_str()))
        })
        .await
    }
}

/// The statements of this area, the same on both backends.
mod sql {
    use crate::store::sql::Clock;

    const COLUMNS: &str = "id, url, events, description, enabled, disabled_reason, failure_run, \
        secret, previous_secret, previous_until, after_seq, created_at, updated_at, \
        secret_rotated_at";

    pub(super) const SELECT: &str = "SELECT id, url, events, description, enabled, \
        disabled_reason, failure_run, secret, previous_secret, previous_until, after_seq, \
        created_at, updated_at, secret_rotated_at FROM webhooks";
    pub(super) const LOCK_WORKSPACE: &str = "SELECT id FROM workspaces WHERE id = $1";
    pub(super) const COUNT: &str = "SELECT COUNT(*) FROM webhooks WHERE owner_id = $1";
    pub(super) const LATEST_EVENT: &str = "SELECT seq FROM event_seqs WHERE owner_id = $1";
    pub(super) const INSERT: &str = "INSERT INTO webhooks (id, owner_id, url, events, \
        description, enabled, failure_run, secret, after_seq, created_at, updated_at) \
        VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8, $9, $9)";
    /// The owner's fan-out cursor starts at the latest event when its first endpoint is made.
    pub(super) const START_CURSOR: &str = "INSERT INTO webhook_cursors (owner_id, seq) \
        VALUES ($1, $2) ON CONFLICT (owner_id) DO NOTHING";
    pub(super) const DELETE: &str = "DELETE FROM webhooks WHERE owner_id = $1 AND id = $2";

    /// `$3` url, `$4` events, `$5` description, `$6` enabled, each kept when NULL; `$7` the
    /// time. Enabling clears the failure run; any change of `enabled` clears the reason.
    pub(super) fn update() -> String {
        format!(
            "UPDATE webhooks SET url = COALESCE($3, url), events = COALESCE($4, events), \
             description = COALESCE($5, description), enabled = COALESCE($6, enabled), \
             failure_run = CASE WHEN $6 THEN 0 ELSE failure_run END, \
             disabled_reason = CASE WHEN $6 IS NULL THEN disabled_reason ELSE NULL END, \
             updated_at = $7 WHERE owner_id = $1 AND id = $2 RETURNING {COLUMNS}"
        )
    }

    /// `$3` the new sealed secret, `$4` the overlap in seconds, `$5` the time.
    pub(super) fn rotate(clock: Clock) -> String {
        format!(
            "UPDATE webhooks SET previous_secret = secret, secret = $3, previous_until = {}, \
             secret_rotated_at = $5, updated_at = $5 WHERE owner_id = $1 AND id = $2 \
             RETURNING previous_until",
            (clock.plus)("$4")
        )
    }
}
