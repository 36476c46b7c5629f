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

use super::{Shown, done, fail, refused, signed_in};

/// `GET /usage?from=&to=`: the period's usage three ways, the budget and the plan. A period
/// that does not parse shows this month's usage, with the period's fields as typed and their
/// errors (the expected format) beside them; a blank field is its default.
pub(crate) async fn page(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Query(params): Query<UsageParams>,
) -> Shown {
    let blank_is_default = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
    let typed = UsageParams {
        from: blank_is_default(params.from),
        to: blank_is_default(params.to),
        ..params
    };
    let fields = Fields::default();
    match typed.parse(chrono::Utc::now()) {
        Ok(_) => {
            let period = Period { query: typed.clone(), typed, errors: FormErrors::default() };
            usage_page(&state, &who, &csrf, period, &fields, FormErrors::default()).await
        }
        Err(problems) => {
            let error = ApiError::from(problems);
            let errors = FormErrors::of(&error);
            let period = Period { query: UsageParams::default(), typed, errors };
            refused(
                usage_page(&state, &who, &csrf, period, &fields, FormErrors::default()).await?,
                &error,
            )
        }
    }
}

/// The period shown (`query`), the period's fields as typed and their errors.
struct Period {
    query: UsageParams,
    typed: UsageParams,
    errors: FormErrors,
}

impl Period {
    fn this_month() -> Self {
        Self {
            query: UsageParams::default(),
            typed: UsageParams::default(),
            errors: FormErrors::default(),
        }
    }
}

async fn usage_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    period: Period,
    fields: &Fields,
    errors: FormErrors,
) -> Shown {
    let mut reports = Vec::new();
    for grouping in ["agent", "model", "day"] {
        let query =
            UsageParams { group_by: Some(grouping.into()), agent_id: None, ..period.query.clone() };
        reports.push(
            context! { grouping, report => state.core.usage(who, &query).await.map_err(fail)? },
        );
    }
    let budget = state.core.budget(who).await.map_err(fail)?;
    let limit = super::agent_limit(state, who).await?;
    signed_in(
        state,
        who,
        "usage.html",
        context! {
            csrf => csrf.0, nav => "usage", reports, budget, limit,
            params => period.typed, period_errors => period.errors, values => fields.values(),
            errors,
        },
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
        Ok(_) => done("/usage", "The budget was saved."),
        Err(error) => refused(
            usage_page(&state, &who, &csrf, Period::this_month(), &fields, FormErrors::of(&error))
                .await?,
            &error,
        ),
    }
}
