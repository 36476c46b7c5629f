//! Outbound webhooks (the endpoints, their deliveries and what each attempt got) and inbound
//! triggers, and the one-time answers that carry a secret.

use agentcore::api::{DeliveryPage, TriggerList, WebhookList};
use agentcore::domain::trigger::CreatedTrigger;
use agentcore::domain::webhook::{CreatedWebhook, DeliveryAttempt};

use super::{Render, Screen, cell, flat, rows, short};

impl Render for WebhookList {
    fn render(&self, screen: Screen) -> String {
        let headers = ["ID", "URL", "EVENTS", "ENABLED", "FAILURES", "DESCRIPTION"];
        rows(screen, &self.webhooks, headers, |webhook| {
            let events: Vec<&str> = webhook.events.iter().map(|kind| kind.as_str()).collect();
            let enabled = match (&webhook.enabled, &webhook.disabled_reason) {
                (true, _) => "true".to_owned(),
                (false, Some(reason)) => format!("false ({})", short(reason)),
                (false, None) => "false".to_owned(),
            };
            [
                cell(&webhook.id),
                webhook.url.clone(),
                events.join(", "),
                enabled,
                webhook.failure_run.to_string(),
                short(&webhook.description),
            ]
        })
    }
}

/// The deliveries, newest first, each with its latest attempt's answer.
impl Render for DeliveryPage {
    fn render(&self, screen: Screen) -> String {
        let headers = ["ID", "EVENT", "WEBHOOK-ID", "STATUS", "ATTEMPTS", "LAST ANSWER", "CREATED"];
        let table = rows(screen, &self.deliveries, headers, |delivery| {
            [
                cell(&delivery.id),
                delivery.event_type.clone(),
                delivery.webhook_id.clone(),
                delivery.status.as_str().to_owned(),
                delivery.attempts.to_string(),
                delivery.responses.first().map_or_else(|| "-".to_owned(), answer),
                cell(&delivery.created_at),
            ]
        });
        match &self.next_before {
            Some(next) => format!("{table}\nOlder deliveries: --before {next}"),
            None => table,
        }
    }
}

/// What one attempt got, in a few words: `HTTP 500 (12 ms)`, or why there was no answer.
fn answer(attempt: &DeliveryAttempt) -> String {
    let what = match (attempt.status, &attempt.error) {
        (Some(status), _) => format!("HTTP {status}"),
        (None, Some(error)) => short(error),
        (None, None) => "no answer".to_owned(),
    };
    format!("{what} ({} ms)", attempt.duration_ms)
}

impl Render for TriggerList {
    fn render(&self, screen: Screen) -> String {
        let headers = ["ID", "AGENT", "NAME", "TASK TITLE", "ENABLED", "CALLS", "LAST CALL", "URL"];
        rows(screen, &self.triggers, headers, |trigger| {
            [
                cell(&trigger.id),
                cell(&trigger.agent),
                short(&trigger.name),
                short(&trigger.title),
                trigger.enabled.to_string(),
                trigger.calls.to_string(),
                cell(&trigger.last_called_at),
                trigger.url.clone(),
            ]
        })
    }
}

/// A new endpoint and its secret.
impl Render for CreatedWebhook {
    fn render(&self, screen: Screen) -> String {
        format!("{}\nSecret: {}", flat(screen, &self.webhook), self.secret)
    }
}

/// A new trigger and its secret.
impl Render for CreatedTrigger {
    fn render(&self, screen: Screen) -> String {
        format!("{}\nSecret: {}", flat(screen, &self.trigger), self.secret)
    }
}
