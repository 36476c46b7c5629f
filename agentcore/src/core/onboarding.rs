//! Onboarding: a ready agent with a first task, from a template.

use super::backlog::task_added;
use super::{Core, Principal};
use crate::api::{CreateAgentRequest, CreateTaskRequest};
use crate::domain::activity::{Action, NewActivity};
use crate::domain::now;
use crate::domain::onboarding::{self, CompanyName, Onboarded, TEMPLATES, Template};
use crate::domain::task::Task;
use crate::domain::workspace::Need;
use crate::error::{Error, Resource, Result, ValidationErrors};
use crate::store::AgentWithTask;

impl Core {
    /// The templates `onboard` can start from.
    pub fn onboarding_templates(&self) -> &'static [Template] {
        &TEMPLATES
    }

    /// Creates an agent from `template` for `company` (id `<template>-lead`, numbered `-2`,
    /// `-3`, ... when taken) with its sample task queued, in one transaction and within the
    /// caller's plan. The agent starts `idle`.
    pub async fn onboard(
        &self,
        who: &Principal,
        company: &CompanyName,
        template: &str,
    ) -> Result<Onboarded> {
        who.require(Need::Work)?;
        let template = onboarding::template(template)
            .ok_or_else(|| Error::not_found(Resource::Template, template))?;
        let request = CreateAgentRequest {
            id: Some(template.agent_id()),
            name: Some(template.name.to_string()),
            role_prompt: Some(template.role_prompt_for(company)),
            channel: Some(template.channel.to_string()),
            ..CreateAgentRequest::default()
        };
        let sample = CreateTaskRequest {
            title: Some(template.sample_task.title.to_string()),
            description: Some(template.sample_task.description.to_string()),
            priority: None,
        };
        let invalid =
            |e: ValidationErrors| Error::internal(format!("template {}: {e}", template.id));
        let agent = request.parse().map_err(invalid)?;
        let task = Task::queued(&agent.id, sample.parse().map_err(invalid)?, now());
        let created = NewActivity::new(
            Action::AgentCreated,
            format!(
                "Agent '{}' created from the {} template for {company}.",
                agent.name, template.id
            ),
        );
        let added = task_added(&task);
        let AgentWithTask { agent, task } = self
            .store()
            .insert_agent_with_task(
                &who.workspace,
                &agent,
                &created,
                &task,
                &added,
                self.agent_limit(),
            )
            .await?;
        tracing::info!(workspace = %who.workspace, agent_id = %agent.id, template = %template.id, "onboarded");
        Ok(Onboarded { agent: agent.into(), task })
    }
}
