//! The agents overview, creating an agent, and an agent's page; both are live (`live.js`
//! refreshes their `data-live` parts when the user's events say something changed).

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use minijinja::{Value, context};

use agentcore::Principal;
use agentcore::api::{CreateAgentRequest, UsageParams};
use agentcore::domain::activity::ActivityQuery;
use agentcore::domain::agent::{AgentFilter, AgentId};
use agentcore::domain::workspace::Need;

use crate::AppState;
use crate::ui::form::Fields;
use crate::ui::render::FormErrors;
use crate::ui::session::{Csrf, Viewer};

use super::lists::ListsQuery;
use super::{Shown, agent_id, agent_url, done, fail, refused, see, signed_in};

/// `GET /`: every agent with its status, backlog counts, last activity and cost this month.
pub(crate) async fn overview(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
) -> Shown {
    overview_page(&state, &who, &csrf, &Fields::default(), FormErrors::default()).await
}

/// `POST /agents`: a new agent from the overview's form.
pub(crate) async fn create(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    fields: Fields,
) -> Shown {
    let request = CreateAgentRequest {
        id: fields.get("id"),
        name: fields.get("name"),
        role_prompt: fields.get("role_prompt"),
        channel: fields.get("channel"),
        model: fields.text("model"),
        ..CreateAgentRequest::default()
    };
    let created = async {
        Ok::<_, crate::error::ApiError>(state.core.create_agent(&who, request.parse()?).await?)
    };
    match created.await {
        Ok(agent) => done(&agent_url(&agent.id), format!("Agent {} created.", agent.name)),
        Err(error) => refused(
            overview_page(&state, &who, &csrf, &fields, FormErrors::of(&error)).await?,
            &error,
        ),
    }
}

async fn overview_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    fields: &Fields,
    errors: FormErrors,
) -> Shown {
    let agents = agent_rows(state, who).await?;
    let limit = super::agent_limit(state, who).await?;
    let models = state.core.model_list(who).await.map_err(fail)?;
    signed_in(
        state,
        who,
        "agents.html",
        context! {
            csrf => csrf.0, nav => "agents", events => "/events", agents, limit,
            default_model => models.default_model, usable_models => models.models,
            values => fields.values(), errors,
        },
    )
    .await
}

/// Each agent as the overview shows it: the summary, its cost this month and its last entry.
async fn agent_rows(state: &AppState, who: &Principal) -> Result<Vec<Value>, super::Failed> {
    let agents = state.core.list_agents(who, &AgentFilter::default()).await.map_err(fail)?;
    let usage = UsageParams { group_by: Some("agent".into()), ..UsageParams::default() };
    let usage = state.core.usage(who, &usage).await.map_err(fail)?;
    let cost: BTreeMap<String, i64> =
        usage.rows.into_iter().filter_map(|row| Some((row.key?, row.cost_micros))).collect();
    let mut rows = Vec::with_capacity(agents.len());
    for agent in agents {
        let last = state
            .core
            .activity(who, &agent.id, &ActivityQuery { limit: 1, ..ActivityQuery::default() })
            .await
            .map_err(fail)?
            .into_iter()
            .next();
        let cost_micros = cost.get(agent.id.as_str()).copied().unwrap_or(0);
        rows.push(context! { agent, last, cost_micros });
    }
    Ok(rows)
}

/// `GET /agents/{id}`: settings, status commands, a page of the backlog (`?status=`,
/// `?search=`, `?cursor=`), memory, schedules and a page of activity (`?before=` or `?after=`
/// an entry's time).
pub(crate) async fn show(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(id): Path<String>,
    Query(lists): Query<ListsQuery>,
) -> Shown {
    let id = agent_id(&id)?;
    agent_page(&state, &who, &csrf, &id, Some(&lists), Value::UNDEFINED, Value::UNDEFINED).await
}

/// The agent page, with `form` (which form was refused, its values and errors) when one was,
/// and the pages of its lists `lists` asks for (their first pages without it); `made`: a
/// trigger's secret, shown this once (`triggers.rs`).
pub(super) async fn agent_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    id: &AgentId,
    lists: Option<&ListsQuery>,
    form: Value,
    made: Value,
) -> Shown {
    // The agent and its counts; its tasks are read a page at a time below.
    let agent = state.core.agent_page(who, id, 1, None).await.map_err(fail)?.agent;
    let lists = lists.cloned().unwrap_or_default().read(state, who, id).await?;
    let list_errors = lists.errors.map(|error| FormErrors::of(&error.into()));
    let list_errors_refused = list_errors.is_some();
    let memory = state.core.memory(who, id).await.map_err(fail)?;
    let schedules = state.core.schedules(who, id).await.map_err(fail)?.schedules;
    let tools = state.core.tools();
    let servers = state.core.mcp_servers(who).await.map_err(fail)?;
    let mcp_servers: Vec<String> = servers
        .operator_servers
        .iter()
        .map(ToString::to_string)
        .chain(servers.servers.iter().map(|server| server.name.to_string()))
        .collect();
    let default_model = state.core.models().default_model();
    let triggers = state.core.triggers(who, Some(id)).await.map_err(fail)?.triggers;
    let work = who.role.allows(Need::Work);
    signed_in(
        state,
        who,
        "agent.html",
        context! {
            csrf => csrf.0, nav => "agents", events => format!("/events?agent={id}"),
            agent, backlog => lists.backlog, activity => lists.activity, list_errors,
            memory, schedules, tools, mcp_servers, default_model, form, triggers, work, made,
        },
    )
    .await
    .map(|mut page| {
        if list_errors_refused {
            *page.status_mut() = axum::http::StatusCode::BAD_REQUEST;
        }
        page
    })
}

/// `POST /agents/{id}/{command}`: start, stop, vacation (on or off) or delete.
pub(crate) async fn command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    Path((id, command)): Path<(String, String)>,
    fields: Fields,
) -> Shown {
    let id = agent_id(&id)?;
    let core = &state.core;
    let agent = match command.as_str() {
        "start" => core.start_agent(&who, &id).await,
        "stop" => core.stop_agent(&who, &id).await,
        "vacation" => {
            let on = fields.get("enabled").as_deref() == Some("true");
            core.set_vacation(&who, &id, Some(on)).await
        }
        "delete" => {
            core.delete_agent(&who, &id).await.map_err(fail)?;
            let message =
                format!("The agent {id} was deleted, with its backlog, schedules and activity.");
            return done("/", message);
        }
        _ => return Err(fail(crate::error::ApiError::RouteNotFound)),
    }
    .map_err(fail)?;
    done(&agent_url(&id), format!("{} is {} now.", agent.name, agent.status))
}

/// `GET /agents/{id}/{form}` (settings, memory, schedules, triggers, tasks): a form's address visited,
/// say by reloading the page a refused form answered. Nothing is saved: back to the form's
/// section of the agent's page.
pub(crate) async fn form_address(Path(id): Path<String>, uri: axum::http::Uri) -> Shown {
    let id = agent_id(&id)?;
    let section = match uri.path().rsplit('/').next() {
        Some("tasks") => "add-task",
        Some(form @ ("settings" | "memory" | "schedules" | "triggers")) => form,
        _ => return Err(fail(crate::error::ApiError::RouteNotFound)),
    };
    see(&format!("{}#{section}", agent_url(&id)))
}
