//! Stripe webhooks as they arrive: the `Stripe-Signature` header checked against the exact bytes
//! received, then the few fields of the event the service acts on.
//!
//! Nothing here touches the database or the configuration's meaning of prices; the facade turns
//! a [`StripeEvent`] into a [`BillingChange`](crate::domain::billing::BillingChange).

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;
use sha2::Sha256;

/// How far the signed timestamp may be from the receiver's clock, either way. Stripe's SDKs use
/// 300 s for the past; a timestamp as far in the future is refused as well.
pub const TOLERANCE_SECONDS: i64 = 300;

type HmacSha256 = Hmac<Sha256>;

/// Why a signature was refused. Every variant is answered the same way (400
/// `invalid_signature`); the variant is for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Stripe-Signature header is missing")]
    Missing,
    #[error("the Stripe-Signature header has no single valid timestamp")]
    BadTimestamp,
    #[error("the Stripe-Signature header has no v1 signature")]
    NoV1,
    #[error("the signed timestamp is more than {TOLERANCE_SECONDS} seconds away")]
    OutsideTolerance,
    #[error("no v1 signature matches a configured secret")]
    Mismatch,
}

/// `t=<unix>,v1=<hex>[,v1=<hex>...]`, other schemes (`v0`) ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader {
    pub timestamp: i64,
    /// The decoded `v1` signatures; entries that are not hex cannot match and are dropped.
    pub v1: Vec<Vec<u8>>,
}

impl SignatureHeader {
    pub fn parse(header: &str) -> Result<Self, SignatureError> {
        let mut timestamp = None;
        let mut v1 = Vec::new();
        let mut any_v1 = false;
        for item in header.split(',') {
            let Some((key, value)) = item.trim().split_once('=') else {
                continue;
            };
            match key {
                "t" => {
                    let parsed = value.parse::<i64>().map_err(|_| SignatureError::BadTimestamp)?;
                    if timestamp.replace(parsed).is_some() {
                        return Err(SignatureError::BadTimestamp);
                    }
                }
                "v1" => {
                    any_v1 = true;
                    if let Ok(bytes) = hex::decode(value) {
                        v1.push(bytes);
                    }
                }
                _ => {}
            }
        }
        let timestamp = timestamp.ok_or(SignatureError::BadTimestamp)?;
        if !any_v1 {
            return Err(SignatureError::NoV1);
        }
        Ok(Self { timestamp, v1 })
    }
}

/// Checks `header` against the raw `payload` with each of `secrets` (the whole `whsec_...`
/// string is the key) at time `now` (unix seconds). Any `v1` matching any secret passes;
/// comparisons take constant time.
pub fn verify(
    header: Option<&str>,
    payload: &[u8],
    secrets: &[SecretString],
    now: i64,
) -> Result<(), SignatureError> {
    let header = SignatureHeader::parse(header.ok_or(SignatureError::Missing)?)?;
    let matches = secrets.iter().any(|secret| {
        let mac = signed(secret.expose_secret(), header.timestamp, payload);
        header.v1.iter().any(|candidate| mac.clone().verify_slice(candidate).is_ok())
    });
    if !matches {
        return Err(SignatureError::Mismatch);
    }
    if now.abs_diff(header.timestamp) > TOLERANCE_SECONDS.unsigned_abs() {
        return Err(SignatureError::OutsideTolerance);
    }
    Ok(())
}

/// The header Stripe would send for `payload` signed with `secret` at `timestamp`, as the
/// official SDKs' test helpers produce it. For tests and for replaying events by hand.
pub fn sign(secret: &str, timestamp: i64, payload: &[u8]) -> String {
    let mac = signed(secret, timestamp, payload).finalize().into_bytes();
    format!("t={timestamp},v1={}", hex::encode(mac))
}

fn signed(secret: &str, timestamp: i64, payload: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(payload);
    mac
}

/// The envelope of every event.
#[derive(Debug, Clone, Deserialize)]
pub struct StripeEvent {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix seconds.
    pub created: i64,
    pub data: EventData,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EventData {
    pub object: Value,
}

/// The event kinds the service acts on.
pub const CHECKOUT_COMPLETED: &str = "checkout.session.completed";
pub const SUBSCRIPTION_CREATED: &str = "customer.subscription.created";
pub const SUBSCRIPTION_UPDATED: &str = "customer.subscription.updated";
pub const SUBSCRIPTION_DELETED: &str = "customer.subscription.deleted";

/// The fields of a `checkout.session` that link a customer to a user.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckoutSession {
    pub id: String,
    /// Absent for a guest payment that created no customer.
    pub customer: Option<String>,
    pub client_reference_id: Option<String>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, Value>>,
    pub customer_email: Option<String>,
    pub customer_details: Option<CustomerDetails>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CustomerDetails {
    pub email: Option<String>,
}

impl CheckoutSession {
    /// What the buyer typed, else the prefilled address.
    pub fn email(&self) -> Option<&str> {
        self.customer_details
            .as_ref()
            .and_then(|details| details.email.as_deref())
            .or(self.customer_email.as_deref())
    }

    pub fn metadata_user_id(&self) -> Option<&str> {
        metadata_user_id(self.metadata.as_ref())
    }
}

/// The fields of a `subscription` that decide a plan.
#[derive(Debug, Clone, Deserialize)]
pub struct Subscription {
    pub id: String,
    pub customer: String,
    pub status: String,
    pub items: SubscriptionItems,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, Value>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SubscriptionItems {
    pub data: Vec<SubscriptionItem>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SubscriptionItem {
    pub price: Price,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Price {
    pub id: String,
    pub lookup_key: Option<String>,
}

impl Subscription {
    /// Every price id and lookup key of the subscription's items, in order.
    pub fn price_keys(&self) -> impl Iterator<Item = &str> {
        self.items.data.iter().flat_map(|item| {
            std::iter::once(item.price.id.as_str()).chain(item.price.lookup_key.as_deref())
        })
    }

    pub fn metadata_user_id(&self) -> Option<&str> {
        metadata_user_id(self.metadata.as_ref())
    }
}

fn metadata_user_id(metadata: Option<&BTreeMap<String, Value>>) -> Option<&str> {
    metadata?.get("user_id")?.as_str()
}

/// Reads the envelope; `Err` says what is missing, in a sentence.
///
/// An event is a JSON object whose `data.object` is an object. Serde's derived structs also
/// read a JSON array as their fields in order, so the shape is checked before the fields are.
pub fn decode_event(payload: &[u8]) -> Result<StripeEvent, String> {
    let value: Value =
        serde_json::from_slice(payload).map_err(|e| format!("not a Stripe event: {e}"))?;
    if !value.is_object() || !value["data"].is_object() || !value["data"]["object"].is_object() {
        return Err(
            "not a Stripe event: an event is a JSON object with a `data.object` object".to_string()
        );
    }
    serde_json::from_value(value).map_err(|e| format!("not a Stripe event: {e}"))
}

/// Reads the event's object as `T`.
pub fn decode_object<T: serde::de::DeserializeOwned>(event: &StripeEvent) -> Result<T, String> {
    T::deserialize(&event.data.object)
        .map_err(|e| format!("the {} event's object is not what Stripe sends: {e}", event.kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/stripe");

    struct Vector {
        secret: String,
        timestamp: i64,
        header: String,
        payload: Vec<u8>,
    }

    fn vector() -> Vector {
        let text = std::fs::read_to_string(format!("{FIXTURES}/signature-vector.json"))
            .expect("the shared Stripe fixtures are present");
        let json: Value = serde_json::from_str(&text).expect("the vector is JSON");
        let field = |name: &str| json[name].as_str().expect(name).to_owned();
        let payload = std::fs::read(format!("{FIXTURES}/{}", field("payload_file")))
            .expect("the vector's payload file is present");
        Vector {
            secret: field("secret"),
            timestamp: json["timestamp"].as_i64().expect("timestamp"),
            header: field("stripe_signature_header"),
            payload,
        }
    }

    fn secrets(names: &[&str]) -> Vec<SecretString> {
        names.iter().map(|s| SecretString::from(*s)).collect()
    }

    #[test]
    fn the_cross_checked_vector_passes_at_its_timestamp() {
        let v = vector();
        let check = |header: &str, body: &[u8], secret: &str, now: i64| {
            verify(Some(header), body, &secrets(&[secret]), now)
        };
        assert_eq!(check(&v.header, &v.payload, &v.secret, v.timestamp), Ok(()));
        assert_eq!(sign(&v.secret, v.timestamp, &v.payload), v.header);
        // Within the tolerance on both sides, and not beyond it.
        assert_eq!(check(&v.header, &v.payload, &v.secret, v.timestamp + 300), Ok(()));
        assert_eq!(check(&v.header, &v.payload, &v.secret, v.timestamp - 300), Ok(()));
        assert_eq!(
            check(&v.header, &v.payload, &v.secret, v.timestamp + 301),
            Err(SignatureError::OutsideTolerance)
        );
        assert_eq!(
            check(&v.header, &v.payload, &v.secret, v.timestamp - 301),
            Err(SignatureError::OutsideTolerance),
            "a timestamp from the future is refused too"
        );
    }

    #[test]
    fn tampering_and_wrong_headers_are_refused() {
        let v = vector();
        let now = v.timestamp;
        let mut changed = v.payload.clone();
        let at = changed.len() / 2;
        changed[at] ^= 0x01;
        let ours = secrets(&[&v.secret]);
        assert_eq!(verify(Some(&v.header), &changed, &ours, now), Err(SignatureError::Mismatch));
        assert_eq!(
            verify(Some(&v.header), &v.payload, &secrets(&["whsec_wrong"]), now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(verify(None, &v.payload, &ours, now), Err(SignatureError::Missing));
        let v0_only = v.header.replace("v1=", "v0=");
        assert_eq!(verify(Some(&v0_only), &v.payload, &ours, now), Err(SignatureError::NoV1));
        for bad in ["", "v1=abcd", "t=soon,v1=abcd", "t=1,t=2,v1=abcd"] {
            assert!(verify(Some(bad), &v.payload, &ours, now).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rotation_accepts_any_matching_signature_and_any_configured_secret() {
        let v = vector();
        let (_, right) = v.header.split_once(",v1=").expect("a v1 part");
        let wrong = "0".repeat(64);
        let rotated = format!("t={},v1={wrong},v1={right},v0={wrong}", v.timestamp);
        let ours = secrets(&[&v.secret]);
        assert_eq!(verify(Some(&rotated), &v.payload, &ours, v.timestamp), Ok(()));
        let both = secrets(&["whsec_old_secret", &v.secret]);
        assert_eq!(verify(Some(&v.header), &v.payload, &both, v.timestamp), Ok(()));
        let garbage = format!("t={},v1=not-hex,v1={right}", v.timestamp);
        assert_eq!(verify(Some(&garbage), &v.payload, &ours, v.timestamp), Ok(()));
    }

    #[test]
    fn the_fixture_events_decode() {
        let read = |name: &str| {
            let bytes = std::fs::read(format!("{FIXTURES}/derived/{name}.json")).expect(name);
            decode_event(&bytes).expect(name)
        };
        let checkout = read("checkout.session.completed.subscription-mode");
        assert_eq!(checkout.kind, CHECKOUT_COMPLETED);
        let session: CheckoutSession = decode_object(&checkout).expect("a checkout session");
        assert_eq!(session.customer.as_deref(), Some("cus_QXg1o8vcGmoR32"));
        assert_eq!(session.email(), Some("example@example.com"));
        assert_eq!(session.metadata_user_id(), None);
        let created = read("customer.subscription.created");
        let subscription: Subscription = decode_object(&created).expect("a subscription");
        assert_eq!(subscription.status, "active");
        assert_eq!(
            subscription.price_keys().collect::<Vec<_>>(),
            ["price_1PgafmB7WZ01zgkW6dKueIc5"]
        );
        assert!(decode_event(b"{\"id\": \"evt_1\"}").is_err());
        // The envelope's fields in order, as an array: a derived struct would read it.
        let array =
            br#"["evt_1", "customer.subscription.updated", 80, {"object": {"id": "sub_1"}}]"#;
        assert!(decode_event(array).is_err());
        let data_array =
            br#"{"id": "evt_1", "type": "x", "created": 80, "data": [{"id": "sub_1"}]}"#;
        assert!(decode_event(data_array).is_err());
        let object_array =
            br#"{"id": "evt_1", "type": "x", "created": 80, "data": {"object": ["sub_1"]}}"#;
        assert!(decode_event(object_array).is_err());
    }
}
