//! The tool calls of a model step, each run (once approved, when it needs approval) and
//! stored as a step with its effect, and their results put in the conversation.

use std::time::Instant;

use tracing::Instrument as _;

use super::super::approval::Gate;
use super::super::offer::offered;
use super::super::tools::{self, Work};
use super::super::trace;
use super::{Halt, Run, State, millis};
use crate::domain::approval::needs_approval;
use crate::domain::steps::{Effect, Step, StepCall, StepKind, Stop};
use crate::domain::tool_result::{ToolError, ToolResult};
use crate::domain::workspace::WorkspaceId;
use crate::models::Message;
use crate::store::RunRef;

impl Run<'_> {
    /// [`State::Calling`]: each call gets its result, then the run goes on unless a limit
    /// stops it.
    pub(super) async fn call_all(
        &mut self,
        calls: Vec<StepCall>,
        mut stop: Option<Stop>,
    ) -> Result<State, Halt> {
        for call in calls {
            if stop.is_none() && self.guard.repeats(&call) {
                stop = Some(Stop::LoopDetected);
            }
            let span = trace::tool_span(&call, self.node.config.trace_content);
            match stop {
                Some(stop) => {
                    self.record_tool(&call, Err(ToolError::NotRun(stop)), 0, None)
                        .instrument(span)
                        .await?
                }
                None => self.call_tool(&call).instrument(span).await?,
            }
        }
        let max_steps = self.claimed.agent.max_steps;
        let stop = stop
            .or_else(|| (self.counts.model_calls >= max_steps).then_some(Stop::MaxSteps(max_steps)))
            .or_else(|| (Instant::now() >= self.deadline).then(|| self.timeout()));
        Ok(stop.map_or(State::Compacting, State::Summarising))
    }

    /// Runs one tool call and stores it as a step (with its effect, in one transaction); a
    /// call that needs approval runs only once approved (see [`super::super::approval`]).
    async fn call_tool(&mut self, call: &StepCall) -> Result<(), Halt> {
        if needs_approval(&self.claimed.agent.approval_tools, &call.name) {
            let run =
                RunRef { agent: self.agent, task: &self.claimed.task.id, node: self.node.id() };
            match super::super::approval::gate(self.node, run, self.claimed, call, &mut self.asked)
                .await
            {
                Gate::Run => {}
                Gate::Denied(error) => return self.record_tool(call, Err(error), 0, None).await,
                Gate::Parked => return Err(Halt::Parked),
                Gate::Lost => return Err(Halt::LeaseLost),
                Gate::Interrupted => return Err(Halt::Interrupted),
            }
        }
        self.started(StepKind::Tool, Some(&call.name));
        let started = Instant::now();
        if let Some(server) = self.mcp.server_to_list_again(&call.name, &self.claimed.agent) {
            // The model is offered the new list from its next call on.
            let kind = self.model.kind;
            let offer = offered(self.node, self.agent, self.claimed, kind, Some(&server)).await;
            self.mcp.relisted(offer.mcp);
            self.model.request.tools = offer.tools;
        }
        let own = &self.claimed.task.agent_id;
        let owner = WorkspaceId::from_trusted(self.agent.owner_id.clone());
        let result = match tools::work(call, own, &self.claimed.agent, &self.mcp) {
            Work::Refused(error) => Err(error),
            Work::Effect(effect) => {
                return self
                    .record_tool(call, Ok(String::new()), millis(started), Some(effect))
                    .await;
            }
            Work::ReadMemory => {
                let task = &self.claimed.task.id;
                match tools::read_memory(self.node, task, &owner, own).await {
                    Some(result) => result,
                    None => return Err(Halt::Interrupted),
                }
            }
            Work::Remote(remote) => {
                self.store_asked().await?;
                let deadline = self.deadline;
                tools::run_remote(self.node, &owner, own, remote, &call.arguments, deadline).await
            }
        };
        self.record_tool(call, result, millis(started), None).await
    }

    pub(super) async fn record_tool(
        &mut self,
        call: &StepCall,
        result: ToolResult,
        ms: i64,
        effect: Option<Effect>,
    ) -> Result<(), Halt> {
        trace::tool_done(&tracing::Span::current(), &result, self.node.config.trace_content);
        let step = Step::tool(self.next_seq(), call, result, ms);
        let stored = self.store(&step, effect.as_ref()).await?;
        self.counts.tool_calls += 1;
        self.push_result(&stored);
        Ok(())
    }

    pub(super) fn push_result(&mut self, step: &Step) {
        let (content, is_error) = step.result_for_model().into_parts();
        let call_id = step.call_id.clone().unwrap_or_default();
        self.model.request.messages.push(Message::ToolResult { call_id, content, is_error });
    }
}
