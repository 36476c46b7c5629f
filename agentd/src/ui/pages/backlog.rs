//! Tasks: adding one, a task's page (its result rendered from Markdown, its steps and the step
//! running now, live), and editing, retrying, cancelling and deleting it.

use axum::extract::{Path, State};
use minijinja::{Value, context};

use agentcore::Principal;
use agentcore::api::{CreateTaskRequest, UpdateTaskRequest};
use agentcore::domain::agent::AgentId;
use agentcore::domain::approval::Decision;
use agentcore::domain::task::TaskId;

use crate::AppState;
use crate::error::ApiError;
use crate::ui::form::Fields;
use crate::ui::render::FormErrors;
use crate::ui::session::{Csrf, Viewer};

use super::settings::answer;
use super::{Shown, agent_id, agent_url, done, fail, refused, signed_in, task_id};

/// `POST /agents/{id}/tasks`: a new task in the backlog.
pub(crate) async fn add(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path(id): Path<String>,
    fields: Fields,
) -> Shown {
    let id = agent_id(&id)?;
    let mut errors = agentcore::ValidationErrors::new();
    let request = CreateTaskRequest {
        title: fields.get("title"),
        description: fields.text("description"),
        priority: fields.number("priority", &mut errors),
    };
    let result = async {
        errors.into_result()?;
        Ok::<_, ApiError>(state.core.add_task(&who, &id, request.parse()?).await?)
    };
    let added = format!("The task “{}” was added.", fields.get("title").unwrap_or_default());
    answer(&state, &who, &csrf, &id, ("task", &added), &fields, result.await).await
}

/// `GET /agents/{id}/tasks/{task_id}`: the task, its result and its steps.
pub(crate) async fn show(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((id, task)): Path<(String, String)>,
) -> Shown {
    task_page(&state, &who, &csrf, &agent_id(&id)?, &task_id(&task)?, Value::UNDEFINED).await
}

async fn task_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    agent: &AgentId,
    id: &TaskId,
    form: Value,
) -> Shown {
    let task = state.core.task(who, agent, id).await.map_err(fail)?;
    let steps = state.core.steps(who, agent, id).await.map_err(fail)?;
    let running = super::running::running(&task, &steps);
    let awaiting = super::running::awaiting(&task, &steps).cloned();
    let events = format!("/events?agent={agent}&task={id}");
    signed_in(
        state,
        who,
        "task.html",
        context! {
            csrf => csrf.0, nav => "agents", events, agent_id => agent, task, steps, running, awaiting,
            form,
        },
    )
    .await
}

/// `POST /agents/{id}/tasks/{task_id}`: title, description and priority of a queued task.
pub(crate) async fn update(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    Path((id, task)): Path<(String, String)>,
    fields: Fields,
) -> Shown {
    let (id, task) = (agent_id(&id)?, task_id(&task)?);
    let mut errors = agentcore::ValidationErrors::new();
    let request = UpdateTaskRequest {
        title: fields.get("title"),
        description: Some(fields.text("description")),
        priority: fields.number("priority", &mut errors),
    };
    let result = async {
        errors.into_result()?;
        Ok::<_, ApiError>(state.core.update_task(&who, &id, &task, request.parse()?).await?)
    };
    match result.await {
        Ok(_) => done(&format!("{}/tasks/{task}", agent_url(&id)), "The task was saved."),
        Err(error) => {
            let form = context! { values => fields.values(), errors => FormErrors::of(&error) };
            refused(task_page(&state, &who, &csrf, &id, &task, form).await?, &error)
        }
    }
}

/// `POST /agents/{id}/tasks/{task_id}/{command}`: retry a failed task, cancel one (queued,
/// awaiting approval or running), approve or deny its tool call, or delete it. Back to the
/// agent's backlog, or to the task's page with the field `to=task` (its page's buttons), with a
/// message saying what was done.
pub(crate) async fn command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    Path((id, task, command)): Path<(String, String, String)>,
    fields: Fields,
) -> Shown {
    let (id, task) = (agent_id(&id)?, task_id(&task)?);
    let core = &state.core;
    let backlog = format!("{}#backlog", agent_url(&id));
    let page = match fields.get("to").as_deref() {
        Some("task") => format!("{}/tasks/{task}", agent_url(&id)),
        _ => backlog.clone(),
    };
    match command.as_str() {
        "retry" => {
            let retried = core.retry_task(&who, &id, &task).await.map_err(fail)?;
            done(&page, format!("The task “{}” is queued again.", retried.title))
        }
        "cancel" => {
            let cancelled = core.cancel_task(&who, &id, &task).await.map_err(fail)?;
            done(&page, format!("The task “{}” was cancelled.", cancelled.title))
        }
        "delete" => {
            let title = core.task(&who, &id, &task).await.map_err(fail)?.title;
            core.delete_task(&who, &id, &task).await.map_err(fail)?;
            done(&backlog, format!("The task “{title}” was deleted."))
        }
        "approve" => {
            let approval =
                core.decide_task(&who, &id, &task, Decision::Approve).await.map_err(fail)?;
            done(&page, format!("Approved: the task goes on and calls {}.", approval.tool))
        }
        "deny" => {
            let approval =
                core.decide_task(&who, &id, &task, Decision::Deny).await.map_err(fail)?;
            done(&page, format!("Denied: the task goes on without calling {}.", approval.tool))
        }
        _ => Err(fail(ApiError::RouteNotFound)),
    }
}
