//! Outbound webhooks and inbound triggers, as typed calls, in the client's workspace.

use axum::http::Method;

use agentcore::api::{
    CreateTriggerRequest, CreateWebhookRequest, Deleted, DeliveryPage, TriggerList,
    UpdateTriggerRequest, UpdateWebhookRequest, WebhookList,
};
use agentcore::domain::trigger::{CreatedTrigger, Trigger};
use agentcore::domain::webhook::{CreatedWebhook, Delivery, Webhook};

use super::{Reply, query};
use crate::client::{Client, segment};
use crate::failure::Failure;

fn webhook_path(id: &str, rest: &str) -> String {
    format!("/api/webhooks/{}{rest}", segment(id))
}

fn trigger_path(id: &str, rest: &str) -> String {
    format!("/api/triggers/{}{rest}", segment(id))
}

impl Client {
    pub async fn webhooks(&self) -> Result<Reply<WebhookList>, Failure> {
        self.get_as("/api/webhooks").await
    }

    pub async fn create_webhook(
        &self,
        request: &CreateWebhookRequest,
    ) -> Result<Reply<CreatedWebhook>, Failure> {
        self.post_as("/api/webhooks", Some(request)).await
    }

    pub async fn webhook(&self, id: &str) -> Result<Reply<Webhook>, Failure> {
        self.get_as(&webhook_path(id, "")).await
    }

    pub async fn update_webhook(
        &self,
        id: &str,
        request: &UpdateWebhookRequest,
    ) -> Result<Reply<Webhook>, Failure> {
        self.typed(Method::PATCH, &webhook_path(id, ""), Some(request)).await
    }

    pub async fn delete_webhook(&self, id: &str) -> Result<Reply<Deleted>, Failure> {
        self.delete_as(&webhook_path(id, "")).await
    }

    pub async fn rotate_webhook_secret(
        &self,
        id: &str,
    ) -> Result<Reply<agentcore::domain::webhook::RotatedSecret>, Failure> {
        self.post_as(&webhook_path(id, "/rotate"), None::<&()>).await
    }

    pub async fn test_webhook(&self, id: &str) -> Result<Reply<Delivery>, Failure> {
        self.post_as(&webhook_path(id, "/test"), None::<&()>).await
    }

    /// A page of the endpoint's deliveries, newest first.
    pub async fn webhook_deliveries(
        &self,
        id: &str,
        limit: Option<u32>,
        before: Option<String>,
    ) -> Result<Reply<DeliveryPage>, Failure> {
        let page = query(&[("limit", limit.map(|l| l.to_string())), ("before", before)]);
        self.get_as(&webhook_path(id, &format!("/deliveries{page}"))).await
    }

    pub async fn redeliver_webhook(
        &self,
        id: &str,
        delivery: &str,
    ) -> Result<Reply<Delivery>, Failure> {
        let path = webhook_path(id, &format!("/deliveries/{}/redeliver", segment(delivery)));
        self.post_as(&path, None::<&()>).await
    }

    /// The workspace's triggers, or one agent's.
    pub async fn triggers(&self, agent: Option<String>) -> Result<Reply<TriggerList>, Failure> {
        self.get_as(&format!("/api/triggers{}", query(&[("agent", agent)]))).await
    }

    pub async fn add_trigger(
        &self,
        request: &CreateTriggerRequest,
    ) -> Result<Reply<CreatedTrigger>, Failure> {
        self.post_as("/api/triggers", Some(request)).await
    }

    pub async fn trigger(&self, id: &str) -> Result<Reply<Trigger>, Failure> {
        self.get_as(&trigger_path(id, "")).await
    }

    pub async fn update_trigger(
        &self,
        id: &str,
        request: &UpdateTriggerRequest,
    ) -> Result<Reply<Trigger>, Failure> {
        self.typed(Method::PATCH, &trigger_path(id, ""), Some(request)).await
    }

    pub async fn delete_trigger(&self, id: &str) -> Result<Reply<Deleted>, Failure> {
        self.delete_as(&trigger_path(id, "")).await
    }

    pub async fn rotate_trigger_secret(
        &self,
        id: &str,
    ) -> Result<Reply<agentcore::domain::trigger::RotatedSecret>, Failure> {
        self.post_as(&trigger_path(id, "/rotate"), None::<&()>).await
    }
}
