//! Plans and Stripe: applying an event reads and writes users, customers and subscriptions in
//! one transaction, with the record of the event id. Which user an event is for is the
//! domain's rule ([`crate::domain::billing`]); this module only looks users up and writes.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::db::{SqlStore, Tx, query, query_as, query_scalar};
use super::shared::watched;
use crate::domain::billing::{BillingApplied, BillingEvent, Plans, UserLookup};
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Result};

/// Users' plans and the Stripe state behind them.
#[async_trait]
pub trait BillingStore: Send + Sync {
    /// The owner's plan, subscription status and number of agents.
    async fn billing(&self, owner: &WorkspaceId) -> Result<UserPlan>;
    /// Applies a Stripe event in one transaction with the record of its id, so an event is
    /// applied at most once whatever the number of deliveries and nodes; users' plans are
    /// recomputed from their subscriptions with `plans`.
    async fn apply_billing_event(
        &self,
        event: &BillingEvent,
        plans: &Plans,
        at: DateTime<Utc>,
    ) -> Result<BillingApplied>;
}

/// The owner's plan as stored, with how many agents they have.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct UserPlan {
    pub plan: String,
    pub subscription_status: Option<String>,
    pub agents_used: i64,
}

#[async_trait::async_trait]
impl<S: SqlStore> BillingStore for S {
    async fn billing(&self, owner: &WorkspaceId) -> Result<UserPlan> {
        let row: Option<UserPlan> = query_as(sql::SELECT_BILLING)
            .bind(owner.as_str())
            .fetch_optional(&mut self.read().await?)
            .await?;
        row.ok_or(Error::Unauthorized)
    }

    async fn apply_billing_event(
        &self,
        event: &crate::domain::billing::BillingEvent,
        plans: &crate::domain::billing::Plans,
        at: DateTime<Utc>,
    ) -> Result<crate::domain::billing::BillingApplied> {
        watched(self.storage_health(), async {
            use crate::domain::billing::{BillingApplied, BillingChange};
            let mut tx = self.begin_write().await?;
            if let Some(serialize) = self.dialect().serialize_billing() {
                query(serialize).execute(&mut tx).await?;
            }
            let recorded = query(sql::INSERT_BILLING_EVENT)
                .bind(&event.id)
                .bind(&event.kind)
                .bind(event.created)
                .bind(at)
                .execute(&mut tx)
                .await?
                .rows_affected();
            if recorded == 0 {
                return Ok(BillingApplied::Duplicate);
            }
            let applied = match &event.change {
                BillingChange::Link(link) => link_customer(&mut tx, link, plans, at).await?,
                BillingChange::Subscription(change) => {
                    apply_subscription(&mut tx, change, event.created, plans, at).await?
                }
            };
            tx.commit().await?;
            Ok(applied)
        })
        .await
    }
}

/// The id of the user `query` finds for `value`.
/// The first user a lookup finds, trying them in order, with the lookup that
/// found it.
async fn find_user(
    tx: &mut Tx,
    lookups: &[UserLookup],
) -> Result<Option<(WorkspaceId, UserLookup)>> {
    for lookup in lookups {
        let (query, value) = match lookup {
            UserLookup::Id(id) => (sql::USER_ID_BY_ID, id.as_str()),
            UserLookup::EmailKey(key) => (sql::USER_ID_BY_EMAIL_KEY, key.as_str()),
            UserLookup::Customer(customer) => (sql::USER_ID_BY_CUSTOMER, customer.as_str()),
        };
        let id: Option<String> = query_scalar(query).bind(value).fetch_optional(&mut *tx).await?;
        if let Some(id) = id {
            return Ok(Some((WorkspaceId::from_trusted(id), lookup.clone())));
        }
    }
    Ok(None)
}

/// A checkout: the customer (and its subscriptions, including those kept while it was
/// unknown) now belongs to the user [`CustomerLink::owner_lookups`] finds; whoever
/// held it before loses it.
async fn link_customer(
    tx: &mut Tx,
    link: &crate::domain::billing::CustomerLink,
    plans: &crate::domain::billing::Plans,
    at: DateTime<Utc>,
) -> Result<crate::domain::billing::BillingApplied> {
    let Some((user, _)) = find_user(tx, &link.owner_lookups()).await? else {
        return Ok(crate::domain::billing::BillingApplied::NoUser);
    };
    let previous: Vec<String> = query_scalar(sql::CUSTOMER_HOLDERS)
        .bind(&link.customer)
        .bind(user.as_str())
        .fetch_all(&mut *tx)
        .await?;
    for statement in [sql::UNLINK_CUSTOMER, sql::LINK_CUSTOMER, sql::ATTACH_SUBSCRIPTIONS] {
        query(statement).bind(&link.customer).bind(user.as_str()).execute(&mut *tx).await?;
    }
    for old in previous {
        recompute_plan(tx, &WorkspaceId::from_trusted(old), plans, at).await?;
    }
    let plan = recompute_plan(tx, &user, plans, at).await?;
    Ok(crate::domain::billing::BillingApplied::Applied { user, plan })
}

/// A subscription event: ignored when stale, else the subscription's new state, and
/// its user's plan when the user is known ([`SubscriptionChange::owner_lookups`]).
async fn apply_subscription(
    tx: &mut Tx,
    change: &crate::domain::billing::SubscriptionChange,
    created: i64,
    plans: &crate::domain::billing::Plans,
    at: DateTime<Utc>,
) -> Result<crate::domain::billing::BillingApplied> {
    use crate::domain::billing::{BillingApplied, SubscriptionState};
    let stored: Option<(String, Option<String>, i64, Option<String>)> =
        query_as(&sql::select_subscription(tx.dialect().lock()))
            .bind(&change.id)
            .fetch_optional(&mut *tx)
            .await?;
    let (previous_plan, previous_user) = match stored {
        Some((status, plan, last_event_created, user)) => {
            let state = SubscriptionState { status, plan, last_event_created };
            if state.ignores(created) {
                return Ok(BillingApplied::Stale);
            }
            (state.plan, user.map(WorkspaceId::from_trusted))
        }
        None => (None, None),
    };
    let found = find_user(tx, &change.owner_lookups()).await?;
    if let Some((user, lookup)) = &found
        && change.links_customer(lookup)
    {
        query(sql::LINK_CUSTOMER_IF_UNLINKED)
            .bind(&change.customer)
            .bind(user.as_str())
            .execute(&mut *tx)
            .await?;
    }
    let user = change.owner(found.map(|(user, _)| user), previous_user.clone());
    query(sql::UPSERT_SUBSCRIPTION)
        .bind(&change.id)
        .bind(&change.customer)
        .bind(user.as_ref().map(WorkspaceId::as_str))
        .bind(change.status())
        .bind(change.grant(previous_plan.as_deref()))
        .bind(created)
        .bind(at)
        .execute(&mut *tx)
        .await?;
    if let Some(old) = previous_user.filter(|old| Some(old) != user.as_ref()) {
        recompute_plan(tx, &old, plans, at).await?;
    }
    match user {
        Some(user) => {
            let plan = recompute_plan(tx, &user, plans, at).await?;
            Ok(BillingApplied::Applied { user, plan })
        }
        None => Ok(BillingApplied::Pending),
    }
}

/// Sets the user's plan and subscription status from all their subscriptions.
async fn recompute_plan(
    tx: &mut Tx,
    user: &WorkspaceId,
    plans: &crate::domain::billing::Plans,
    at: DateTime<Utc>,
) -> Result<String> {
    use crate::domain::billing::{SubscriptionState, effective_plan};
    let rows: Vec<(String, Option<String>, i64)> =
        query_as(sql::USER_SUBSCRIPTIONS).bind(user.as_str()).fetch_all(&mut *tx).await?;
    let states: Vec<SubscriptionState> = rows
        .into_iter()
        .map(|(status, plan, last_event_created)| SubscriptionState {
            status,
            plan,
            last_event_created,
        })
        .collect();
    let (plan, status) = effective_plan(&states, plans);
    query(sql::SET_USER_PLAN)
        .bind(user.as_str())
        .bind(&plan)
        .bind(&status)
        .bind(at)
        .execute(&mut *tx)
        .await?;
    Ok(plan)
}

/// The statements of this area, the same on both backends.
pub(super) mod sql {
    pub(crate) const SELECT_BILLING: &str = "SELECT plan, subscription_status, \
        (SELECT COUNT(*) FROM agents WHERE owner_id = $1) AS agents_used FROM workspaces WHERE id = $1";
    pub(crate) const INSERT_BILLING_EVENT: &str = "INSERT INTO billing_events \
        (id, type, created, received_at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING";
    pub(crate) fn select_subscription(lock: &str) -> String {
        format!(
            "SELECT status, plan, last_event_created, workspace_id FROM billing_subscriptions \
             WHERE id = $1{lock}"
        )
    }
    pub(crate) const UPSERT_SUBSCRIPTION: &str = "INSERT INTO billing_subscriptions \
        (id, customer_id, workspace_id, status, plan, last_event_created, updated_at) \
        VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO UPDATE SET \
        customer_id = excluded.customer_id, workspace_id = excluded.workspace_id, status = excluded.status, \
        plan = excluded.plan, last_event_created = excluded.last_event_created, \
        updated_at = excluded.updated_at";
    pub(crate) const USER_ID_BY_ID: &str = "SELECT id FROM workspaces WHERE id = $1";
    pub(crate) const USER_ID_BY_EMAIL_KEY: &str = "SELECT id FROM users WHERE email_key = $1";
    pub(crate) const USER_ID_BY_CUSTOMER: &str =
        "SELECT id FROM workspaces WHERE stripe_customer_id = $1";
    /// Users other than `$2` holding customer `$1` or one of its subscriptions.
    pub(crate) const CUSTOMER_HOLDERS: &str = "SELECT id FROM workspaces \
        WHERE stripe_customer_id = $1 AND id <> $2 \
        UNION SELECT workspace_id FROM billing_subscriptions WHERE customer_id = $1 AND workspace_id <> $2";
    pub(crate) const UNLINK_CUSTOMER: &str = "UPDATE workspaces SET stripe_customer_id = NULL WHERE stripe_customer_id = $1 AND id <> $2";
    pub(crate) const LINK_CUSTOMER: &str =
        "UPDATE workspaces SET stripe_customer_id = $1 WHERE id = $2";
    pub(crate) const LINK_CUSTOMER_IF_UNLINKED: &str = "UPDATE workspaces SET stripe_customer_id = $1 \
        WHERE id = $2 AND stripe_customer_id IS NULL";
    pub(crate) const ATTACH_SUBSCRIPTIONS: &str =
        "UPDATE billing_subscriptions SET workspace_id = $2 WHERE customer_id = $1";
    pub(crate) const USER_SUBSCRIPTIONS: &str = "SELECT status, plan, last_event_created \
        FROM billing_subscriptions WHERE workspace_id = $1";
    pub(crate) const SET_USER_PLAN: &str =
        "UPDATE workspaces SET plan = $2, subscription_status = $3, updated_at = $4 WHERE id = $1";
}
