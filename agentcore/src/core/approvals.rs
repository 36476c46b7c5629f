//! Tool approvals: the owner's decision through the API, a member's through a Discord button
//! (`interactions.rs`), and the timeout's; each requeues the task and edits the message that
//! asked.

use super::{Core, Principal};
use crate::domain::agent::AgentId;
use crate::domain::approval::{Approval, Decider, Decision, decided_body};
use crate::domain::now;
use crate::domain::task::TaskId;
use crate::domain::workspace::Need;
use crate::error::{Error, Result};
use crate::store::{ApprovalRef, Decided};

/// Expired approvals denied per look; the next look takes the rest.
const EXPIRE_BATCH: i64 = 100;

impl Core {
    /// Approves or denies the call the task waits on; the task goes back to the queue and
    /// its run goes on from that call. `not_awaiting_approval` when it waits for nothing.
    pub async fn decide_task(
        &self,
        who: &Principal,
        agent: &AgentId,
        task: &TaskId,
        decision: Decision,
    ) -> Result<Approval> {
        who.require(Need::Work)?;
        let which = ApprovalRef::OfTask { owner: &who.workspace, agent, task };
        let decided = self.store().decide_approval(which, decision, &Decider::Owner, now()).await?;
        self.after_decision(&decided, true).await;
        let action = match decision {
            Decision::Approve => "approval.approved",
            Decision::Deny => "approval.denied",
        };
        let after = serde_json::to_value(&decided.approval).ok();
        self.record(who, action, ("approval", &decided.approval.id), None, after).await;
        Ok(decided.approval)
    }

    /// Denies the approvals nobody answered in time; how many. Every node looks; an approval
    /// decided meanwhile (by a person, or another node's look) is left as decided.
    pub(crate) async fn expire_approvals(&self) -> Result<usize> {
        let mut denied = 0;
        for id in self.store().expired_approvals(EXPIRE_BATCH).await? {
            let which = ApprovalRef::Id(&id);
            match self
                .store()
                .decide_approval(which, Decision::Deny, &Decider::Timeout, now())
                .await
            {
                Ok(decided) => {
                    denied += 1;
                    self.after_decision(&decided, true).await;
                }
                Err(Error::Conflict { .. } | Error::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(denied)
    }

    /// Wakes the agent's worker on this node (other nodes hear the store's notification or
    /// poll), sends the rewritten post if it was still queued, and with `edit` replaces the
    /// delivered message's buttons with who decided. A failed edit is logged: the decision
    /// stands either way.
    pub(super) async fn after_decision(&self, decided: &Decided, edit: bool) {
        self.wake_agent(&decided.owner, &decided.approval.agent_id);
        self.wake_outbox();
        let Some((guild, channel, message)) = decided.message.as_ref().filter(|_| edit) else {
            return;
        };
        let owner = Principal::service(decided.owner.clone());
        let Ok(guild_id) = crate::domain::chat::GuildId::parse(guild) else { return };
        let token = match self.credentials(&owner, &guild_id).await {
            Ok((token, _)) => token,
            Err(error) => {
                tracing::warn!(%error, "cannot edit an approval's message: no connection");
                return;
            }
        };
        let body = decided_body(&decided.approval);
        if let Err(error) = self.inner.discord.edit_message(&token, channel, message, &body).await {
            tracing::warn!(%error, approval = %decided.approval.id, "cannot edit an approval's message");
        }
    }
}
