//! Stripe webhook deliveries built from the fixture events (`tests/fixtures/stripe/derived`,
//! shapes of the current API), signed the way Stripe signs them.

use agentcore::stripe;
use reqwest::Method;
use serde_json::{Value, json};

use crate::{Reply, TestApp};

/// The secret the test server is configured with, and the one being rotated out.
pub const SECRET: &str = "whsec_agentd_tests_current";
pub const OLD_SECRET: &str = "whsec_agentd_tests_previous";

/// `billing.prices` of the test server: the fixture's price id, and two lookup keys.
pub const PRICE_PRO: &str = "price_1PgafmB7WZ01zgkW6dKueIc5";
pub const LOOKUP_STARTER: &str = "starter_monthly";
pub const LOOKUP_TEAM: &str = "team_monthly";
pub const PRICES: [(&str, &str); 3] =
    [(PRICE_PRO, "pro"), (LOOKUP_STARTER, "starter"), (LOOKUP_TEAM, "team")];

pub fn fixture_path(name: &str) -> String {
    format!("{}/fixtures/stripe/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture_path(&format!("derived/{name}.json")))
        .expect("the Stripe fixture exists");
    serde_json::from_str(&text).expect("the fixture is JSON")
}

/// `checkout.session.completed` for `customer`, naming the user as a real checkout would:
/// `client_reference_id`, `metadata.user_id` and the buyer's e-mail, each optional.
pub fn checkout(
    event_id: &str,
    customer: &str,
    client_reference_id: Option<&str>,
    metadata_user_id: Option<&str>,
    email: Option<&str>,
) -> Value {
    let mut event = fixture("checkout.session.completed.subscription-mode");
    event["id"] = json!(event_id);
    event["created"] = json!(now());
    let session = &mut event["data"]["object"];
    session["customer"] = json!(customer);
    session["client_reference_id"] = json!(client_reference_id);
    session["metadata"] = match metadata_user_id {
        Some(id) => json!({"user_id": id}),
        None => json!({}),
    };
    session["customer_details"]["email"] = json!(email);
    event
}

/// A subscription event: `kind` is `created`, `updated` or `deleted`; `price` a price id, or a
/// lookup key (`lookup:<key>`) on an unmapped price id.
pub struct Sub<'a> {
    pub id: &'a str,
    pub customer: &'a str,
    pub status: &'a str,
    pub price: &'a str,
    pub user_id: Option<&'a str>,
}

pub fn subscription(kind: &str, event_id: &str, created: i64, sub: &Sub<'_>) -> Value {
    let name = match kind {
        "created" => "customer.subscription.created",
        "updated" => "customer.subscription.updated.cancel_at_period_end",
        "deleted" => "customer.subscription.deleted",
        other => panic!("no subscription event {other}"),
    };
    let mut event = fixture(name);
    event["id"] = json!(event_id);
    event["created"] = json!(created);
    let object = &mut event["data"]["object"];
    object["id"] = json!(sub.id);
    object["customer"] = json!(sub.customer);
    object["status"] = json!(sub.status);
    object["metadata"] = match sub.user_id {
        Some(id) => json!({"user_id": id}),
        None => json!({}),
    };
    let price = &mut object["items"]["data"][0]["price"];
    match sub.price.strip_prefix("lookup:") {
        Some(key) => {
            price["id"] = json!("price_unmapped_in_config");
            price["lookup_key"] = json!(key);
        }
        None => price["id"] = json!(sub.price),
    }
    event
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl TestApp {
    /// Posts `body` to the webhook with `signature` as the `Stripe-Signature` header.
    pub async fn webhook(&self, body: &[u8], signature: Option<&str>) -> Reply {
        let mut request = self
            .client
            .request(Method::POST, format!("{}/api/billing/webhook", self.address))
            .header("content-type", "application/json; charset=utf-8")
            .body(body.to_vec());
        if let Some(signature) = signature {
            request = request.header("stripe-signature", signature);
        }
        crate::read(request.send().await.expect("request sent")).await
    }

    /// Delivers `event` signed with the current secret now; asserts Stripe would see a 200.
    pub async fn deliver(&self, event: &Value) -> Value {
        let body = serde_json::to_vec(event).unwrap();
        let header = stripe::sign(SECRET, now(), &body);
        self.webhook(&body, Some(&header)).await.assert_status(200).clone()
    }

    /// The caller's `GET /api/billing` as (plan, agent_limit, subscription_status).
    pub async fn plan_of(&self, user: &crate::User) -> (String, i64, Value) {
        let billing = self.get("/api/billing", user).await.assert_status(200).clone();
        (
            billing["plan"].as_str().unwrap().to_owned(),
            billing["agent_limit"].as_i64().unwrap(),
            billing["subscription_status"].clone(),
        )
    }
}
