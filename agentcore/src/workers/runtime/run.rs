//! One task's run: model call, tool calls, model call... until the model answers without a
//! tool call or a limit stops it. Every model call and tool call is a step, stored fenced on
//! the task's lease; a run resumes from its stored steps after a crash, on whichever node claims
//! the task, so a finished model call is not paid for twice and an effect (stored with its step,
//! in one transaction) never happens twice.
//!
//! A model step is stored before its first tool runs when that tool waits on the outside world
//! (a fetch, a channel read); before a local tool (an effect, a memory read, a refused call) it
//! is stored in that tool step's transaction instead: nothing slow happens in between, so a
//! crash there costs the same one model call, and each such step saves a commit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Node;
use super::approval::Gate;
use super::model::call_model;
use super::offer::offered;
use crate::domain::approval::needs_approval;
use crate::domain::budget::StepCost;
use crate::domain::runtime::{AgentKey, ClaimedTask, Outcome};
use crate::domain::steps::{
    LoopGuard, Step, StepCall, StepKind, Stop, not_run, summary_request, system_prompt,
};
use crate::domain::tools::ToolName;
use crate::mcp::ServerRef;
use crate::models::{Message, ModelKind, ModelProvider, ToolCall, ToolChoice};
use crate::store::{RunContext, RunRef};
use crate::tools::builtin::{self, Prepared};

/// How a run ended.
#[allow(clippy::large_enum_variant, reason = "one per task, moved once")]
pub(super) enum Ran {
    /// Its outcome, its attempts at the model (1 plus the retries of failed calls, as the
    /// task's `attempts` counts them) and the answer that ended it, to be stored with the
    /// outcome.
    Finished(Outcome, i32, Option<Step>),
    /// It waits for a person's approval of a call: the task is parked, nothing more to write.
    Parked,
    /// The task's lease was lost: nothing more may be written.
    Lost,
}

/// Runs `claimed` to its end, resuming after its stored steps.
pub(super) async fn run_task(node: &Node, agent: &AgentKey, claimed: &ClaimedTask) -> Ran {
    let models = node.core.models();
    let kind = models.kind_of(claimed.agent.model.as_deref());
    // `echo` reads no prompt: the recent tasks would be a query for nothing.
    let recent = if kind == ModelKind::Echo { 0 } else { crate::domain::steps::RECENT_TASKS };
    let store = node.core.store();
    let task = &claimed.task;
    let context = match store.run_context(agent, &task.id, task.steps, recent).await {
        Ok(context) => context,
        Err(error) => {
            let error = format!("cannot read the task's steps: {}", error.public_message());
            return Ran::Finished(Outcome::Failed { error, permanent: false }, 0, None);
        }
    };
    let offer = offered(node, agent, claimed, kind, None).await;
    let names: Vec<&str> = offer.tools.iter().map(|t| t.name.as_str()).collect();
    let system = system_prompt(
        &claimed.agent.role_prompt,
        &claimed.agent.memory,
        &names,
        &offer.unavailable,
        &context.recent,
    );
    let (provider, mut request) =
        match models.resolve(claimed.agent.model.as_deref(), &system, &claimed.user_message()) {
            Ok(resolved) => resolved,
            Err(error) => {
                let failed = Outcome::Failed { error: error.to_string(), permanent: true };
                return Ran::Finished(failed, 0, None);
            }
        };
    request.tools = offer.tools;
    let mut run = Run {
        mcp: offer.mcp,
        listed_again: HashSet::new(),
        node,
        agent,
        claimed,
        provider,
        kind,
        request,
        guard: LoopGuard::default(),
        seq: 0,
        model_calls: 0,
        tool_calls: 0,
        retries: 0,
        last: None,
        asked: None,
        pending: Vec::new(),
        stop: None,
        deadline: Instant::now(),
    };
    if let Some(ended) = run.replay(context) {
        return Ran::Finished(ended, 1 + run.retries, None);
    }
    match run.go().await {
        Ok(outcome) => Ran::Finished(outcome, 1 + run.retries, run.last.take()),
        Err(Halt::Parked) => Ran::Parked,
        Err(Halt::LeaseLost) => Ran::Lost,
    }
}

/// Why a run stops with nothing more to write: the task's lease is lost (or its steps cannot
/// be stored, and the lease will run out), or the task is parked at a call waiting for a
/// person's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Halt {
    LeaseLost,
    Parked,
}

struct Run<'a> {
    node: &'a Node,
    /// The MCP tools offered, by the name the model calls them.
    mcp: HashMap<String, (ServerRef, String)>,
    /// The servers listed again in this run for a tool name they lacked.
    listed_again: HashSet<String>,
    agent: &'a AgentKey,
    claimed: &'a ClaimedTask,
    provider: Arc<dyn ModelProvider>,
    kind: ModelKind<'a>,
    request: crate::models::CompletionRequest,
    guard: LoopGuard,
    /// The last stored step's number.
    seq: i32,
    model_calls: i32,
    tool_calls: i32,
    /// Retries of failed model calls in this run.
    retries: i32,
    /// The answer that completed the run: stored with the outcome, in one transaction.
    last: Option<Step>,
    /// The model step whose calls are pending, until it is stored (with the first of them,
    /// when that one is local).
    asked: Option<Step>,
    /// Calls of the last model answer that have no result yet.
    pending: Vec<StepCall>,
    stop: Option<Stop>,
    deadline: Instant,
}

impl Run<'_> {
    /// Rebuilds the conversation from the stored steps; the outcome when the run had already
    /// ended (its summary was stored before the crash).
    fn replay(&mut self, context: RunContext) -> Option<Outcome> {
        let mut spent = Duration::ZERO;
        for step in context.steps {
            self.seq = step.seq;
            spent += Duration::from_millis(u64::try_from(step.duration_ms).unwrap_or(0));
            match step.kind {
                StepKind::Model => {
                    self.model_calls += 1;
                    self.pending = step.tool_calls.clone();
                    self.request.messages.push(Message::Assistant {
                        text: step.output.clone().unwrap_or_default(),
                        tool_calls: step.tool_calls.iter().map(to_call).collect(),
                    });
                }
                StepKind::Tool => {
                    self.pending.retain(|c| Some(&c.id) != step.call_id.as_ref());
                    if let Some(call) = as_call(&step) {
                        self.tool_calls += 1;
                        if self.guard.repeats(&call) {
                            self.stop = Some(Stop::LoopDetected);
                        }
                    }
                    self.push_result(&step);
                }
                StepKind::Summary => {
                    let reason = step.error.clone().unwrap_or_default();
                    let summary = step.output.clone().unwrap_or_default();
                    return Some(Outcome::Stopped { reason, summary });
                }
            }
        }
        let limit = self.node.config.task_timeout;
        self.deadline = Instant::now() + limit.saturating_sub(spent);
        None
    }

    async fn go(&mut self) -> Result<Outcome, Halt> {
        loop {
            for call in std::mem::take(&mut self.pending) {
                if self.stop.is_none() && self.guard.repeats(&call) {
                    self.stop = Some(Stop::LoopDetected);
                }
                match self.stop {
                    Some(stop) => self.record_tool(&call, Err(not_run(stop)), 0, None).await?,
                    None => self.call_tool(&call).await?,
                }
            }
            if self.stop.is_none() && self.model_calls >= self.claimed.agent.max_steps {
                self.stop = Some(Stop::MaxSteps(self.claimed.agent.max_steps));
            }
            if self.stop.is_none() && Instant::now() >= self.deadline {
                self.stop = Some(self.timeout());
            }
            if let Some(stop) = self.stop {
                return self.summarise(stop).await;
            }
            let started = Instant::now();
            let remaining = self.deadline.saturating_duration_since(started);
            let answer = match tokio::time::timeout(remaining, self.ask()).await {
                Err(_) => {
                    self.stop = Some(self.timeout());
                    continue;
                }
                Ok(Err(outcome)) => return Ok(outcome),
                Ok(Ok(answer)) => answer,
            };
            let (answer, cost) = answer;
            let calls: Vec<StepCall> = answer.tool_calls.iter().map(from_call).collect();
            let mut step = Step::model(
                self.next_seq(),
                answer.text.clone(),
                calls.clone(),
                answer.usage,
                millis(started),
            );
            step.cost = cost;
            if calls.is_empty() {
                // Stored with the outcome: one transaction fewer for every task.
                self.last = Some(step);
                return Ok(Outcome::Complete { text: answer.text, tool_calls: self.tool_calls });
            }
            self.asked = Some(step);
            self.model_calls += 1;
            self.request.messages.push(Message::Assistant {
                text: answer.text.clone(),
                tool_calls: answer.tool_calls,
            });
            self.pending = calls;
        }
    }

    /// One model call with the conversation so far, counting its retries; its cost is
    /// reserved before it is sent and settled when it answers (see [`super::spend`]).
    async fn ask(&mut self) -> Result<(crate::models::Completion, Option<StepCost>), Outcome> {
        let run = RunRef { agent: self.agent, task: &self.claimed.task.id, node: self.node.id() };
        let model = self.claimed.agent.model.as_deref();
        let reserved =
            super::spend::reserve(self.node, run, model, self.kind, &self.request).await?;
        let task = &self.claimed.task.id;
        let called =
            call_model(self.node, &*self.provider, self.kind.label(), &self.request, task).await;
        self.retries += (called.attempts - 1).max(0);
        let answer = called.answer?;
        let cost = match reserved {
            Some(reserved) => {
                Some(super::spend::settle(self.node, run, reserved, answer.usage).await)
            }
            None => None,
        };
        Ok((answer, cost))
    }

    /// The agent's server whose tool `name` would be (`<server>__<tool>`), if any; asked once
    /// per server and run, so a model inventing names does not make each call list again.
    fn server_of_unknown_tool(&mut self, name: &str) -> Option<String> {
        let (server, _) = name.split_once("__")?;
        let mine = self.claimed.agent.mcp_servers.iter().any(|s| s.as_str() == server);
        (mine && self.listed_again.insert(server.to_owned())).then(|| server.to_owned())
    }

    fn timeout(&self) -> Stop {
        Stop::Timeout(self.node.config.task_timeout.as_secs())
    }

    /// Runs one tool call and stores it as a step (with its effect, in one transaction); a
    /// call that needs approval runs only once approved (see [`super::approval`]).
    async fn call_tool(&mut self, call: &StepCall) -> Result<(), Halt> {
        if needs_approval(&self.claimed.agent.approval_tools, &call.name) {
            let run =
                RunRef { agent: self.agent, task: &self.claimed.task.id, node: self.node.id() };
            match super::approval::gate(self.node, run, self.claimed, call, &mut self.asked).await {
                Gate::Run => {}
                Gate::Denied(error) => return self.record_tool(call, Err(error), 0, None).await,
                Gate::Parked => return Err(Halt::Parked),
                Gate::Lost => return Err(Halt::LeaseLost),
            }
        }
        let started = Instant::now();
        let own = &self.claimed.task.agent_id;
        if !self.mcp.contains_key(&call.name)
            && let Some(server) = self.server_of_unknown_tool(&call.name)
        {
            // The server may have added the tool and said so in a `tools/list_changed` that
            // has not been handled yet: its tools are listed again before the name is called
            // unknown, and the model is offered the new list from its next call on.
            let offer =
                offered(self.node, self.agent, self.claimed, self.kind, Some(&server)).await;
            self.mcp = offer.mcp;
            self.request.tools = offer.tools;
        }
        if let Some((server, tool)) = self.mcp.get(&call.name).cloned() {
            self.store_asked().await?;
            let remaining = self.deadline.saturating_duration_since(started);
            let called = self.node.core.mcp().call(&server, &tool, &call.arguments);
            let result = tokio::time::timeout(remaining, called)
                .await
                .unwrap_or_else(|_| Err("timed out: the task's time ran out".into()));
            return self.record_tool(call, result, millis(started), None).await;
        }
        let prepared = match call.name.parse::<ToolName>() {
            Ok(tool) if self.claimed.agent.tools.contains(&tool) => {
                builtin::prepare(tool, own, &call.arguments)
            }
            Ok(tool) => Err(format!("refused: the tool '{tool}' is not enabled for this agent")),
            Err(_) => Err(format!("unknown tool '{}'", call.name)),
        };
        let owner = crate::domain::user::UserId::from_trusted(self.agent.owner_id.clone());
        let remaining = self.deadline.saturating_duration_since(started);
        let result = match prepared {
            Err(error) => Err(error),
            Ok(Prepared::Effect(effect)) => {
                return self
                    .record_tool(call, Ok(String::new()), millis(started), Some(effect))
                    .await;
            }
            Ok(Prepared::ReadMemory) => match self.node.core.store().memory(&owner, own).await {
                Ok(memory) if memory.is_empty() => Ok("Your memory is empty.".to_owned()),
                Ok(memory) => Ok(memory),
                Err(error) => Err(format!("could not read memory: {}", error.public_message())),
            },
            Ok(Prepared::Fetch(args)) => {
                self.store_asked().await?;
                let fetch = self.node.core.http_fetch().fetch(&args);
                tokio::time::timeout(remaining, fetch)
                    .await
                    .unwrap_or_else(|_| Err("timed out: the task's time ran out".into()))
            }
            Ok(Prepared::ReadChannel { limit }) => {
                self.store_asked().await?;
                self.node.core.read_channel(&owner, own, limit).await
            }
        };
        self.record_tool(call, result, millis(started), None).await
    }

    async fn record_tool(
        &mut self,
        call: &StepCall,
        result: Result<String, String>,
        ms: i64,
        effect: Option<crate::domain::steps::Effect>,
    ) -> Result<(), Halt> {
        let step = Step::tool(self.next_seq(), call, result, ms);
        let stored = self.store(&step, effect.as_ref()).await?;
        self.tool_calls += 1;
        self.push_result(&stored);
        Ok(())
    }

    /// After a stop: calls the model once more, without tools, for a summary of the work.
    async fn summarise(&mut self, stop: Stop) -> Result<Outcome, Halt> {
        self.request.messages.push(Message::User(summary_request(stop)));
        self.request.tool_choice = ToolChoice::None;
        let started = Instant::now();
        let answered = self.ask().await;
        let (summary, usage, cost) = match answered {
            Ok((answer, cost)) if !answer.text.trim().is_empty() => {
                (answer.text, answer.usage, cost)
            }
            Ok((answer, cost)) => ("(The model gave no summary.)".to_owned(), answer.usage, cost),
            Err(exhausted @ Outcome::BudgetExhausted { .. }) => return Ok(exhausted),
            Err(_) => (
                "(The summary could not be asked for: the model call failed.)".to_owned(),
                None,
                None,
            ),
        };
        let mut step =
            Step::model(self.next_seq(), summary.clone(), Vec::new(), usage, millis(started));
        step.kind = StepKind::Summary;
        step.cost = cost;
        step.error = Some(stop.to_string());
        self.store(&step, None).await?;
        Ok(Outcome::Stopped { reason: stop.to_string(), summary })
    }

    /// The number of the next step to store.
    fn next_seq(&self) -> i32 {
        self.seq + if self.asked.is_some() { 2 } else { 1 }
    }

    /// Stores the model step that asked for the pending calls, before a tool that waits on
    /// the outside world runs.
    async fn store_asked(&mut self) -> Result<(), Halt> {
        if let Some(asked) = self.asked.take() {
            self.store(&asked, None).await?;
        }
        Ok(())
    }

    /// Stores a step, after the model step that asked for it if that is not stored yet;
    /// [`Halt::LeaseLost`] when the lease is lost (or the store keeps failing), which ends the
    /// run without writing anything more.
    async fn store(
        &mut self,
        step: &Step,
        effect: Option<&crate::domain::steps::Effect>,
    ) -> Result<Step, Halt> {
        let run = RunRef { agent: self.agent, task: &self.claimed.task.id, node: self.node.id() };
        let asked = self.asked.take();
        for attempt in 1..=super::FINISH_TRIES {
            let store = self.node.core.store();
            match store.record_step(run, asked.as_ref(), step, effect).await {
                Ok(Some(stored)) => {
                    self.seq = stored.seq;
                    return Ok(stored);
                }
                Ok(None) => {
                    tracing::info!(task = %run.task, "run stopped: the task, its agent or its lease is gone");
                    return Err(Halt::LeaseLost);
                }
                Err(error) if attempt < super::FINISH_TRIES => {
                    tracing::warn!(%error, task = %run.task, "cannot store a step; retrying");
                    tokio::time::sleep(self.node.config.retry_base * attempt).await;
                }
                Err(error) => {
                    // The lease runs out and the run resumes from its last stored step.
                    tracing::error!(%error, task = %run.task, "cannot store a step");
                }
            }
        }
        Err(Halt::LeaseLost)
    }

    fn push_result(&mut self, step: &Step) {
        let (content, is_error) = step.result_for_model();
        let call_id = step.call_id.clone().unwrap_or_default();
        self.request.messages.push(Message::ToolResult { call_id, content, is_error });
    }
}

fn millis(since: Instant) -> i64 {
    i64::try_from(since.elapsed().as_millis()).unwrap_or(i64::MAX)
}

fn from_call(call: &ToolCall) -> StepCall {
    StepCall { id: call.id.clone(), name: call.name.clone(), arguments: call.arguments.clone() }
}

fn to_call(call: &StepCall) -> ToolCall {
    ToolCall { id: call.id.clone(), name: call.name.clone(), arguments: call.arguments.clone() }
}

/// The call a stored tool step answered.
fn as_call(step: &Step) -> Option<StepCall> {
    Some(StepCall {
        id: step.call_id.clone()?,
        name: step.tool.clone()?,
        arguments: step.arguments.clone().unwrap_or_default(),
    })
}
