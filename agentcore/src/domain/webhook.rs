//! Outbound webhooks: a workspace's endpoints, the events each asks for, what a delivery sends
//! (the Standard Webhooks body, rendered once) and the rules of its retries.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::event::{Event, EventType};

generated_id!(
    /// An endpoint's id: a UUID v7 in its hyphenated text form.
    WebhookId
);

generated_id!(
    /// A delivery's id: a UUID v7, so newer deliveries have greater ids.
    DeliveryId
);

/// Endpoints one workspace may have.
pub const MAX_WEBHOOKS: u64 = 20;
/// The longest description, in characters.
pub const DESCRIPTION_MAX: usize = 500;
/// Deliveries of one endpoint waiting to be sent; an event past it makes a delivery that is
/// `failed` at once (listed, and redeliverable), so a dead endpoint cannot grow without end.
pub const MAX_PENDING: i64 = 1_000;
/// The most bytes of an answer's body kept with its attempt.
pub const RESPONSE_BYTES: usize = 2_048;
/// How long the previous secret keeps signing beside the new one after a rotation.
pub const ROTATION_OVERLAP: Duration = Duration::from_secs(24 * 3600);
/// The event type of a test delivery (`POST /api/webhooks/{id}/test`); no endpoint asks for it.
pub const TEST_EVENT: &str = "webhook.test";
/// Deliveries a page lists: 20 unless asked, at most 100.
pub const DEFAULT_PAGE: u32 = 20;
pub const MAX_PAGE: u32 = 100;

/// The events an endpoint may ask for: those of the stream that a run's steps and the live-only
/// ones aside.
pub const SUBSCRIBABLE: [EventType; 13] = [
    EventType::TaskAdded,
    EventType::TaskRequeued,
    EventType::TaskStarted,
    EventType::TaskCompleted,
    EventType::TaskFailed,
    EventType::TaskCancelled,
    EventType::ApprovalRequested,
    EventType::ApprovalApproved,
    EventType::ApprovalDenied,
    EventType::AgentStatus,
    EventType::BudgetWarning,
    EventType::BudgetExhausted,
    EventType::ScheduleMissed,
];

/// An endpoint's URL: http or https, with a host, without user info, at most 2,000
/// characters. Where it leads (a public address, unless the operator allows) is checked by the
/// facade after DNS, and again on every attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl(String);

impl WebhookUrl {
    pub const MAX_CHARS: usize = 2_000;

    pub fn parse(value: &str) -> Result<Self, String> {
        if value.len() > Self::MAX_CHARS {
            return Err(format!("must be at most {} characters", Self::MAX_CHARS));
        }
        let url = reqwest::Url::parse(value).map_err(|e| format!("is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("must be an http or https URL".into());
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("must name a host".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("must not carry user info (user:password@)".into());
        }
        Ok(Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The event types an endpoint asks for: 1 to 13 of [`SUBSCRIBABLE`], each once, in the
/// order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEvents(Vec<EventType>);

impl WebhookEvents {
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let mut events = Vec::new();
        for name in names {
            let name = name.as_ref();
            let Some(kind) = SUBSCRIBABLE.into_iter().find(|k| k.as_str() == name) else {
                let known: Vec<&str> = SUBSCRIBABLE.iter().map(|k| k.as_str()).collect();
                return Err(format!(
                    "'{}' is not an event type an endpoint can ask for; these are: {}",
                    super::runtime::cut(name, 64),
                    known.join(", ")
                ));
            };
            if !events.contains(&kind) {
                events.push(kind);
            }
        }
        if events.is_empty() {
            return Err("must name at least one event type".into());
        }
        Ok(Self(events))
    }

    pub fn types(&self) -> &[EventType] {
        &self.0
    }

    pub fn wants(&self, kind: EventType) -> bool {
        self.0.contains(&kind)
    }

    /// As stored: a JSON array of the types' words (the fan-out finds `"<type>"` in it).
    pub fn to_json(&self) -> String {
        let words: Vec<&str> = self.0.iter().map(|k| k.as_str()).collect();
        serde_json::to_string(&words).unwrap_or_else(|_| "[]".into())
    }

    /// Reads the stored form; a word no longer known is dropped.
    pub fn from_json(stored: &str) -> Self {
        let words: Vec<String> = serde_json::from_str(stored).unwrap_or_default();
        Self(SUBSCRIBABLE.into_iter().filter(|k| words.iter().any(|w| w == k.as_str())).collect())
    }

    /// The `LIKE` pattern that finds `kind` in the stored form.
    pub fn pattern(kind: EventType) -> String {
        format!("%\"{}\"%", kind.as_str())
    }
}

/// What a description may be: up to 500 characters of one line.
pub fn description(value: &str) -> Result<String, String> {
    super::text::line(value, 0, DESCRIPTION_MAX)
}

/// A new endpoint, validated.
#[derive(Debug, Clone)]
pub struct NewWebhook {
    pub url: WebhookUrl,
    pub events: WebhookEvents,
    pub description: String,
}

/// What `PATCH /api/webhooks/{id}` changes; `None` keeps the field.
#[derive(Debug, Clone, Default)]
pub struct WebhookPatch {
    pub url: Option<WebhookUrl>,
    pub events: Option<WebhookEvents>,
    pub description: Option<String>,
    /// `true` also clears the failure run and the reason it was disabled.
    pub enabled: Option<bool>,
}

/// An endpoint as the API shows it: never its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Webhook {
    pub id: WebhookId,
    pub url: String,
    pub events: Vec<EventType>,
    pub description: String,
    pub enabled: bool,
    /// Why it was disabled, when the service disabled it (a run of failed attempts).
    pub disabled_reason: Option<String>,
    /// Failed attempts in a row since the last success.
    pub failure_run: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When the secret was last rotated (the previous one signs too for 24 hours after).
    pub secret_rotated_at: Option<DateTime<Utc>>,
}

impl Webhook {
    /// The endpoint as a member below admin sees it: its URL cut to the origin (`https://
    /// hooks.example.com/…`), since a receiver's URL often carries a token in its path or
    /// query (Slack's and Discord's incoming webhooks) that would let anyone post there.
    pub fn for_reader(mut self) -> Self {
        if let Ok(url) = reqwest::Url::parse(&self.url) {
            let origin = url.origin().ascii_serialization();
            let more = url.path() != "/" || url.query().is_some() || url.fragment().is_some();
            self.url = if more { format!("{origin}/…") } else { format!("{origin}/") };
        }
        self
    }
}

/// `POST /api/webhooks`: the endpoint and its secret, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedWebhook {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// The signing secret (`whsec_` and base64): shown only in this answer.
    pub secret: String,
}

/// `POST /api/webhooks/{id}/rotate`: the new secret, shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RotatedSecret {
    pub secret: String,
    /// Until when the previous secret signs beside this one.
    pub previous_valid_until: DateTime<Utc>,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Waiting for its first or next attempt.
    Pending,
    /// An attempt was answered with a 2xx.
    Delivered,
    /// Every attempt of the schedule failed (or the endpoint had too many pending).
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Failed].into_iter().find(|s| s.as_str() == value)
    }
}

/// One delivery of one message to one endpoint, with its attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Delivery {
    pub id: DeliveryId,
    /// The message id sent as `webhook-id`: the same on every attempt and on a redelivery.
    pub webhook_id: String,
    pub event_type: String,
    pub status: DeliveryStatus,
    pub attempts: i32,
    /// When the next attempt is due (`pending` only).
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// The attempts made, the latest first.
    pub responses: Vec<DeliveryAttempt>,
}

/// What one attempt got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryAttempt {
    /// 1 for the first.
    pub attempt: i32,
    pub at: DateTime<Utc>,
    /// The endpoint's HTTP status, when it answered.
    pub status: Option<u16>,
    /// Why there was no answer (refused address, timeout, connection error).
    pub error: Option<String>,
    pub duration_ms: i64,
    /// The answer's body, its first 2,048 bytes (as UTF-8, invalid bytes replaced).
    pub response: Option<String>,
}

/// The outcome of one attempt, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptOutcome {
    pub status: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: i64,
    pub response: Option<String>,
}

impl AttemptOutcome {
    /// Only a 2xx answer delivers.
    pub fn delivered(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// When to try again after `attempts` failed attempts, by `schedule` (the delay before the
/// 2nd attempt, the 3rd...); `None` once the schedule is spent: the delivery has failed.
pub fn next_delay(schedule: &[Duration], attempts: i32) -> Option<Duration> {
    let index = usize::try_from(attempts).ok()?.checked_sub(1)?;
    schedule.get(index).copied()
}

/// The body every attempt of a message sends: `{"type", "timestamp", "data"}`, `data` the
/// event exactly as the stream sends it.
pub fn body(event: &Event) -> String {
    let body = serde_json::json!({
        "type": event.kind.as_str(),
        "timestamp": event.at.to_rfc3339_opts(SecondsFormat::Micros, true),
        "data": event,
    });
    body.to_string()
}

/// The body of a test delivery.
pub fn test_body(webhook: &WebhookId, at: DateTime<Utc>) -> String {
    let body = serde_json::json!({
        "type": TEST_EVENT,
        "timestamp": at.to_rfc3339_opts(SecondsFormat::Micros, true),
        "data": { "webhook": webhook.as_str(), "message": "A test event sent on request." },
    });
    body.to_string()
}

/// A new message id: `msg_` and a UUID v7 (unique, at most 256 characters as the spec asks).
pub fn message_id() -> String {
    format!("msg_{}", uuid::Uuid::now_v7().simple())
}

/// An answer's body as kept: its first [`RESPONSE_BYTES`], as text, a NUL (which PostgreSQL's
/// text refuses) replaced.
pub fn kept_response(body: &[u8]) -> String {
    let head = &body[..body.len().min(RESPONSE_BYTES)];
    String::from_utf8_lossy(head).replace('\0', "\u{FFFD}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_only_the_origin_of_an_endpoint() {
        let at = chrono::Utc::now();
        let shown = |url: &str| {
            let webhook = Webhook {
                id: WebhookId::generate(),
                url: url.to_owned(),
                events: vec![],
                description: String::new(),
                enabled: true,
                disabled_reason: None,
                failure_run: 0,
                created_at: at,
                updated_at: at,
                secret_rotated_at: None,
            };
            webhook.for_reader().url
        };
        assert_eq!(
            shown("https://hooks.slack.com/services/T0/B0/secret"),
            "https://hooks.slack.com/…"
        );
        assert_eq!(shown("http://10.1.2.3:8080/in?token=x"), "http://10.1.2.3:8080/…");
        assert_eq!(shown("https://example.com/"), "https://example.com/");
    }

    #[test]
    fn a_kept_answer_is_bounded_text_without_nul() {
        assert_eq!(kept_response(b"ok\0\xff"), "ok\u{FFFD}\u{FFFD}");
        assert_eq!(kept_response(&[b'a'; RESPONSE_BYTES + 10]).len(), RESPONSE_BYTES);
    }

    #[test]
    fn urls_are_http_without_user_info_and_bounded() {
        assert!(WebhookUrl::parse("https://hooks.example.com/in").is_ok());
        for bad in ["ftp://x/", "https://u:p@x/", "not a url", "file:///etc/passwd"] {
            assert!(WebhookUrl::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let long = format!("https://example.com/{}", "a".repeat(2_000));
        assert!(WebhookUrl::parse(&long).unwrap_err().contains("2000"));
    }

    #[test]
    fn events_are_known_stream_types_each_once() {
        let events =
            WebhookEvents::parse(&["task.completed", "task.failed", "task.completed"]).unwrap();
        assert_eq!(events.types(), [EventType::TaskCompleted, EventType::TaskFailed]);
        assert_eq!(WebhookEvents::from_json(&events.to_json()), events);
        for bad in ["step.finished", "activity", "resync", "task.retrying", "nope"] {
            assert!(WebhookEvents::parse(&[bad]).is_err(), "{bad:?} was accepted");
        }
        assert!(WebhookEvents::parse::<&str>(&[]).is_err());
        let pattern = WebhookEvents::pattern(EventType::TaskFailed);
        assert!(events.to_json().contains(pattern.trim_matches('%')));
    }

    #[test]
    fn the_schedule_is_followed_then_the_delivery_fails() {
        let schedule = [Duration::from_secs(5), Duration::from_secs(300)];
        assert_eq!(next_delay(&schedule, 1), Some(Duration::from_secs(5)));
        assert_eq!(next_delay(&schedule, 2), Some(Duration::from_secs(300)));
        assert_eq!(next_delay(&schedule, 3), None);
        assert_eq!(next_delay(&schedule, 0), None);
    }

    #[test]
    fn kept_responses_are_cut() {
        assert_eq!(kept_response(&vec![b'x'; 5_000]).len(), RESPONSE_BYTES);
        assert_eq!(kept_response(b"ok"), "ok");
        assert!(message_id().starts_with("msg_"));
    }
}
