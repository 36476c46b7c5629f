//! Triggers: URLs other systems call, with a Standard Webhooks signature, to queue a task on
//! an agent. Managing them is the work of members (`Need::Work`, as tasks and schedules are);
//! a call (`call_trigger`) carries no token: its signature over the exact body, with the
//! trigger's secret, is its only credential.

use std::sync::Mutex;

use secrecy::ExposeSecret;
use serde_json::Value;

use super::backlog::task_added;
use super::{Core, Principal};
use crate::api::TriggerList;
use crate::domain::activity::{Action, NewActivity};
use crate::domain::agent::{AgentId, AgentStatus};
use crate::domain::task::Task;
use crate::domain::trigger::{
    CreatedTrigger, HookAccepted, NewTrigger, ROTATION_OVERLAP_HOURS, RotatedSecret,
    TRIGGERS_PER_WORKSPACE, Trigger, TriggerId, TriggerPatch, TriggerRecord,
};
use crate::domain::workspace::{Need, WorkspaceId};
use crate::error::{Error, Refusal, Resource, Result, ValidationErrors};
use crate::standard_webhooks::{self, Received, SigningKey};
use crate::store::CallOutcome;
use crate::telemetry::HookOutcome;

impl Core {
    /// Adds a trigger to one of the workspace's agents, with a new secret shown only now.
    pub async fn add_trigger(&self, who: &Principal, new: NewTrigger) -> Result<CreatedTrigger> {
        who.require(Need::Work)?;
        let record = TriggerRecord::create(new, crate::domain::now());
        let (_, secret) = SigningKey::generate().map_err(|e| Error::internal(e.to_string()))?;
        let sealed = self
            .secrets()
            .seal(secret.expose_secret(), &seal_context(&who.workspace, &record.id))?;
        self.store()
            .insert_trigger(&who.workspace, &record, &sealed, TRIGGERS_PER_WORKSPACE)
            .await?;
        let trigger = self.public_trigger(&record);
        let after = serde_json::to_value(&trigger).ok();
        self.record(who, "trigger.created", ("trigger", record.id.as_str()), None, after).await;
        tracing::info!(workspace = %who.workspace, agent_id = %record.agent_id, trigger = %record.id, "trigger added");
        Ok(CreatedTrigger { trigger, secret: secret.expose_secret().to_owned() })
    }

    /// The workspace's triggers (of one agent, when given), oldest first.
    pub async fn triggers(&self, who: &Principal, agent: Option<&AgentId>) -> Result<TriggerList> {
        let records = self.store().triggers(&who.workspace, agent).await?;
        let origin = self.public_origin();
        let triggers = records.iter().map(|r| r.public(origin.as_deref())).collect();
        Ok(TriggerList { triggers })
    }

    pub async fn trigger(&self, who: &Principal, id: &TriggerId) -> Result<Trigger> {
        Ok(self.public_trigger(&self.store().trigger(&who.workspace, id).await?))
    }

    pub async fn update_trigger(
        &self,
        who: &Principal,
        id: &TriggerId,
        patch: TriggerPatch,
    ) -> Result<Trigger> {
        who.require(Need::Work)?;
        let now = crate::domain::now();
        let was = Mutex::new(None);
        let updated = self
            .store()
            .update_trigger(&who.workspace, id, &|current| {
                *crate::sync::lock(&was) = Some(self.public_trigger(current));
                Ok(current.patched(&patch, now))
            })
            .await?;
        let trigger = self.public_trigger(&updated);
        let was = was.into_inner().ok().flatten().and_then(|t| serde_json::to_value(t).ok());
        let is = serde_json::to_value(&trigger).ok();
        self.record(who, "trigger.updated", ("trigger", id.as_str()), was, is).await;
        Ok(trigger)
    }

    pub async fn delete_trigger(&self, who: &Principal, id: &TriggerId) -> Result<()> {
        who.require(Need::Work)?;
        let was = self.store().delete_trigger(&who.workspace, id).await?;
        let was = serde_json::to_value(self.public_trigger(&was)).ok();
        self.record(who, "trigger.deleted", ("trigger", id.as_str()), was, None).await;
        Ok(())
    }

    /// Gives the trigger a new secret, shown only now. The one it replaces stays valid for
    /// 24 hours (a secret replaced before is forgotten at once), so a sender can move over.
    pub async fn rotate_trigger_secret(
        &self,
        who: &Principal,
        id: &TriggerId,
    ) -> Result<RotatedSecret> {
        who.require(Need::Work)?;
        let (_, secret) = SigningKey::generate().map_err(|e| Error::internal(e.to_string()))?;
        let sealed =
            self.secrets().seal(secret.expose_secret(), &seal_context(&who.workspace, id))?;
        let overlap = ROTATION_OVERLAP_HOURS * 3600;
        let until =
            self.store().rotate_trigger_secret(&who.workspace, id, &sealed, overlap).await?;
        let after = serde_json::json!({ "previous_valid_until": until });
        self.record(who, "trigger.secret_rotated", ("trigger", id.as_str()), None, Some(after))
            .await;
        Ok(RotatedSecret { secret: secret.expose_secret().to_owned(), previous_valid_until: until })
    }

    /// A call to a trigger: `id` as in its URL, the Standard Webhooks headers and the body as
    /// received. Checked in this order, each refusal writing nothing: the trigger exists
    /// (`trigger_not_found`), the signature matches one of its secrets with a timestamp
    /// within 300 s of the database's clock either way (`invalid_signature`), the body is a
    /// JSON object (`validation_failed`, field `body`); then, under the trigger's lock, a
    /// `webhook-id` it accepted before gets that call's task back (`duplicate`), a disabled
    /// trigger is `trigger_disabled`, and the per-minute bound and the backlog's quotas
    /// apply (`quota_exceeded`). An accepted call queues one task with its `task_added` and
    /// `trigger_called` entries.
    pub async fn call_trigger(
        &self,
        id: &str,
        received: Received<'_>,
        body: &[u8],
    ) -> Result<HookAccepted> {
        let outcome = self.checked_call(id, received, body).await;
        self.count_hook(match &outcome {
            Ok(HookAccepted { duplicate: false, .. }) => HookOutcome::Accepted,
            Ok(HookAccepted { duplicate: true, .. }) => HookOutcome::Duplicate,
            Err(error) => refusal(error),
        });
        outcome
    }

    /// Counts a call refused before it reached [`Core::call_trigger`] (a body over the bound).
    pub fn count_hook(&self, outcome: HookOutcome) {
        self.counters().hooks.count(outcome);
    }

    async fn checked_call(
        &self,
        id: &str,
        received: Received<'_>,
        body: &[u8],
    ) -> Result<HookAccepted> {
        let missing = || Error::not_found(Resource::Trigger, id);
        let id = TriggerId::parse(id).map_err(|_| missing())?;
        let target = self.store().call_target(&id).await?.ok_or_else(missing)?;
        let keys = target
            .sealed
            .iter()
            .map(|sealed| {
                let secret = self.secrets().open(sealed, &seal_context(&target.owner, &id))?;
                SigningKey::from_secret(&secret).map_err(Error::internal)
            })
            .collect::<Result<Vec<_>>>()?;
        let verified = standard_webhooks::verify(&keys, received, body, target.now.timestamp())
            .map_err(|refused| {
                tracing::info!(trigger = %id, reason = %refused, "trigger call refused");
                Error::refused(
                    Refusal::InvalidHookSignature,
                    "The call's webhook-signature does not match its body with this trigger's \
                     secret, or its webhook-timestamp is more than 300 seconds away.",
                )
            })?;
        let body = match serde_json::from_slice::<Value>(body) {
            Ok(body @ Value::Object(_)) => body,
            _ => return Err(ValidationErrors::single("body", "must be a JSON object").into()),
        };
        let (owner, agent) = (target.owner, target.trigger.agent_id);
        // Read before the call's transaction, as for a task added through the API; handed
        // to it so that a repeated call is answered whatever the backlog holds.
        let room = Mutex::new(Some(self.check_queue_room(&owner, &agent).await));
        let make = |trigger: &TriggerRecord, now| -> Result<(Task, Vec<NewActivity>)> {
            crate::sync::lock(&room).take().unwrap_or(Ok(()))?;
            let task = Task::queued(&trigger.agent_id, trigger.task_for(&body), now);
            let called = NewActivity::for_task(
                Action::TriggerCalled,
                task.id.as_str(),
                format!(
                    "Trigger '{}' called (webhook-id {}); task '{}' added.",
                    trigger_label(trigger),
                    verified.id,
                    task.title
                ),
            );
            Ok((task.clone(), vec![task_added(&task), called]))
        };
        let outcome = self.store().record_call(&owner, &agent, &id, &verified.id, &make).await?;
        Ok(match outcome {
            CallOutcome::Accepted { task_id, agent_status } => {
                tracing::info!(workspace = %owner, agent_id = %agent, trigger = %id, task_id = %task_id, "trigger called");
                if agent_status == AgentStatus::Active {
                    self.wake_agent(&owner, &agent);
                } else {
                    self.ring_events(&owner);
                }
                HookAccepted { task_id, duplicate: false }
            }
            CallOutcome::Duplicate { task_id } => HookAccepted { task_id, duplicate: true },
        })
    }

    /// The trigger as callers see it, its URL absolute where the service knows its public
    /// origin (that of `discord.redirect_uri`).
    fn public_trigger(&self, record: &TriggerRecord) -> Trigger {
        record.public(self.public_origin().as_deref())
    }

    /// The service's public origin, that of `discord.redirect_uri`, when it is set (read once
    /// for a whole list).
    fn public_origin(&self) -> Option<String> {
        self.inner.discord_config.redirect_uri.as_deref().and_then(|uri| {
            let url = reqwest::Url::parse(uri).ok()?;
            let origin = url.origin();
            origin.is_tuple().then(|| origin.ascii_serialization())
        })
    }
}

/// Where a trigger's secret is sealed: a ciphertext copied to another row does not open.
fn seal_context(owner: &WorkspaceId, id: &TriggerId) -> String {
    format!("trigger/{owner}/{id}")
}

fn trigger_label(trigger: &TriggerRecord) -> &str {
    if trigger.name.as_str().is_empty() { trigger.id.as_str() } else { trigger.name.as_str() }
}

/// The metric outcome of a refused call.
fn refusal(error: &Error) -> HookOutcome {
    match error {
        Error::NotFound { .. } => HookOutcome::NotFound,
        Error::Refused { .. } => HookOutcome::InvalidSignature,
        Error::Validation(_) => HookOutcome::BadBody,
        Error::Conflict { .. } => HookOutcome::Disabled,
        Error::QuotaExceeded { .. } => HookOutcome::Limited,
        _ => HookOutcome::Failed,
    }
}
