//! Plans: what a user may create, and Stripe's webhook moving users between plans.

use super::{Core, Principal};
use crate::domain::billing::{
    Billing, BillingApplied, BillingChange, BillingEvent, CustomerLink, Plans, SubscriptionChange,
    WebhookReceipt,
};
use crate::domain::now;
use crate::domain::user::Email;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Refusal, Result, ValidationErrors};
use crate::store::UserPlan;
use crate::stripe::{self, CheckoutSession, StripeEvent, Subscription};

impl Core {
    /// The caller's plan, its agent limit and how much of it is used.
    pub async fn billing(&self, who: &Principal) -> Result<Billing> {
        let UserPlan { plan, subscription_status, agents_used } =
            self.store().billing(&who.workspace).await?;
        let agent_limit = self.agent_limit().of(&plan);
        Ok(Billing { plan, agent_limit, agents_used, subscription_status })
    }

    /// A delivery of Stripe's webhook: `signature` is the `Stripe-Signature` header and
    /// `payload` the exact bytes received. Verified before anything is read; each event id is
    /// applied at most once (a repeat answers the same and changes nothing).
    pub async fn stripe_webhook(
        &self,
        signature: Option<&str>,
        payload: &[u8],
    ) -> Result<WebhookReceipt> {
        let secrets = &self.inner.billing.webhook_secrets;
        if secrets.is_empty() {
            return Err(Error::NotConfigured(
                "The Stripe webhook is off: set billing.webhook_secrets.".into(),
            ));
        }
        if let Err(why) =
            stripe::verify(signature, payload, secrets, chrono::Utc::now().timestamp())
        {
            tracing::warn!(reason = %why, "Stripe webhook refused");
            return Err(Error::refused(
                Refusal::InvalidSignature,
                "The Stripe-Signature header does not match this body.",
            ));
        }
        let event = stripe::decode_event(payload)
            .map_err(|problem| ValidationErrors::single("body", problem))?;
        let Some(change) = self.billing_change(&event)? else {
            tracing::debug!(event_id = %event.id, kind = %event.kind, "Stripe event not handled");
            return Ok(WebhookReceipt { received: true, event_id: event.id, handled: false });
        };
        let billing_event =
            BillingEvent { id: event.id, kind: event.kind, created: event.created, change };
        let applied = self.store().apply_billing_event(&billing_event, self.plans(), now()).await?;
        tracing::info!(
            event_id = %billing_event.id, kind = %billing_event.kind, outcome = ?applied,
            "Stripe event"
        );
        if let BillingApplied::Applied { user: workspace, plan } = &applied {
            let after = serde_json::json!({"plan": plan, "event_id": billing_event.id});
            let target = ("plan", workspace.as_str());
            self.record_as(workspace, "stripe", "plan.applied", target, Some(after)).await;
        }
        Ok(WebhookReceipt { received: true, event_id: billing_event.id, handled: true })
    }

    pub(crate) fn plans(&self) -> &Plans {
        &self.inner.billing.plans
    }

    /// What the event asks for, or `None` for kinds the service does not act on.
    fn billing_change(&self, event: &StripeEvent) -> Result<Option<BillingChange>> {
        let object = |problem: String| ValidationErrors::single("data.object", problem);
        let change = match event.kind.as_str() {
            stripe::CHECKOUT_COMPLETED => {
                let session: CheckoutSession = stripe::decode_object(event).map_err(object)?;
                let Some(customer) = session.customer.clone() else {
                    return Ok(None);
                };
                let user_ids = [session.client_reference_id.as_deref(), session.metadata_user_id()]
                    .into_iter()
                    .flatten()
                    .filter_map(|id| WorkspaceId::parse(id).ok())
                    .collect();
                let email_key = session.email().and_then(|e| Email::parse(e).ok()).map(|e| e.key());
                BillingChange::Link(CustomerLink { customer, user_ids, email_key })
            }
            stripe::SUBSCRIPTION_CREATED
            | stripe::SUBSCRIPTION_UPDATED
            | stripe::SUBSCRIPTION_DELETED => {
                let subscription: Subscription = stripe::decode_object(event).map_err(object)?;
                let price_plan = self.plan_of_prices(&subscription);
                BillingChange::Subscription(SubscriptionChange {
                    deleted: event.kind == stripe::SUBSCRIPTION_DELETED,
                    price_plan,
                    user_hint: subscription
                        .metadata_user_id()
                        .and_then(|id| WorkspaceId::parse(id).ok()),
                    id: subscription.id,
                    customer: subscription.customer,
                    status: subscription.status,
                })
            }
            _ => return Ok(None),
        };
        Ok(Some(change))
    }

    /// The plan allowing the most agents among those `billing.prices` gives the subscription's
    /// price ids and lookup keys.
    fn plan_of_prices(&self, subscription: &Subscription) -> Option<String> {
        let prices = &self.inner.billing.prices;
        let plan = subscription
            .price_keys()
            .filter_map(|key| prices.get(key))
            .max_by_key(|plan| self.plans().limit(plan))
            .cloned();
        if plan.is_none() {
            let keys: Vec<&str> = subscription.price_keys().collect();
            tracing::warn!(
                subscription = %subscription.id, prices = ?keys,
                "no billing.prices entry maps this subscription to a plan; it grants none"
            );
        }
        plan
    }
}
