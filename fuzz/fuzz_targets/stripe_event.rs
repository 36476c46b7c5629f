//! Stripe event bodies (`agentcore::stripe::decode_event` / `decode_object`), as the webhook reads
//! them once the signature has passed: the input is the raw request body.
//!
//! Beyond "never panics": an event decodes only from a JSON object and reads its fields as a
//! `serde_json::Value` does; the accessors say what their
//! documentation says; and the pure parts of the facade's event-to-billing mapping
//! (`WorkspaceId::parse`, `Email::parse(..).key()`, `SubscriptionChange::grant`) accept whatever the
//! event carries.

#![no_main]

use agentcore::domain::billing::SubscriptionChange;
use agentcore::domain::user::Email;
use agentcore::domain::workspace::WorkspaceId;
use agentcore::stripe::{self, CheckoutSession, StripeEvent, Subscription};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(event) = stripe::decode_event(data) else {
        return;
    };
    // An event is a JSON object (never an array read as the envelope's fields in order), and
    // it reads its fields as a `Value` does.
    let json: Value = serde_json::from_slice(data).expect("an event is JSON");
    assert!(json.is_object() && json["data"]["object"].is_object());
    assert_eq!(json["id"].as_str(), Some(event.id.as_str()));
    assert_eq!(json["type"].as_str(), Some(event.kind.as_str()));
    assert_eq!(json["created"].as_i64(), Some(event.created));
    assert_eq!(json["data"]["object"], event.data.object);
    check_checkout(&event);
    check_subscription(&event);
});

fn check_checkout(event: &StripeEvent) {
    let Ok(session) = stripe::decode_object::<CheckoutSession>(event) else {
        return;
    };
    let object = &event.data.object;
    // What the buyer typed wins over the prefilled address.
    let typed = session.customer_details.as_ref().and_then(|d| d.email.as_deref());
    assert_eq!(session.email(), typed.or(session.customer_email.as_deref()));
    assert_eq!(session.metadata_user_id(), object["metadata"]["user_id"].as_str());
    // As the facade links a customer to a workspace (a user's id names their personal one).
    let user_ids: Vec<WorkspaceId> =
        [session.client_reference_id.as_deref(), session.metadata_user_id()]
            .into_iter()
            .flatten()
            .filter_map(|id| WorkspaceId::parse(id).ok())
            .collect();
    for id in &user_ids {
        assert_eq!(WorkspaceId::parse(id.as_str()).as_ref(), Ok(id), "a workspace id reads back");
    }
    if let Some(email) = session.email().and_then(|e| Email::parse(e).ok()) {
        assert_eq!(email.as_str(), email.as_str().trim());
        // The key is what a sign-in tries first, and the address's case does not change it
        // (two spellings that differ only in case are one account).
        let key = email.key();
        assert_eq!(Email::login_keys(email.as_str()).first(), Some(&key));
        for spelling in [email.as_str().to_uppercase(), email.as_str().to_lowercase()] {
            if let Ok(other) = Email::parse(&spelling) {
                assert_eq!(other.key(), key, "{spelling:?} and {:?} share a key", email.as_str());
            }
        }
    }
}

fn check_subscription(event: &StripeEvent) {
    let Ok(subscription) = stripe::decode_object::<Subscription>(event) else {
        return;
    };
    let object = &event.data.object;
    let keys: Vec<&str> = subscription.price_keys().collect();
    let expected: Vec<&str> = subscription
        .items
        .data
        .iter()
        .flat_map(|item| [Some(item.price.id.as_str()), item.price.lookup_key.as_deref()])
        .flatten()
        .collect();
    assert_eq!(keys, expected);
    assert!(keys.len() >= subscription.items.data.len());
    assert_eq!(subscription.metadata_user_id(), object["metadata"]["user_id"].as_str());

    // As the facade turns the subscription into a change, with some price mapping to a plan.
    let change = SubscriptionChange {
        deleted: event.kind == stripe::SUBSCRIPTION_DELETED,
        price_plan: keys.first().map(|k| format!("plan-{k}")),
        user_hint: subscription.metadata_user_id().and_then(|id| WorkspaceId::parse(id).ok()),
        id: subscription.id.clone(),
        customer: subscription.customer.clone(),
        status: subscription.status.clone(),
    };
    if change.deleted {
        assert_eq!(change.status(), "canceled");
        assert_eq!(change.grant(Some("pro")), None, "a deleted subscription grants nothing");
    }
    match change.status() {
        "active" | "trialing" => assert_eq!(change.grant(Some("pro")), change.price_plan),
        "canceled" | "unpaid" | "incomplete_expired" | "paused" => {
            assert_eq!(change.grant(Some("pro")), None)
        }
        _ => assert_eq!(change.grant(Some("pro")).as_deref(), Some("pro")),
    }
}
