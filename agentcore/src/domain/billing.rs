//! Plans and what they allow.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::workspace::WorkspaceId;

/// The plan every user starts on, and falls back to when a subscription ends.
pub const FREE: &str = "free";

/// Plan names and how many agents each allows. Always has `free`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plans(BTreeMap<String, u32>);

impl Default for Plans {
    fn default() -> Self {
        let plans = [("free", 3), ("starter", 10), ("pro", 25), ("team", 100)];
        Self(plans.into_iter().map(|(name, limit)| (name.to_owned(), limit)).collect())
    }
}

impl Plans {
    /// `free=3,starter=10,...`: names of lowercase letters, digits, `-` and `_`; whole-number
    /// limits; `free` must be among them.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut plans = BTreeMap::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, limit) =
                pair.split_once('=').ok_or_else(|| format!("'{pair}' is not name=limit"))?;
            let name = name.trim();
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
            if !valid {
                return Err(format!(
                    "'{name}' is not a plan name (lowercase letters, digits, - and _)"
                ));
            }
            let limit = limit
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("the limit of '{name}' is not a whole number"))?;
            if plans.insert(name.to_owned(), limit).is_some() {
                return Err(format!("'{name}' is given twice"));
            }
        }
        if !plans.contains_key(FREE) {
            return Err(format!("the '{FREE}' plan must be defined: every new user starts on it"));
        }
        Ok(Self(plans))
    }

    /// The agents `plan` allows; a plan no longer configured counts as `free`.
    pub fn limit(&self, plan: &str) -> u32 {
        self.0.get(plan).or_else(|| self.0.get(FREE)).copied().unwrap_or(0)
    }

    pub fn contains(&self, plan: &str) -> bool {
        self.0.contains_key(plan)
    }

    /// Each plan and its limit, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.0.iter().map(|(name, limit)| (name.as_str(), *limit))
    }
}

/// What limits a user's agents: the billing plans where billing is configured, else the
/// operator's `quotas.agents_per_user` (0: no limit).
#[derive(Debug, Clone, Copy)]
pub enum AgentLimit<'a> {
    Plans(&'a Plans),
    Quota(u32),
}

impl AgentLimit<'_> {
    /// The agents a user on `plan` may have; `None` for no limit.
    pub fn of(&self, plan: &str) -> Option<u32> {
        match self {
            AgentLimit::Plans(plans) => Some(plans.limit(plan)),
            AgentLimit::Quota(0) => None,
            AgentLimit::Quota(limit) => Some(*limit),
        }
    }

    /// Whether a user on `plan` with `used` agents may create one more.
    pub fn room(&self, plan: &str, used: i64) -> Result<(), AgentLimitReached> {
        match self.of(plan) {
            Some(limit) if used >= i64::from(limit) => Err(match self {
                AgentLimit::Plans(_) => AgentLimitReached::Plan { plan: plan.to_owned(), limit },
                AgentLimit::Quota(_) => AgentLimitReached::Quota { limit },
            }),
            _ => Ok(()),
        }
    }
}

/// Why no agent may be created: the plan's limit, or the operator's quota (without billing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentLimitReached {
    Plan { plan: String, limit: u32 },
    Quota { limit: u32 },
}

/// A user's plan as `GET /api/billing` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Billing {
    pub plan: String,
    /// `null` where nothing limits the user's agents (no billing, no agent quota).
    pub agent_limit: Option<u32>,
    pub agents_used: i64,
    pub subscription_status: Option<String>,
}

/// A Stripe event the service acts on, read and mapped onto plans by the facade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingEvent {
    /// `evt_...`: applied at most once.
    pub id: String,
    pub kind: String,
    /// Stripe's `created`, unix seconds: orders the events of one subscription.
    pub created: i64,
    pub change: BillingChange,
}

/// What an event asks of the billing state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BillingChange {
    /// A checkout finished: the customer belongs to the first user found.
    Link(CustomerLink),
    Subscription(SubscriptionChange),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerLink {
    pub customer: String,
    /// Tried in order: `client_reference_id`, then `metadata.user_id`.
    pub user_ids: Vec<WorkspaceId>,
    /// Then the buyer's address, as an [`Email::key`](super::user::Email::key).
    pub email_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionChange {
    pub id: String,
    pub customer: String,
    pub status: String,
    /// `customer.subscription.deleted`: the subscription is over, whatever its status says.
    pub deleted: bool,
    /// The plan the subscription's prices map to, when one does.
    pub price_plan: Option<String>,
    /// `metadata.user_id`, for a customer not linked to a user yet.
    pub user_hint: Option<WorkspaceId>,
}

impl SubscriptionChange {
    /// The status to keep: a deleted subscription is `canceled`.
    pub fn status(&self) -> &str {
        if self.deleted { "canceled" } else { &self.status }
    }

    /// The plan the subscription grants after this change, given what it granted before:
    /// `active` and `trialing` grant their price's plan; `canceled`, `unpaid`,
    /// `incomplete_expired`, `paused` and deletion grant nothing; `past_due` (and `incomplete`
    /// or any status Stripe adds later) keeps what was granted.
    pub fn grant(&self, previous: Option<&str>) -> Option<String> {
        match self.status() {
            "active" | "trialing" => self.price_plan.clone(),
            "canceled" | "unpaid" | "incomplete_expired" | "paused" => None,
            _ => previous.map(str::to_owned),
        }
    }
}

/// One way to find the user a Stripe event is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserLookup {
    /// The user with this id.
    Id(WorkspaceId),
    /// The user with this email key.
    EmailKey(String),
    /// The user this Stripe customer is linked to.
    Customer(String),
}

impl CustomerLink {
    /// Where a checkout's customer belongs, tried in order until one finds a user: the
    /// session's user ids (`client_reference_id`, then `metadata.user_id`), then the buyer's
    /// address. Finding nobody links nothing.
    pub fn owner_lookups(&self) -> Vec<UserLookup> {
        let ids = self.user_ids.iter().cloned().map(UserLookup::Id);
        ids.chain(self.email_key.clone().map(UserLookup::EmailKey)).collect()
    }
}

impl SubscriptionChange {
    /// Where a subscription belongs, tried in order: the user its customer is linked to, then
    /// the user its `metadata.user_id` names.
    pub fn owner_lookups(&self) -> Vec<UserLookup> {
        let customer = UserLookup::Customer(self.customer.clone());
        std::iter::once(customer).chain(self.user_hint.clone().map(UserLookup::Id)).collect()
    }

    /// Whether the user found by `lookup` gets the customer linked (when they have none yet):
    /// a user named by the metadata, so the customer's later events find them directly.
    pub fn links_customer(&self, lookup: &UserLookup) -> bool {
        matches!(lookup, UserLookup::Id(_))
    }

    /// The subscription's user: the one its lookups found, else whoever held it before (a
    /// subscription never falls back to nobody once it had a user).
    pub fn owner(
        &self,
        found: Option<WorkspaceId>,
        previous: Option<WorkspaceId>,
    ) -> Option<WorkspaceId> {
        found.or(previous)
    }
}

/// A subscription as stored: its latest applied state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionState {
    pub status: String,
    /// What it grants now; `None` grants nothing.
    pub plan: Option<String>,
    pub last_event_created: i64,
}

impl SubscriptionState {
    /// Whether an event created at `created` comes too late to change it: older than the last
    /// one applied, or after the subscription ended (an ended subscription never restarts).
    pub fn ignores(&self, created: i64) -> bool {
        created < self.last_event_created
            || matches!(self.status.as_str(), "canceled" | "incomplete_expired")
    }
}

/// A user's plan and subscription status from all their subscriptions: the plan allowing the
/// most agents among those granted (else `free`); the status of that subscription, else of the
/// most recently changed one (`None` without any).
pub fn effective_plan(
    subscriptions: &[SubscriptionState],
    plans: &Plans,
) -> (String, Option<String>) {
    let best = subscriptions
        .iter()
        .filter_map(|s| s.plan.as_deref().map(|plan| (plans.limit(plan), s)))
        .max_by_key(|(limit, s)| (*limit, s.last_event_created));
    match best {
        Some((_, s)) => (s.plan.clone().unwrap_or_else(|| FREE.to_owned()), Some(s.status.clone())),
        None => {
            let latest = subscriptions.iter().max_by_key(|s| s.last_event_created);
            (FREE.to_owned(), latest.map(|s| s.status.clone()))
        }
    }
}

/// `POST /api/billing/webhook`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookReceipt {
    pub received: bool,
    pub event_id: String,
    /// Whether the service acts on this kind of event.
    pub handled: bool,
}

/// What applying an event did; for the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BillingApplied {
    /// The event id was applied before: nothing changed.
    Duplicate,
    /// Older than the last event applied to its subscription, or after the subscription ended.
    Stale,
    /// A checkout naming no known user: nothing linked.
    NoUser,
    /// A subscription of a customer not linked yet: kept, and applied when the link arrives.
    Pending,
    /// The user's plan after the event.
    Applied { user: WorkspaceId, plan: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_from_configuration_and_need_free() {
        let plans = Plans::parse("free=1, pro=50").unwrap();
        assert_eq!((plans.limit("free"), plans.limit("pro"), plans.limit("gone")), (1, 50, 1));
        assert_eq!(Plans::default().limit("team"), 100);
        for bad in ["pro=5", "free=x", "free", "Free=3", "free=1,free=2", "free=-1"] {
            assert!(Plans::parse(bad).is_err(), "{bad}");
        }
    }

    fn change(status: &str, deleted: bool) -> SubscriptionChange {
        SubscriptionChange {
            id: "sub_1".into(),
            customer: "cus_1".into(),
            status: status.into(),
            deleted,
            price_plan: Some("pro".into()),
            user_hint: None,
        }
    }

    #[test]
    fn an_events_user_is_looked_up_in_the_documented_order() {
        let (ada, bob) =
            (WorkspaceId::from_trusted("u_ada".into()), WorkspaceId::from_trusted("u_bob".into()));
        let link = CustomerLink {
            customer: "cus_1".into(),
            user_ids: vec![ada.clone(), bob.clone()],
            email_key: Some("ada@example.com".into()),
        };
        assert_eq!(
            link.owner_lookups(),
            [
                UserLookup::Id(ada.clone()),
                UserLookup::Id(bob.clone()),
                UserLookup::EmailKey("ada@example.com".into())
            ]
        );
        let change = SubscriptionChange {
            id: "sub_1".into(),
            customer: "cus_1".into(),
            status: "active".into(),
            deleted: false,
            price_plan: None,
            user_hint: Some(bob.clone()),
        };
        let lookups = change.owner_lookups();
        assert_eq!(lookups, [UserLookup::Customer("cus_1".into()), UserLookup::Id(bob.clone())]);
        assert!(!change.links_customer(&lookups[0]) && change.links_customer(&lookups[1]));
        assert_eq!(change.owner(None, Some(ada.clone())), Some(ada.clone()));
        assert_eq!(change.owner(Some(bob.clone()), Some(ada)), Some(bob));
    }

    #[test]
    fn statuses_grant_keep_or_drop_the_plan() {
        let granted = |status: &str, previous: Option<&str>| change(status, false).grant(previous);
        assert_eq!(granted("active", None).as_deref(), Some("pro"));
        assert_eq!(granted("trialing", Some("starter")).as_deref(), Some("pro"));
        assert_eq!(granted("past_due", Some("starter")).as_deref(), Some("starter"));
        assert_eq!(granted("past_due", None), None);
        for ended in ["canceled", "unpaid", "incomplete_expired", "paused"] {
            assert_eq!(granted(ended, Some("pro")), None, "{ended}");
        }
        assert_eq!(change("active", true).grant(Some("pro")), None, "deleted ends it");
        assert_eq!(change("active", true).status(), "canceled");
    }

    #[test]
    fn older_events_and_ended_subscriptions_are_ignored() {
        let state = |status: &str| SubscriptionState {
            status: status.into(),
            plan: None,
            last_event_created: 100,
        };
        assert!(state("active").ignores(99));
        assert!(!state("active").ignores(100), "the same second still applies");
        assert!(!state("past_due").ignores(101));
        assert!(state("canceled").ignores(101));
        assert!(state("incomplete_expired").ignores(500));
    }

    #[test]
    fn the_largest_granted_plan_wins() {
        let plans = Plans::default();
        let sub = |status: &str, plan: Option<&str>, at: i64| SubscriptionState {
            status: status.into(),
            plan: plan.map(Into::into),
            last_event_created: at,
        };
        assert_eq!(effective_plan(&[], &plans), ("free".into(), None));
        let two = [sub("active", Some("starter"), 5), sub("past_due", Some("team"), 1)];
        assert_eq!(effective_plan(&two, &plans), ("team".into(), Some("past_due".into())));
        let ended = [sub("canceled", None, 9), sub("unpaid", None, 3)];
        assert_eq!(effective_plan(&ended, &plans), ("free".into(), Some("canceled".into())));
    }
}
