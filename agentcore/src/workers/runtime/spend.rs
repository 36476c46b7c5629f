//! The money side of a model call: before it is sent, its worst case is reserved against the
//! budgets of its agent and owner (a call that could cross one is not sent, and the run ends
//! `budget_exhausted`); after it answers, its cost is settled into the month's spend.

use super::Node;
use crate::domain::budget::{Price, StepCost};
use crate::domain::runtime::Outcome;
use crate::domain::task::Usage;
use crate::models::CompletionRequest;
use crate::models::ModelKind;
use crate::store::RunRef;

/// A call allowed to go out, and what settling it needs.
pub(super) struct Reserved {
    model: String,
    price: Option<Price>,
    worst: i64,
    /// A hold was written (some budget applies): settling drops it.
    held: bool,
}

/// Reserves the worst case of `request` (for the agent's `model`, of provider `label`);
/// `Ok(None)` for `echo`, which costs nothing; the outcome that ends the run when a budget
/// could be crossed or cannot be checked.
pub(super) async fn reserve(
    node: &Node,
    run: RunRef<'_>,
    model: Option<&str>,
    kind: ModelKind<'_>,
    request: &CompletionRequest,
) -> Result<Option<Reserved>, Outcome> {
    if kind == ModelKind::Echo {
        return Ok(None);
    }
    let (name, price) = node.core.models().price(model);
    let input = node.core.models().input_tokens_bound(model, request);
    let worst = price.map_or(0, |p| p.worst_case(input, request.max_tokens));
    match node.core.run_store().reserve(run, worst).await {
        Ok(Ok(held)) => Ok(Some(Reserved { model: name.to_owned(), price, worst, held })),
        Ok(Err(refusal)) => {
            let error = refusal.message();
            tracing::warn!(task = %run.task, %error, "model call not sent: it could cross a budget");
            Err(Outcome::BudgetExhausted { error })
        }
        Err(error) => Err(Outcome::Failed {
            error: format!("cannot check the budgets: {}", error.public_message()),
            permanent: false,
        }),
    }
}

/// Settles an answered call: its cost (from the tokens it reports) into the month's spend,
/// its hold dropped. When the store keeps failing the hold stays, and keeps the budget safe
/// until the task's next call replaces it.
pub(super) async fn settle(
    node: &Node,
    run: RunRef<'_>,
    reserved: Reserved,
    usage: Option<Usage>,
) -> StepCost {
    let cost = StepCost::of(&reserved.model, reserved.price, usage, reserved.worst);
    node.core.counters().model_cost(&cost.model, cost.unpriced, cost.cost_micros);
    if !reserved.held && cost.cost_micros == 0 {
        return cost;
    }
    let settle = || node.core.run_store().settle(run, &cost);
    let what = format!("settle a model call's cost ({} micro-dollars)", cost.cost_micros);
    // A cost not settled is logged, with its amount, by the retry loop; its hold stays.
    let _ = super::write_retrying(node, run.task, &what, settle).await;
    cost
}
