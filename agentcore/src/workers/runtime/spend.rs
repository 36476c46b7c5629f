//! The money side of a model call: before it is sent, its worst case is reserved against the
//! budgets of its agent and owner (a call that could cross one is not sent, and the run ends
//! `budget_exhausted`); after it answers, its cost is settled into the month's spend.

use super::{Node, Unanswered};
use crate::domain::budget::{Price, StepCost};
use crate::domain::runtime::Outcome;
use crate::domain::task::Usage;
use crate::models::tokens::PART_TOKENS;
use crate::models::{CompletionRequest, ModelKind};
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
/// could be crossed or cannot be checked, or [`Unanswered::Interrupted`] when the database is
/// out of reach.
///
/// The worst case counts the request's input tokens with [`Models::input_tokens_bound`]. Where
/// that is the byte bound (a model without a published tokenizer) and it would cross a budget,
/// the provider is asked to count the request exactly, when it can, and the reservation is
/// tried once more with that count: a call near the end of a budget is refused only when it
/// could really cross it.
///
/// [`Models::input_tokens_bound`]: crate::models::Models::input_tokens_bound
pub(super) async fn reserve(
    node: &Node,
    run: RunRef<'_>,
    model: Option<&str>,
    kind: ModelKind<'_>,
    request: &CompletionRequest,
) -> Result<Option<Reserved>, Unanswered> {
    if kind == ModelKind::Echo {
        return Ok(None);
    }
    let models = node.core.models();
    let (name, price) = models.price(model);
    // An unpriced model costs 0 whatever its tokens: nothing to count.
    let input = price.map_or(0, |_| models.input_tokens_bound(model, request));
    let mut worst = price.map_or(0, |p| p.worst_case(input, request.max_tokens));
    let mut refusal = match try_reserve(node, run, worst).await? {
        Ok(held) => return Ok(Some(Reserved { model: name.to_owned(), price, worst, held })),
        Err(refusal) => refusal,
    };
    if let (Some(price), false) = (price, models.counted_exactly(model, &request.model))
        && let Some(exact) = exact_bound(node, model, request).await
    {
        worst = price.worst_case(exact.min(input), request.max_tokens);
        match try_reserve(node, run, worst).await? {
            Ok(held) => {
                let model = name.to_owned();
                return Ok(Some(Reserved { model, price: Some(price), worst, held }));
            }
            Err(again) => refusal = again,
        }
    }
    let error = refusal.message();
    tracing::warn!(task = %run.task, %error, "model call not sent: it could cross a budget");
    Err(Outcome::BudgetExhausted { error }.into())
}

/// The budgets' answer to holding `worst`: whether a hold was written, or the refusal; what
/// becomes of the run when the budgets cannot be checked ([`super::read_for_run`]).
async fn try_reserve(
    node: &Node,
    run: RunRef<'_>,
    worst: i64,
) -> Result<Result<bool, crate::domain::budget::Refusal>, Unanswered> {
    let read = || node.core.run_store().reserve(run, worst);
    let reserved = super::read_for_run(node, run.task, "check the budgets", read).await;
    reserved.map_err(Unanswered::from)
}

/// The provider's own count of `request`'s input tokens, with [`EXACT_MARGIN_PERCENT`] and
/// [`PART_TOKENS`] added (Anthropic calls its count an estimate that may differ by a little);
/// `None` when the provider cannot count or the count failed (the bound stands).
pub(super) async fn exact_bound(
    node: &Node,
    model: Option<&str>,
    request: &CompletionRequest,
) -> Option<usize> {
    let provider = node.core.models().provider_of(model)?;
    match provider.count_input_tokens(request).await {
        Ok(Some(tokens)) => {
            let tokens = usize::try_from(tokens).unwrap_or(usize::MAX);
            Some(
                tokens
                    .saturating_add(tokens * EXACT_MARGIN_PERCENT / 100)
                    .saturating_add(PART_TOKENS),
            )
        }
        Ok(None) => None,
        Err(error) => {
            tracing::info!(%error, "the provider could not count a request's tokens; its byte bound stands");
            None
        }
    }
}

/// What is added to a provider's own count of a request before it is reserved, in percent.
const EXACT_MARGIN_PERCENT: usize = 2;

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
