//! Discord interactions: what Discord POSTs to the interactions endpoint (a ping, a slash
//! command, a click on an approval's button or on a task's Cancel, an autocomplete), verified,
//! read and answered.
//! Commands act as the connection's owner, on the agents mapped to a channel of the server.
//! An answer that takes longer than Discord's three seconds is deferred and finished through
//! the interaction's webhook.

use std::time::Duration;

use super::{Core, Principal};
use crate::discord::interaction::{Interaction, Member, message_data};
use crate::discord::signature::PublicKey;
use crate::domain::agent::{AgentId, AgentSummary};
use crate::domain::approval::{Decider, Decision, decided_body};
use crate::domain::interaction::{AgentAction, Command, Reply, Request, nothing_to_cancel};
use crate::domain::now;
use crate::domain::runtime::started_cancelled_body;
use crate::domain::task::{NewTask, Priority, TaskDescription, TaskId, TaskStatus, TaskTitle};
use crate::domain::workspace::{Actor, Role, WorkspaceId};
use crate::error::{Error, Result, ValidationErrors};
use crate::store::{ApprovalRef, ConnectionRecord};

/// How long a command may take before its answer is deferred: Discord waits three seconds.
const ANSWER_WITHIN: Duration = Duration::from_millis(2500);
/// How long a deferred answer may take: Discord's interaction token lives fifteen minutes.
const FINISH_WITHIN: Duration = Duration::from_secs(14 * 60);
/// How often `/ask` looks at its task while waiting for it.
const ASK_POLL: Duration = Duration::from_millis(250);

/// Where an interaction arrived: the service's shared endpoint, or a connection's own.
#[derive(Debug, Clone, Copy)]
pub enum InteractionEndpoint<'a> {
    Service,
    Connection(&'a str),
}

/// Who acts, where: the connection's owner in its server, for a member.
#[derive(Debug, Clone)]
struct Context {
    owner: Principal,
    guild_id: String,
    allowed_roles: Vec<String>,
}

impl Core {
    /// Verifies and answers one interaction, in the service's words (the Discord adapter writes
    /// them in its wire format: [`crate::discord::interaction::wire`]). A bad or stale
    /// signature is `Unauthorized`, before anything is read.
    pub async fn interaction(
        &self,
        endpoint: InteractionEndpoint<'_>,
        signature: Option<&str>,
        timestamp: Option<&str>,
        body: &[u8],
    ) -> Result<Reply> {
        let (key, connection) = self.interaction_key(endpoint).await?;
        let skew = self.counters().skew.seconds().unwrap_or(0.0);
        let judged_at = chrono::Utc::now().timestamp() - skew.round() as i64;
        key.verify(signature, timestamp, body, judged_at).map_err(|error| {
            tracing::info!(%error, "interaction refused");
            bad_signature()
        })?;
        let interaction: Interaction = serde_json::from_slice(body).map_err(|error| {
            ValidationErrors::single("body", format!("is not a Discord interaction: {error}"))
        })?;
        let request = interaction.request();
        if request == Request::Ping {
            return Ok(Reply::Pong);
        }
        let guild_id = interaction.guild_id.clone().unwrap_or_default();
        let connection = match connection {
            Some(record) => Some(record).filter(|r| r.connection.guild_id == guild_id),
            None => self.store().service_connection(&guild_id).await?,
        };
        let Some(connection) = connection else {
            return Ok(Reply::private("This server is not connected to the agents service."));
        };
        let member = interaction.member.clone();
        let Some(member) = member else {
            return Ok(Reply::private("Commands work in a server's channels only."));
        };
        let allowed_roles = connection.connection.allowed_role_ids;
        // Discord's changers act as members of the workspace, everyone else as viewers.
        let role = if member.may_change(&allowed_roles) { Role::Member } else { Role::Viewer };
        let context = Context {
            owner: Principal {
                workspace: WorkspaceId::from_trusted(connection.owner_id),
                role,
                actor: Actor::Discord { id: member.user.id.clone(), name: member.display_name() },
                address: None,
            },
            guild_id,
            allowed_roles,
        };
        let changes = match &request {
            Request::Command(command) => command.changes(),
            Request::Decide { .. } | Request::Cancel { .. } => true,
            _ => false,
        };
        if changes && !member.may_change(&context.allowed_roles) {
            return Ok(Reply::private(
                "You need the Manage Server permission, or a role the agents' owner allowed \
                 (`agentctl chat roles`), to do this.",
            ));
        }
        match request {
            Request::Autocomplete { partial } => self.complete_agent(&context, &partial).await,
            Request::Command(command) => {
                if !self.store().claim_interaction(&interaction.id, now()).await? {
                    return Ok(Reply::private("This command was handled already."));
                }
                Ok(self.answer_in_time(interaction, context, member, command).await)
            }
            Request::Decide { decision, approval_id } => {
                if !self.store().claim_interaction(&interaction.id, now()).await? {
                    return Ok(Reply::private("This click was handled already."));
                }
                self.decide_by_button(&context, &member, decision, &approval_id).await
            }
            Request::Cancel { task_id } => {
                if !self.store().claim_interaction(&interaction.id, now()).await? {
                    return Ok(Reply::private("This click was handled already."));
                }
                self.cancel_by_button(&context, &member, &task_id).await
            }
            Request::Ping | Request::Unknown => {
                Ok(Reply::private("This command is not known here (any more)."))
            }
        }
    }

    /// The public key to verify with, and the connection when the endpoint is its own.
    async fn interaction_key(
        &self,
        endpoint: InteractionEndpoint<'_>,
    ) -> Result<(PublicKey, Option<ConnectionRecord>)> {
        match endpoint {
            InteractionEndpoint::Service => {
                let key = self.inner.discord_config.public_key.as_deref().ok_or_else(|| {
                    Error::NotConfigured(
                        "Discord interactions need the setting discord.public_key.".into(),
                    )
                })?;
                let key = PublicKey::parse(key).map_err(|_| {
                    Error::NotConfigured("discord.public_key is not a valid key.".into())
                })?;
                Ok((key, None))
            }
            InteractionEndpoint::Connection(id) => {
                // Connection ids are UUIDs: anything else names no connection (and is not sent
                // to the database).
                uuid::Uuid::parse_str(id).map_err(|_| bad_signature())?;
                let record = self.store().connection_by_id(id).await?.ok_or_else(bad_signature)?;
                let key = record.connection.public_key.as_deref().ok_or_else(bad_signature)?;
                let key = PublicKey::parse(key).map_err(|_| bad_signature())?;
                Ok((key, Some(record)))
            }
        }
    }

    /// Runs the command; past [`ANSWER_WITHIN`] answers "thinking" and finishes the answer
    /// through the interaction's webhook when the command is done.
    async fn answer_in_time(
        &self,
        interaction: Interaction,
        context: Context,
        member: Member,
        command: Command,
    ) -> Reply {
        let core = self.clone();
        let ephemeral = !matches!(command, Command::Ask { .. } | Command::Agents);
        let mut running =
            tokio::spawn(async move { core.run_command(&context, &member, command).await });
        let answer = tokio::select! {
            answered = &mut running => answered,
            () = tokio::time::sleep(ANSWER_WITHIN) => {
                let core = self.clone();
                tokio::spawn(async move {
                    let text = match tokio::time::timeout(FINISH_WITHIN, running).await {
                        Ok(Ok(text)) => text,
                        _ => "This took too long; see the agent's channel for the outcome.".into(),
                    };
                    let body = message_data(&text, false);
                    let discord = &core.inner.discord;
                    if let Err(error) = discord.edit_original(&interaction.application_id, &interaction.token, &body).await {
                        tracing::warn!(%error, "cannot finish a deferred interaction");
                    }
                });
                return Reply::Deferred { ephemeral };
            }
        };
        let text = answer.unwrap_or_else(|_| "Something went wrong; try again.".into());
        Reply::Message { content: text, ephemeral }
    }

    /// A command's answer, in words; a refusal is its reason.
    async fn run_command(&self, context: &Context, member: &Member, command: Command) -> String {
        let label = command.label();
        let answered = match command {
            Command::Agents => {
                self.agents_of_guild(context).await.map(|agents| (list(&agents), None))
            }
            Command::TaskAdd { agent, title, description, priority } => {
                self.command_add_task(context, &agent, &title, description.as_deref(), priority)
                    .await
            }
            Command::Agent { action, agent } => self.command_status(context, action, &agent).await,
            Command::Ask { agent, prompt } => self.command_ask(context, &agent, &prompt).await,
        };
        if label != "/agents"
            && let Some(agent) = answered.as_ref().ok().and_then(|(_, a)| a.clone())
        {
            let entry = crate::domain::activity::NewActivity::new(
                crate::domain::activity::Action::CommandUsed,
                format!("{label} by {} in Discord.", member.display_name()),
            );
            if let Err(error) =
                self.store().log_activity(&context.owner.workspace, &agent, &entry).await
            {
                tracing::warn!(%error, "cannot log a command");
            }
        }
        match answered {
            Ok((text, _)) => text,
            Err(error) => error.public_message(),
        }
    }

    /// The owner's agents mapped to a channel of the server.
    async fn agents_of_guild(&self, context: &Context) -> Result<Vec<AgentSummary>> {
        let mapped: Vec<AgentId> = self
            .store()
            .mappings(&context.owner.workspace)
            .await?
            .into_iter()
            .filter(|m| m.guild_id == context.guild_id)
            .map(|m| m.agent_id)
            .collect();
        let agents = self.list_agents(&context.owner, &Default::default()).await?;
        Ok(agents.into_iter().filter(|a| mapped.contains(&a.id)).collect())
    }

    /// The agent named in a command, if it is one of the server's.
    async fn guild_agent(&self, context: &Context, name: &str) -> Result<AgentId> {
        let agents = self.agents_of_guild(context).await?;
        agents
            .into_iter()
            .map(|a| a.id)
            .find(|id| id.as_str() == name.trim())
            .ok_or_else(|| Error::not_found(crate::error::Resource::Agent, name.trim()))
    }

    async fn complete_agent(&self, context: &Context, partial: &str) -> Result<Reply> {
        let partial = partial.trim().to_lowercase();
        let names: Vec<(String, String)> = self
            .agents_of_guild(context)
            .await?
            .into_iter()
            .filter(|a| {
                a.id.as_str().starts_with(&partial) || a.name.to_lowercase().contains(&partial)
            })
            .map(|a| (format!("{} ({})", a.id, a.status), a.id.to_string()))
            .collect();
        Ok(Reply::Choices(names))
    }

    async fn command_add_task(
        &self,
        context: &Context,
        agent: &str,
        title: &str,
        description: Option<&str>,
        priority: Option<i64>,
    ) -> Result<(String, Option<AgentId>)> {
        let agent = self.guild_agent(context, agent).await?;
        let mut e = ValidationErrors::new();
        let title = e.check("title", TaskTitle::parse(title));
        let description =
            description.and_then(|d| e.check("description", TaskDescription::parse(d)));
        let priority = e.check("priority", Priority::parse(priority.unwrap_or(0)));
        let (Some(title), Some(priority)) = (title, priority) else { return Err(e.into()) };
        if !e.is_empty() {
            return Err(e.into());
        }
        let task =
            self.add_task(&context.owner, &agent, NewTask { title, description, priority }).await?;
        Ok((
            format!("Added \"{}\" to {agent}'s backlog (task `{}`).", task.title, task.id),
            Some(agent),
        ))
    }

    async fn command_status(
        &self,
        context: &Context,
        action: AgentAction,
        agent: &str,
    ) -> Result<(String, Option<AgentId>)> {
        let agent = self.guild_agent(context, agent).await?;
        let changed = match action {
            AgentAction::Start => self.start_agent(&context.owner, &agent).await?,
            AgentAction::Stop => self.stop_agent(&context.owner, &agent).await?,
            AgentAction::Vacation => self.set_vacation(&context.owner, &agent, Some(true)).await?,
        };
        Ok((format!("{agent} is {} now.", changed.status), Some(agent)))
    }

    /// Queues the prompt as a top-priority task and waits for it, up to the interaction's
    /// lifetime; an agent that is not active only gets the task.
    async fn command_ask(
        &self,
        context: &Context,
        agent: &str,
        prompt: &str,
    ) -> Result<(String, Option<AgentId>)> {
        let agent = self.guild_agent(context, agent).await?;
        let title: String =
            prompt.trim().lines().next().unwrap_or_default().chars().take(80).collect();
        let refused = |message: String| Error::from(ValidationErrors::single("prompt", message));
        let new = NewTask {
            title: TaskTitle::parse(&title).map_err(refused)?,
            description: Some(TaskDescription::parse(prompt).map_err(refused)?),
            priority: Priority::parse(i64::from(i32::MAX)).map_err(Error::internal)?,
        };
        let task = self.add_task(&context.owner, &agent, new).await?;
        let detail = self.store().agent(&context.owner.workspace, &agent).await?;
        if detail.status != crate::domain::agent::AgentStatus::Active {
            let text = format!(
                "Queued for {agent}, which is {} (start it with `/agent start`); its answer will \
                 be posted in its channel.",
                detail.status
            );
            return Ok((text, Some(agent)));
        }
        let deadline = tokio::time::Instant::now() + FINISH_WITHIN;
        loop {
            let current = self.store().task(&context.owner.workspace, &agent, &task.id).await?;
            match current.status {
                TaskStatus::Complete => {
                    let result = current.result.unwrap_or_else(|| "(no answer)".into());
                    return Ok((format!("**{agent}:** {result}"), Some(agent)));
                }
                TaskStatus::Failed => {
                    let error = current.error.unwrap_or_default();
                    return Ok((format!("{agent} could not answer: {error}"), Some(agent)));
                }
                _ if tokio::time::Instant::now() >= deadline => {
                    let text = format!(
                        "{agent} is still working on it; the answer will be posted in its channel."
                    );
                    return Ok((text, Some(agent)));
                }
                _ => tokio::time::sleep(ASK_POLL).await,
            }
        }
    }

    /// A click on Approve or Deny: decides, and answers with the message updated to say who.
    async fn decide_by_button(
        &self,
        context: &Context,
        member: &Member,
        decision: Decision,
        approval_id: &str,
    ) -> Result<Reply> {
        match self.store().approval(approval_id).await? {
            Some((owner, _)) if owner == context.owner.workspace => {}
            _ => return Ok(Reply::private("This approval is not known here.")),
        }
        let decider = Decider::Member(member.display_name());
        let which = ApprovalRef::Id(approval_id);
        match self.store().decide_approval(which, decision, &decider, now()).await {
            Ok(decided) => {
                // The clicked message is replaced by the answer itself.
                self.after_decision(&decided, false).await;
                let action = match decision {
                    Decision::Approve => "approval.approved",
                    Decision::Deny => "approval.denied",
                };
                let after = serde_json::to_value(&decided.approval).ok();
                let target = ("approval", decided.approval.id.as_str());
                self.record(&context.owner, action, target, None, after).await;
                Ok(Reply::Update(decided_body(&decided.approval)))
            }
            Err(error @ Error::Conflict { .. }) => Ok(Reply::private(error.public_message())),
            Err(error) => Err(error),
        }
    }

    /// A click on a "Working on" post's Cancel: cancels the task as `discord:<member>` and
    /// answers with the post updated to say who, without its button; a task that ended first
    /// gets an answer only the member sees, saying how it ended.
    async fn cancel_by_button(
        &self,
        context: &Context,
        member: &Member,
        task_id: &str,
    ) -> Result<Reply> {
        let Some((agent, id)) = self.guild_task(context, task_id).await? else {
            return Ok(Reply::private("This task is not known here."));
        };
        let owner = &context.owner.workspace;
        let name = member.display_name();
        match self.cancel_task_as(owner, &agent, &id, &format!("discord:{name}")).await {
            Ok(task) => {
                let target = format!("{agent}/{id}");
                let after = serde_json::json!({"title": task.title, "status": task.status});
                let target = ("task", target.as_str());
                self.record(&context.owner, "task.cancelled", target, None, Some(after)).await;
                Ok(Reply::Update(started_cancelled_body(&task.title, &name)))
            }
            Err(Error::Conflict { .. }) => {
                let task = self.store().task(owner, &agent, &id).await?;
                Ok(Reply::private(nothing_to_cancel(&task)))
            }
            Err(Error::NotFound { .. }) => Ok(Reply::private("This task is not known here.")),
            Err(error) => Err(error),
        }
    }

    /// The agent of the task `task_id`, and the task's id, when the agent is one of the owner's
    /// mapped to a channel of the server.
    async fn guild_task(
        &self,
        context: &Context,
        task_id: &str,
    ) -> Result<Option<(AgentId, TaskId)>> {
        let Ok(id) = TaskId::parse(task_id) else { return Ok(None) };
        let owner = &context.owner.workspace;
        let mappings = self.store().mappings(owner).await?;
        let mut agents: Vec<AgentId> = mappings
            .into_iter()
            .filter(|m| m.guild_id == context.guild_id)
            .map(|m| m.agent_id)
            .collect();
        agents.sort();
        agents.dedup();
        for agent in agents {
            match self.store().task(owner, &agent, &id).await {
                Ok(_) => return Ok(Some((agent, id))),
                Err(Error::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(None)
    }
}

/// Every refused interaction looks the same, whatever was wrong: the signature, its time, or
/// the endpoint (an unknown connection reveals nothing).
fn bad_signature() -> Error {
    Error::refused(
        crate::error::Refusal::InvalidInteractionSignature,
        "The interaction's signature is missing, does not match, or is older than five minutes.",
    )
}

/// `/agents`: each agent with its status and queue.
fn list(agents: &[AgentSummary]) -> String {
    if agents.is_empty() {
        return "No agent posts in this server yet.".into();
    }
    let lines: Vec<String> = agents
        .iter()
        .map(|a| {
            let b = &a.backlog_summary;
            let waiting = if b.awaiting_approval > 0 {
                format!(", {} awaiting approval", b.awaiting_approval)
            } else {
                String::new()
            };
            format!(
                "**{}** ({}): {}, {} queued, {} in progress{waiting}, {} done, {} failed",
                a.id, a.name, a.status, b.queued, b.in_progress, b.complete, b.failed
            )
        })
        .collect();
    lines.join("\n")
}
