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
use super::{Shown, agent_id, agent_url, fail, refused, see, signed_in, task_id};

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
    answer(&state, &who, &csrf, &id, "task", &fields, result.await).await
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
    let events = format!("/events?agent={agent}&task={id}");
    signed_in(
        state,
        who,
        "task.html",
        context! {
            csrf => csrf.0, nav => "agents", events, agent_id => agent, task, steps, running, form,
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
        Ok(_) => see(&format!("{}/tasks/{task}", agent_url(&id))),
        Err(error) => {
            let form = context! { values => fields.values(), errors => FormErrors::of(&error) };
            refused(task_page(&state, &who, &csrf, &id, &task, form).await?, &error)
        }
    }
}

/// `POST /agents/{id}/tasks/{task_id}/{command}`: retry a failed task, cancel one (queued,
/// awaiting approval or running), approve or deny its tool call, or delete it. Back to the
/// agent's page, or to the task's with the field `to=task` (its page's buttons).
pub(crate) async fn command(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    Path((id, task, command)): Path<(String, String, String)>,
    fields: Fields,
) -> Shown {
    let (id, task) = (agent_id(&id)?, task_id(&task)?);
    match command.as_str() {
        "retry" => drop(state.core.retry_task(&who, &id, &task).await.map_err(fail)?),
        "cancel" => {
            drop(state.core.cancel_task(&who, &id, &task).await.map_err(fail)?);
            if fields.get("to").as_deref() == Some("task") {
                return see(&format!("{}/tasks/{task}", agent_url(&id)));
            }
        }
        "delete" => state.core.delete_task(&who, &id, &task).await.map_err(fail)?,
        "approve" => {
            drop(state.core.decide_task(&who, &id, &task, Decision::Approve).await.map_err(fail)?)
        }
        "deny" => {
            drop(state.core.decide_task(&who, &id, &task, Decision::Deny).await.map_err(fail)?)
        }
        _ => return Err(fail(ApiError::RouteNotFound)),
    }
    see(&agent_url(&id))
}
