//! An agent's settings, memory block and schedules, as forms on its page.

use axum::extract::{Path, State};
use minijinja::context;

use agentcore::Principal;
use agentcore::api::{
    CreateScheduleRequest, SetMemoryRequest, UpdateAgentRequest, UpdateScheduleRequest,
};
use agentcore::domain::agent::AgentId;

use crate::AppState;
use crate::error::ApiError;
use crate::ui::form::Fields;
use crate::ui::render::FormErrors;
use crate::ui::session::{Csrf, Viewer};

use super::agents::agent_page;
use super::{Shown, agent_id, agent_url, fail, refused, see};

/// `POST /agents/{id}/settings`: name, role prompt, channel, model, tools, step limit, budget,
/// the tools that need approval (comma-separated).
/// A blank model or budget means none (the default model; no budget).
pub(crate) async fn update(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(id): Path<String>,
    fields: Fields,
) -> Shown {
    let id = agent_id(&id)?;
    let mut errors = agentcore::ValidationErrors::new();
    let max_steps = fields.number::<i64>("max_steps", &mut errors);
    let throttle_seconds = fields.number::<f64>("throttle_seconds", &mut errors);
    let budget = fields.number::<f64>("budget_monthly_usd", &mut errors);
    let request = UpdateAgentRequest {
        name: fields.get("name"),
        role_prompt: fields.get("role_prompt"),
        channel: fields.get("channel"),
        model: Some(fields.text("model")),
        tools: Some(fields.all("tools")),
        mcp_servers: Some(fields.all("mcp_servers")),
        max_steps,
        throttle_seconds,
        budget_monthly_usd: Some(budget),
        approval_tools: Some(
            fields
                .text("approval_tools")
                .unwrap_or_default()
                .split(',')
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty())
                .collect(),
        ),
        ..UpdateAgentRequest::default()
    };
    let result = async {
        errors.into_result()?;
        Ok::<_, ApiError>(state.core.update_agent(&who, &id, request.parse()?).await?)
    };
    answer(&state, &who, &csrf, &id, "settings", &fields, result.await).await
}

/// `POST /agents/{id}/memory`: replaces the memory block.
pub(crate) async fn memory(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(id): Path<String>,
    fields: Fields,
) -> Shown {
    let id = agent_id(&id)?;
    let request = SetMemoryRequest { memory: Some(fields.all("memory").concat()) };
    let result =
        async { Ok::<_, ApiError>(state.core.set_memory(&who, &id, &request.parse()?).await?) };
    answer(&state, &who, &csrf, &id, "memory", &fields, result.await).await
}

/// `POST /agents/{id}/schedules`: a new schedule.
pub(crate) async fn add_schedule(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(id): Path<String>,
    fields: Fields,
) -> Shown {
    let id = agent_id(&id)?;
    let mut errors = agentcore::ValidationErrors::new();
    let request = CreateScheduleRequest {
        cron: fields.get("cron"),
        timezone: fields.text("timezone"),
        title: fields.get("title"),
        description: fields.text("description"),
        priority: fields.number("priority", &mut errors),
        catch_up: fields.text("catch_up"),
        overlap: fields.text("overlap"),
        enabled: Some(true),
    };
    let result = async {
        errors.into_result()?;
        Ok::<_, ApiError>(state.core.add_schedule(&who, &id, request.parse()?).await?)
    };
    answer(&state, &who, &csrf, &id, "schedule", &fields, result.await).await
}

/// `POST /agents/{id}/schedules/{schedule_id}/{command}`: enable, disable or delete.
pub(crate) async fn schedule_command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    Path((id, schedule, command)): Path<(String, String, String)>,
) -> Shown {
    let id = agent_id(&id)?;
    let schedule = crate::extract::schedule_id(&schedule).map_err(fail)?;
    let enabled = match command.as_str() {
        "enable" => true,
        "disable" => false,
        "delete" => {
            state.core.delete_schedule(&who, &id, &schedule).await.map_err(fail)?;
            return see(&agent_url(&id));
        }
        _ => return Err(fail(ApiError::RouteNotFound)),
    };
    let patch =
        UpdateScheduleRequest { enabled: Some(enabled), ..UpdateScheduleRequest::default() };
    let patch = patch.parse().map_err(fail)?;
    state.core.update_schedule(&who, &id, &schedule, patch).await.map_err(fail)?;
    see(&agent_url(&id))
}

/// After a form on an agent's page: back to the page, or, refused, the page again with the
/// form's values and its errors beside their fields.
pub(super) async fn answer<T>(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    id: &AgentId,
    which: &str,
    fields: &Fields,
    result: Result<T, ApiError>,
) -> Shown {
    let Err(error) = result else {
        return see(&agent_url(id));
    };
    let form = context! { which, values => fields.values(), errors => FormErrors::of(&error) };
    refused(agent_page(state, who, csrf, id, None, form).await?, &error)
}
