//! An agent's settings, memory block and schedules, as forms on its page.

use axum::extract::{Path, State};
use minijinja::{Value, context};

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
use super::{Shown, agent_id, agent_url, done, fail, refused};

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
        fallback_models: Some(fallbacks(fields.text("fallback_models"))),
        ..UpdateAgentRequest::default()
    };
    let result = async {
        errors.into_result()?;
        Ok::<_, ApiError>(state.core.update_agent(&who, &id, request.parse()?).await?)
    };
    answer(&state, &who, &csrf, &id, ("settings", "Settings saved."), &fields, result.await).await
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
    answer(&state, &who, &csrf, &id, ("memory", "Memory saved."), &fields, result.await).await
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
    let added = format!("The schedule “{}” was added.", fields.get("title").unwrap_or_default());
    answer(&state, &who, &csrf, &id, ("schedule", &added), &fields, result.await).await
}

/// `POST /agents/{id}/schedules/{schedule_id}/{command}`: enable, disable or delete.
pub(crate) async fn schedule_command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    Path((id, schedule, command)): Path<(String, String, String)>,
) -> Shown {
    let id = agent_id(&id)?;
    let schedule = crate::extract::schedule_id(&schedule).map_err(fail)?;
    let schedules = format!("{}#schedules", agent_url(&id));
    let enabled = match command.as_str() {
        "enable" => true,
        "disable" => false,
        "delete" => {
            let title = state.core.schedule(&who, &id, &schedule).await.map_err(fail)?.title;
            state.core.delete_schedule(&who, &id, &schedule).await.map_err(fail)?;
            return done(&schedules, format!("The schedule “{title}” was deleted."));
        }
        _ => return Err(fail(ApiError::RouteNotFound)),
    };
    let patch =
        UpdateScheduleRequest { enabled: Some(enabled), ..UpdateScheduleRequest::default() };
    let patch = patch.parse().map_err(fail)?;
    let changed = state.core.update_schedule(&who, &id, &schedule, patch).await.map_err(fail)?;
    let now = if enabled { "enabled" } else { "disabled" };
    done(&schedules, format!("The schedule “{}” is {now}.", changed.title))
}

/// After a form on an agent's page (`which`, and the message when it is accepted): back to
/// the form's section of the page, saying so; or, refused, the page again with every field
/// as entered (ticked boxes too: `lists`) and the errors beside their fields.
pub(super) async fn answer<T>(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    id: &AgentId,
    (which, saved): (&str, &str),
    fields: &Fields,
    result: Result<T, ApiError>,
) -> Shown {
    let Err(error) = result else {
        let section = match which {
            "task" => "add-task",
            "schedule" => "schedules",
            other => other,
        };
        return done(&format!("{}#{section}", agent_url(id)), saved);
    };
    let errors = FormErrors::of(&error);
    let form = context! { which, values => fields.values(), lists => fields.lists(), errors };
    refused(agent_page(state, who, csrf, id, None, form, Value::UNDEFINED).await?, &error)
}

/// The settings form's fallback models: empty is the server's chain (`null`), `none` no
/// fallback (`[]`), else the comma-separated names.
fn fallbacks(text: Option<String>) -> Option<Vec<String>> {
    let text = text.unwrap_or_default();
    match text.trim() {
        "" => None,
        "none" => Some(Vec::new()),
        names => Some(
            names.split(',').map(|name| name.trim().to_owned()).filter(|n| !n.is_empty()).collect(),
        ),
    }
}
