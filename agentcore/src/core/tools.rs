//! What agents act with: the built-in tools, each agent's memory block, the steps of a task's
//! run, and the Discord channel reads of `read_channel`.

use super::{Core, Principal};
use crate::domain::agent::AgentId;
use crate::domain::steps::Step;
use crate::domain::task::TaskId;
use crate::domain::tool_result::{ToolError, ToolResult};
use crate::domain::tools::{Memory, MemoryText, ToolInfo};
use crate::domain::workspace::Need;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Error, Result};
use crate::tools::builtin;

impl Core {
    /// Every built-in tool with its description and argument schema.
    pub fn tools(&self) -> Vec<ToolInfo> {
        builtin::catalog()
    }

    /// The agent's memory block.
    pub async fn memory(&self, who: &Principal, agent: &AgentId) -> Result<Memory> {
        let memory = self.store().memory(&who.workspace, agent).await?;
        Ok(Memory::new(agent.clone(), memory))
    }

    /// Replaces the agent's memory block (empty clears it).
    pub async fn set_memory(
        &self,
        who: &Principal,
        agent: &AgentId,
        memory: &MemoryText,
    ) -> Result<Memory> {
        who.require(Need::Work)?;
        let memory = self.store().set_memory(&who.workspace, agent, memory).await?;
        Ok(Memory::new(agent.clone(), memory))
    }

    /// The steps of a task's run, oldest first.
    pub async fn steps(
        &self,
        who: &Principal,
        agent: &AgentId,
        task: &TaskId,
    ) -> Result<Vec<Step>> {
        self.store().steps(&who.workspace, agent, task).await
    }

    /// `read_channel`: the last `limit` messages of the agent's mapped channel over Discord
    /// REST, newest first, one `author: text` line each; or the error the model is told.
    pub(crate) async fn read_channel(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        limit: u8,
    ) -> ToolResult {
        let unreadable = |e: Error| {
            ToolError::Failed(format!("could not read the channel: {}", e.public_message()))
        };
        let mapping = self
            .store()
            .mappings(owner)
            .await
            .map_err(unreadable)?
            .into_iter()
            .find(|m| m.agent_id == *agent)
            .ok_or_else(|| ToolError::refused("this agent has no Discord channel mapped"))?;
        let record = self.store().connection(owner, &mapping.guild_id).await.map_err(unreadable)?;
        let token = self.token_of(owner.as_str(), &record).map_err(unreadable)?;
        let messages = self
            .discord()
            .channel_messages(&token, &mapping.channel_id, limit)
            .await
            .map_err(|e| ToolError::Failed(format!("Discord refused the read: {e}")))?;
        if messages.is_empty() {
            return Ok(format!("#{} has no messages.", mapping.channel_name));
        }
        let lines: Vec<String> = messages
            .into_iter()
            .map(|m| format!("{}: {}", m.author.username, m.content.replace('\n', " ")))
            .collect();
        Ok(format!(
            "Latest messages of #{}, newest first:\n{}",
            mapping.channel_name,
            lines.join("\n")
        ))
    }
}
