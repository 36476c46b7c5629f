//! Outbound webhooks: a workspace's endpoints (admins and owners change them, every member
//! reads them), their secrets (sealed, shown once, rotated with an overlap), a test event,
//! redelivery, and the deliveries with their answers. Sending is the webhooks' worker's
//! (`workers/webhooks/`).

use secrecy::ExposeSecret;

use super::{Core, Principal};
use crate::api::{DeliveryPage, WebhookList};
use crate::domain::now;
use crate::domain::webhook::{
    self, CreatedWebhook, Delivery, DeliveryId, DeliveryStatus, MAX_WEBHOOKS, NewWebhook,
    ROTATION_OVERLAP, RotatedSecret, TEST_EVENT, Webhook, WebhookId, WebhookPatch,
};
use crate::domain::workspace::{Need, WorkspaceId};
use crate::error::{Error, Result, ValidationErrors};
use crate::standard_webhooks::SigningKey;
use crate::store::WebhookRecord;

impl Core {
    /// Registers an endpoint. Its URL must lead to addresses the operator's policy allows
    /// (`tools.http.*`), checked after DNS here and again on every attempt. The secret is in
    /// this answer only.
    pub async fn create_webhook(&self, who: &Principal, new: NewWebhook) -> Result<CreatedWebhook> {
        who.require(Need::Manage)?;
        self.check_webhook_url(new.url.as_str()).await?;
        let id = WebhookId::generate();
        let (_, secret) = SigningKey::generate()
            .map_err(|e| Error::internal(format!("no randomness for a secret: {e}")))?;
        let at = now();
        let record = WebhookRecord {
            id: id.as_str().to_owned(),
            url: new.url.as_str().to_owned(),
            events: new.events.to_json(),
            description: new.description,
            enabled: true,
            disabled_reason: None,
            failure_run: 0,
            secret: self.seal_webhook_secret(&who.workspace, &id, secret.expose_secret())?,
            previous_secret: None,
            previous_until: None,
            after_seq: 0,
            created_at: at,
            updated_at: at,
            secret_rotated_at: None,
        };
        // It gets the events after its creation: every one committed before counts as before,
        // numbered now if it was not yet (PostgreSQL numbers soon after each commit).
        super::numbering::announce(self, &self.store().number_events(Some(&who.workspace)).await?);
        self.store().insert_webhook(&who.workspace, &record, MAX_WEBHOOKS).await?;
        let webhook = record.public();
        let after = serde_json::to_value(&webhook).ok();
        self.record(who, "webhook.created", ("webhook", id.as_str()), None, after).await;
        Ok(CreatedWebhook { webhook, secret: secret.expose_secret().to_owned() })
    }

    /// The workspace's endpoints.
    pub async fn webhooks(&self, who: &Principal) -> Result<WebhookList> {
        who.require(Need::Read)?;
        let records = self.store().webhooks(&who.workspace).await?;
        let webhooks = records.iter().map(|record| shown_to(who, record.public())).collect();
        Ok(WebhookList { webhooks })
    }

    /// One endpoint; another workspace's is `webhook_not_found`.
    pub async fn webhook(&self, who: &Principal, id: &WebhookId) -> Result<Webhook> {
        who.require(Need::Read)?;
        Ok(shown_to(who, self.store().webhook(&who.workspace, id).await?.public()))
    }

    /// Changes an endpoint. Disabling it holds its deliveries (pending ones wait); enabling it
    /// clears the failure run and sends what waits.
    pub async fn update_webhook(
        &self,
        who: &Principal,
        id: &WebhookId,
        patch: WebhookPatch,
    ) -> Result<Webhook> {
        who.require(Need::Manage)?;
        let before = self.store().webhook(&who.workspace, id).await?.public();
        if let Some(url) = &patch.url {
            self.check_webhook_url(url.as_str()).await?;
        }
        let after = self.store().update_webhook(&who.workspace, id, &patch, now()).await?.public();
        let (was, is) = (serde_json::to_value(&before).ok(), serde_json::to_value(&after).ok());
        self.record(who, "webhook.updated", ("webhook", id.as_str()), was, is).await;
        self.wakeups().webhooks.notify_one();
        Ok(after)
    }

    /// Deletes an endpoint and its deliveries.
    pub async fn delete_webhook(&self, who: &Principal, id: &WebhookId) -> Result<()> {
        who.require(Need::Manage)?;
        let before = self.store().webhook(&who.workspace, id).await?.public();
        self.store().delete_webhook(&who.workspace, id).await?;
        let was = serde_json::to_value(&before).ok();
        self.record(who, "webhook.deleted", ("webhook", id.as_str()), was, None).await;
        Ok(())
    }

    /// A new secret; the previous one keeps signing beside it for 24 hours.
    pub async fn rotate_webhook_secret(
        &self,
        who: &Principal,
        id: &WebhookId,
    ) -> Result<RotatedSecret> {
        who.require(Need::Manage)?;
        let (_, secret) = SigningKey::generate()
            .map_err(|e| Error::internal(format!("no randomness for a secret: {e}")))?;
        let sealed = self.seal_webhook_secret(&who.workspace, id, secret.expose_secret())?;
        let until = self
            .store()
            .rotate_webhook_secret(&who.workspace, id, &sealed, ROTATION_OVERLAP, now())
            .await?;
        let after = serde_json::json!({ "previous_valid_until": until });
        self.record(who, "webhook.secret_rotated", ("webhook", id.as_str()), None, Some(after))
            .await;
        Ok(RotatedSecret { secret: secret.expose_secret().to_owned(), previous_valid_until: until })
    }

    /// Queues a `webhook.test` event to the endpoint (a disabled one gets it once enabled).
    pub async fn test_webhook(&self, who: &Principal, id: &WebhookId) -> Result<Delivery> {
        who.require(Need::Manage)?;
        let at = now();
        let message = webhook::message_id();
        let body = webhook::test_body(id, at);
        self.queue_webhook(who, id, &message, TEST_EVENT, &body, "webhook.test_sent").await
    }

    /// Sends one delivery's message again, as a new delivery with the same `webhook-id` and
    /// body.
    pub async fn redeliver_webhook(
        &self,
        who: &Principal,
        id: &WebhookId,
        delivery: &DeliveryId,
    ) -> Result<Delivery> {
        who.require(Need::Manage)?;
        let (message, kind, body) =
            self.store().delivery_message(&who.workspace, id, delivery).await?;
        self.queue_webhook(who, id, &message, &kind, &body, "webhook.redelivered").await
    }

    /// A page of the endpoint's deliveries, newest first, with their attempts' answers.
    pub async fn webhook_deliveries(
        &self,
        who: &Principal,
        id: &WebhookId,
        before: Option<DeliveryId>,
        limit: u32,
    ) -> Result<DeliveryPage> {
        who.require(Need::Read)?;
        self.store().webhook(&who.workspace, id).await?;
        let deliveries =
            self.store().deliveries(&who.workspace, id, before.as_ref(), limit).await?;
        let full = deliveries.len() == usize::try_from(limit).unwrap_or(usize::MAX);
        let next_before = deliveries.last().filter(|_| full).map(|d| d.id.clone());
        Ok(DeliveryPage { deliveries, next_before })
    }

    /// The worker disabled an endpoint after its failure run: the audit log says so, as the
    /// service.
    pub(crate) async fn webhook_disabled(&self, owner: &WorkspaceId, id: &str, reason: &str) {
        tracing::warn!(workspace = %owner, webhook = id, reason, "webhook endpoint disabled");
        let after = serde_json::json!({ "enabled": false, "disabled_reason": reason });
        self.record_as(owner, "service", "webhook.disabled", ("webhook", id), Some(after)).await;
    }

    /// The signing keys of an endpoint's sealed secrets, the newest first.
    pub(crate) fn webhook_keys(
        &self,
        owner: &WorkspaceId,
        id: &str,
        sealed: &[&str],
    ) -> Result<Vec<SigningKey>> {
        let context = format!("webhook:{owner}:{id}");
        sealed
            .iter()
            .map(|s| {
                let secret = self.secrets().open(s, &context)?;
                SigningKey::from_secret(&secret)
                    .map_err(|_| Error::internal("a stored webhook secret does not parse"))
            })
            .collect()
    }

    async fn queue_webhook(
        &self,
        who: &Principal,
        id: &WebhookId,
        message: &str,
        kind: &str,
        body: &str,
        action: &str,
    ) -> Result<Delivery> {
        let created_at = now();
        let delivery = self.store().queue_delivery(&who.workspace, id, message, kind, body).await?;
        let after = serde_json::json!({ "delivery": delivery, "webhook_id": message });
        self.record(who, action, ("webhook", id.as_str()), None, Some(after)).await;
        self.wakeups().webhooks.notify_one();
        Ok(Delivery {
            id: delivery,
            webhook_id: message.to_owned(),
            event_type: kind.to_owned(),
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: Some(created_at),
            created_at,
            responses: Vec::new(),
        })
    }

    fn seal_webhook_secret(
        &self,
        owner: &WorkspaceId,
        id: &WebhookId,
        secret: &str,
    ) -> Result<String> {
        self.secrets().seal(secret, &format!("webhook:{owner}:{id}"))
    }

    /// A URL whose host leads to an address the operator's policy refuses is
    /// `validation_failed` on `url`.
    async fn check_webhook_url(&self, url: &str) -> Result<()> {
        match self.http_fetch().policy().check_host(url).await {
            Ok(()) => Ok(()),
            Err(problem) => Err(ValidationErrors::single("url", problem).into()),
        }
    }
}

/// An endpoint as `who` may see it: whole for those who manage endpoints, its URL cut to the
/// origin for the others (see [`Webhook::for_reader`]).
fn shown_to(who: &Principal, webhook: Webhook) -> Webhook {
    if who.role.allows(Need::Manage) { webhook } else { webhook.for_reader() }
}
