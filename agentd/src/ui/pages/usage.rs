//! Usage and budgets (this month by agent, model and day; the user's budget), and the plan
//! with its agent limit.

use axum::extract::{Query, State};
use minijinja::context;

use agentcore::Principal;
use agentcore::api::{BudgetRequest, UsageParams};

use crate::AppState;
use crate::error::ApiError;
use crate::ui::form::Fields;
use crate::ui::render::FormErrors;
use crate::ui::session::{Csrf, Viewer};

use super::{Shown, fail, refused, see, signed_in};

/// `GET /usage?from=&to=`: the period's usage three ways, the budget and the plan.
pub(crate) async fn page(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Query(params): Query<UsageParams>,
) -> Shown {
    usage_page(&state, &who, &csrf, params, &Fields::default(), FormErrors::default()).await
}

async fn usage_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    params: UsageParams,
    fields: &Fields,
    errors: FormErrors,
) -> Shown {
    let mut reports = Vec::new();
    for grouping in ["agent", "model", "day"] {
        let query =
            UsageParams { group_by: Some(grouping.into()), agent_id: None, ..params.clone() };
        reports.push(
            context! { grouping, report => state.core.usage(who, &query).await.map_err(fail)? },
        );
    }
    let budget = state.core.budget(who).await.map_err(fail)?;
    let billing = state.core.billing(who).await.map_err(fail)?;
    signed_in(
        state,
        who,
        "usage.html",
        context! { csrf => csrf.0, nav => "usage", reports, budget, billing, params, values => fields.values(), errors },
    )
    .await
}

/// `POST /usage/budget`: sets the monthly budget of all the user's agents; blank removes it.
pub(crate) async fn set_budget(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    fields: Fields,
) -> Shown {
    let mut errors = agentcore::ValidationErrors::new();
    let monthly = fields.number::<f64>("monthly_usd", &mut errors);
    let result = async {
        errors.into_result()?;
        let budget = BudgetRequest { monthly_usd: Some(monthly) }.parse()?;
        Ok::<_, ApiError>(state.core.set_budget(&who, budget).await?)
    };
    match result.await {
        Ok(_) => see("/usage"),
        Err(error) => refused(
            usage_page(
                &state,
                &who,
                &csrf,
                UsageParams::default(),
                &fields,
                FormErrors::of(&error),
            )
            .await?,
            &error,
        ),
    }
}
