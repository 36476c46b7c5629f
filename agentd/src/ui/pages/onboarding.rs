//! Onboarding: pick a template, name the company, optionally map the agent to a Discord
//! channel, set its first task, and start it.

use axum::extract::State;
use minijinja::context;

use agentcore::Principal;
use agentcore::api::{MapRequest, SetupRequest, UpdateTaskRequest};
use agentcore::domain::chat::GuildId;

use crate::AppState;
use crate::error::ApiError;
use crate::ui::form::Fields;
use crate::ui::render::FormErrors;
use crate::ui::session::{Csrf, Viewer};

use super::{Shown, agent_url, fail, refused, see, signed_in};

/// `GET /onboarding`.
pub(crate) async fn page(State(state): State<AppState>, Viewer(who): Viewer, csrf: Csrf) -> Shown {
    onboarding_page(&state, &who, &csrf, &Fields::default(), FormErrors::default()).await
}

async fn onboarding_page(
    state: &AppState,
    who: &Principal,
    csrf: &Csrf,
    fields: &Fields,
    errors: FormErrors,
) -> Shown {
    let templates = state.core.onboarding_templates();
    let connections = state.core.connections(who).await.map_err(fail)?;
    // The agent limit is shown before the form is filled in, not only once it is refused.
    let limit = super::agent_limit(state, who).await?;
    signed_in(
        state,
        who,
        "onboarding.html",
        context! {
            csrf => csrf.0, nav => "onboarding", templates, connections, limit,
            values => fields.values(), errors,
        },
    )
    .await
}

/// `POST /onboarding`: every field is checked before anything is created; the agent, its first
/// task and its mapping are then made, and the agent started when asked.
pub(crate) async fn setup(
    State(state): State<AppState>,
    Viewer(who): Viewer,
    csrf: Csrf,
    fields: Fields,
) -> Shown {
    let setup = SetupRequest {
        company_name: fields.get("company_name"),
        role_template: fields.get("role_template"),
    };
    let first_task = fields.text("task_title").map(|title| UpdateTaskRequest {
        title: Some(title),
        description: Some(fields.text("task_description")),
        priority: None,
    });
    let channel = fields.text("channel_id");
    let guild = fields.text("guild_id").filter(|_| channel.is_some());
    let start = fields.get("start").as_deref() == Some("on");
    let result = async {
        let (company, template) = setup.parse()?;
        let first_task = first_task.as_ref().map(UpdateTaskRequest::parse).transpose()?;
        let mapping = match &guild {
            Some(guild) => {
                let guild = GuildId::parse(guild)
                    .map_err(|problem| agentcore::ValidationErrors::single("guild_id", problem))?;
                // The agent's id is not known yet; the channel id is checked now, mapped below.
                let check = MapRequest {
                    agent_id: Some("placeholder".into()),
                    channel_id: channel.clone(),
                    channel_name: None,
                };
                Some((guild, check.parse()?.1))
            }
            None => None,
        };
        let onboarded = state.core.onboard(&who, &company, &template).await?;
        let agent = onboarded.agent.id;
        if let Some(patch) = first_task {
            state.core.update_task(&who, &agent, &onboarded.task.id, patch).await?;
        }
        if let Some((guild, channel)) = mapping {
            state.core.map_agent(&who, &guild, &agent, &channel).await?;
        }
        if start {
            state.core.start_agent(&who, &agent).await?;
        }
        Ok::<_, ApiError>(agent)
    };
    match result.await {
        Ok(agent) => see(&agent_url(&agent)),
        Err(error) => refused(
            onboarding_page(&state, &who, &csrf, &fields, FormErrors::of(&error)).await?,
            &error,
        ),
    }
}
