//! Outbound webhooks: the bodies of `POST` and `PATCH /api/webhooks`, the deliveries' query,
//! and the lists.

use serde::{Deserialize, Serialize};

use crate::domain::webhook::{
    self, DEFAULT_PAGE, Delivery, DeliveryId, MAX_PAGE, NewWebhook, Webhook, WebhookEvents,
    WebhookPatch, WebhookUrl,
};
use crate::error::ValidationErrors;

use super::required;

/// The body of `POST /api/webhooks`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateWebhookRequest {
    /// Where deliveries are POSTed: http or https, on a public address unless the operator
    /// allows others, without user info, at most 2,000 characters.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false, max_length = 2000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The event types to send (`task.completed`, `approval.requested`, ...): at least one.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false, max_items = 13))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    /// Up to 500 characters of one line.
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 500))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl CreateWebhookRequest {
    pub fn parse(&self) -> Result<NewWebhook, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let url =
            required(&mut e, "url", &self.url).and_then(|v| e.check("url", WebhookUrl::parse(v)));
        let events = match &self.events {
            Some(names) => e.check("events", WebhookEvents::parse(names)),
            None => {
                e.add("events", "is required");
                None
            }
        };
        let description = match self.description.as_deref() {
            Some(v) => e.check("description", webhook::description(v)),
            None => Some(String::new()),
        };
        match (url, events, description) {
            (Some(url), Some(events), Some(description)) if e.is_empty() => {
                Ok(NewWebhook { url, events, description })
            }
            _ => Err(e),
        }
    }
}

/// The body of `PATCH /api/webhooks/{id}`: what is given changes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateWebhookRequest {
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 2000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_items = 13))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 500))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `false` stops deliveries (pending ones wait); `true` resumes them and clears the
    /// failure run.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl UpdateWebhookRequest {
    pub fn parse(&self) -> Result<WebhookPatch, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let patch = WebhookPatch {
            url: self.url.as_deref().and_then(|v| e.check("url", WebhookUrl::parse(v))),
            events: self.events.as_ref().and_then(|v| e.check("events", WebhookEvents::parse(v))),
            description: self
                .description
                .as_deref()
                .and_then(|v| e.check("description", webhook::description(v))),
            enabled: self.enabled,
        };
        if e.is_empty() { Ok(patch) } else { Err(e) }
    }
}

/// `GET /api/webhooks/{id}/deliveries`' query, as sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct DeliveryParams {
    /// Deliveries older than this one (the `next_before` of the page before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// 1 to 100 (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl DeliveryParams {
    pub fn parse(&self) -> Result<(Option<DeliveryId>, u32), ValidationErrors> {
        let mut e = ValidationErrors::new();
        let limit = self.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            e.add("limit", format!("must be 1 to {MAX_PAGE}"));
        }
        let before = self.before.as_deref().and_then(|v| e.check("before", DeliveryId::parse(v)));
        if e.is_empty() { Ok((before, limit)) } else { Err(e) }
    }
}

/// `GET /api/webhooks`: the workspace's endpoints, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookList {
    pub webhooks: Vec<Webhook>,
}

/// `GET /api/webhooks/{id}/deliveries`: a page of deliveries, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryPage {
    pub deliveries: Vec<Delivery>,
    /// Pass as `before` for the next (older) page; `null` on the last page.
    pub next_before: Option<DeliveryId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_field_is_named() {
        let request = CreateWebhookRequest {
            url: Some("ftp://x".into()),
            events: Some(vec!["step.finished".into()]),
            description: Some("x".repeat(501)),
        };
        let errors = request.parse().unwrap_err();
        let fields: Vec<&str> = errors.fields().keys().map(String::as_str).collect();
        assert_eq!(fields, ["description", "events", "url"]);
        let missing = CreateWebhookRequest::default().parse().unwrap_err();
        assert!(missing.fields().contains_key("url") && missing.fields().contains_key("events"));
        let patch = UpdateWebhookRequest { events: Some(vec![]), ..Default::default() };
        assert!(patch.parse().unwrap_err().fields().contains_key("events"));
        let page = DeliveryParams { limit: Some(101), before: None };
        assert!(page.parse().unwrap_err().fields().contains_key("limit"));
    }
}
