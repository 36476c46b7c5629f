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

mod calling;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument as _;

use super::compact::{self, Plan};
use super::fallback::{Answered, First, ask as ask_chain};
use super::offer::offered;
use super::tools::McpTools;
use super::trace;
use super::{Node, ReadFailed, Unanswered};
use crate::domain::event::{Event, StepStarted};
use crate::domain::runtime::{AgentKey, ClaimedTask, Outcome};
use crate::domain::steps::{Effect, LoopGuard, Step, StepCall, StepKind, Stop};
use crate::domain::steps::{summary_request, system_prompt};
use crate::domain::workspace::WorkspaceId;
use crate::models::{CompletionRequest, Message, ModelKind, ModelProvider};
use crate::models::{ToolCall, ToolChoice};
use crate::store::{RunContext, RunRef};

/// How long a stopped run's summary call may take (or the longest retry wait, when longer).
const SUMMARY_GRACE: Duration = Duration::from_secs(60);

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
    /// The database stayed out of reach for a read the run needs: nothing more is written,
    /// and the task, still this node's, runs again at the worker's next claim
    /// ([`super::Unanswered::Interrupted`]).
    Interrupted,
}

/// Runs `claimed` to its end, resuming after its stored steps, in its `invoke_agent` span
/// (see [`super::trace`]).
pub(super) async fn run_task(node: &Node, agent: &AgentKey, claimed: &ClaimedTask) -> Ran {
    let span = trace::run_span(agent, claimed);
    let ran = run(node, agent, claimed).instrument(span.clone()).await;
    trace::run_ended(&span, &ran);
    ran
}

async fn run(node: &Node, agent: &AgentKey, claimed: &ClaimedTask) -> Ran {
    let models = node.core.models();
    let kind = models.kind_of(claimed.agent.model.as_deref());
    // `echo` reads no prompt: the recent tasks would be a query for nothing.
    let recent = if kind == ModelKind::Echo { 0 } else { crate::domain::steps::RECENT_TASKS };
    let task = &claimed.task;
    let read = || node.core.run_store().run_context(agent, &task.id, task.steps, recent);
    let context = match super::read_for_run(node, &task.id, "read the task's steps", read).await {
        Ok(context) => context,
        Err(ReadFailed::Failed(error)) => {
            return Ran::Finished(Outcome::Failed { error, permanent: false }, 0, None);
        }
        Err(ReadFailed::Interrupted) => return Ran::Interrupted,
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
    let span = tracing::Span::current();
    span.record("gen_ai.provider.name", kind.label());
    span.record("gen_ai.request.model", request.model.as_str());
    let mut run = Run {
        node,
        agent,
        claimed,
        model: Model { provider, kind, request },
        mcp: McpTools::new(offer.mcp),
        guard: LoopGuard::default(),
        counts: Counts::default(),
        asked: None,
        last: None,
        deadline: Instant::now(),
    };
    let first = run.replay(context);
    match run.go(first).await {
        Ok(outcome) => Ran::Finished(outcome, 1 + run.counts.retries, run.last.take()),
        Err(Halt::Parked) => Ran::Parked,
        Err(Halt::LeaseLost) => Ran::Lost,
        Err(Halt::Interrupted) => Ran::Interrupted,
    }
}

/// Where a run is. Each state says what happens next; [`Run::go`] moves from one to the next
/// until [`State::Ended`], or a [`Halt`].
#[derive(Debug)]
enum State {
    /// The model's calls that have no result yet run, in order; after a `stop` (a loop found
    /// among them or before) they are answered "not run" instead.
    Calling { calls: Vec<StepCall>, stop: Option<Stop> },
    /// The conversation is compacted first when it crowds the model's context window (see
    /// [`super::compact`]); then the model is asked.
    Compacting,
    /// The model is asked for its next step.
    Asking,
    /// A limit stopped the work: the model is asked once more, without tools, for a summary.
    Summarising(Stop),
    /// The run is over.
    Ended(Outcome),
}

/// Why a run stops with nothing more to write: the task's lease is lost (or its steps cannot
/// be stored, and the lease will run out), the task is parked at a call waiting for a
/// person's approval, or the database is out of reach for a read ([`Ran::Interrupted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Halt {
    LeaseLost,
    Parked,
    Interrupted,
}

/// A model call that got no answer, as the run goes on: the task's outcome, or a halt.
fn unanswered(unanswered: Unanswered) -> Result<State, Halt> {
    match unanswered {
        Unanswered::Ended(outcome) => Ok(State::Ended(outcome)),
        Unanswered::Interrupted => Err(Halt::Interrupted),
    }
}

/// The model a run talks to, and the conversation so far.
struct Model<'a> {
    provider: Arc<dyn ModelProvider>,
    kind: ModelKind<'a>,
    request: CompletionRequest,
}

#[derive(Debug, Default)]
struct Counts {
    /// The last stored step's number.
    seq: i32,
    model_calls: i32,
    tool_calls: i32,
    /// Retries of failed model calls in this run.
    retries: i32,
}

struct Run<'a> {
    node: &'a Node,
    agent: &'a AgentKey,
    claimed: &'a ClaimedTask,
    model: Model<'a>,
    mcp: McpTools,
    guard: LoopGuard,
    counts: Counts,
    /// The model step whose calls are pending, until it is stored (with the first of them,
    /// when that one is local).
    asked: Option<Step>,
    /// The answer that completed the run: stored with the outcome, in one transaction.
    last: Option<Step>,
    deadline: Instant,
}

impl Run<'_> {
    /// Rebuilds the conversation from the stored steps, and says where the run resumes: at
    /// the calls of the last model step that have no result yet, or at its end when its
    /// summary was stored before a crash.
    fn replay(&mut self, context: RunContext) -> State {
        let mut spent = Duration::ZERO;
        let mut pending = Vec::new();
        let mut stop = None;
        for step in &context.steps {
            self.counts.seq = step.seq;
            spent += Duration::from_millis(u64::try_from(step.duration_ms).unwrap_or(0));
            match step.kind {
                StepKind::Model => {
                    self.counts.model_calls += 1;
                    pending.clone_from(&step.tool_calls);
                    self.model.request.messages.push(Message::Assistant {
                        text: step.output.clone().unwrap_or_default(),
                        tool_calls: step.tool_calls.iter().map(to_call).collect(),
                    });
                }
                StepKind::Tool => {
                    pending.retain(|c: &StepCall| Some(&c.id) != step.call_id.as_ref());
                    if let Some(call) = as_call(step) {
                        self.counts.tool_calls += 1;
                        if self.guard.repeats(&call) {
                            stop = Some(Stop::LoopDetected);
                        }
                    }
                    self.push_result(step);
                }
                StepKind::Compaction => {
                    let task = self.claimed.user_message();
                    self.model.request.messages = compact::resumed(&task, &context.steps, step.seq);
                }
                StepKind::Summary => {
                    let reason = step.error.clone().unwrap_or_default();
                    let summary = step.output.clone().unwrap_or_default();
                    return State::Ended(Outcome::Stopped { reason, summary });
                }
            }
        }
        let limit = self.node.config.task_timeout;
        self.deadline = Instant::now() + limit.saturating_sub(spent);
        State::Calling { calls: pending, stop }
    }

    /// Moves the run from `state` to its end.
    async fn go(&mut self, mut state: State) -> Result<Outcome, Halt> {
        loop {
            state = match state {
                State::Calling { calls, stop } => self.call_all(calls, stop).await?,
                State::Compacting => self.compact().await?,
                State::Asking => self.ask_next().await?,
                State::Summarising(stop) => State::Ended(self.summarise(stop).await?),
                State::Ended(outcome) => return Ok(outcome),
            };
        }
    }

    /// [`State::Compacting`]: when the conversation crowds the model's window, the model is
    /// asked (once, without tools, reserved against the budgets like any call) for a summary
    /// of the older steps, stored as a step that replaces them; then the fit is checked again.
    async fn compact(&mut self) -> Result<State, Halt> {
        let (node, agent, claimed) = (self.node, self.agent, self.claimed);
        let plan = compact::plan(node, agent, claimed, &self.model.request, self.counts.seq).await;
        let compaction = match plan {
            Plan::Fits => return Ok(State::Asking),
            Plan::Stop(outcome) => return Ok(State::Ended(outcome)),
            Plan::Interrupted => return Err(Halt::Interrupted),
            Plan::Compact(compaction) => compaction,
        };
        let started = Instant::now();
        let asked = compaction.messages.clone();
        let conversation = std::mem::replace(&mut self.model.request.messages, asked);
        self.model.request.tool_choice = ToolChoice::None;
        let remaining = self.deadline.saturating_duration_since(started);
        let answered = tokio::time::timeout(remaining, self.ask(StepKind::Compaction)).await;
        self.model.request.messages = conversation;
        self.model.request.tool_choice = ToolChoice::Auto;
        let Answered { completion: answer, cost, tried } = match answered {
            Err(_) => return Ok(State::Summarising(self.timeout())),
            Ok(Err(no)) => return unanswered(no),
            Ok(Ok(answered)) => answered,
        };
        let mut step = compaction.step(self.next_seq(), answer, cost, millis(started));
        step.tried = tried;
        let stored = self.store(&step, None).await?;
        self.model.request.messages = compaction.after(&claimed.user_message(), stored);
        Ok(State::Compacting)
    }

    /// [`State::Asking`]: the model's answer ends the run, or asks for calls.
    async fn ask_next(&mut self) -> Result<State, Halt> {
        let started = Instant::now();
        let remaining = self.deadline.saturating_duration_since(started);
        let Answered { completion: answer, cost, tried } =
            match tokio::time::timeout(remaining, self.ask(StepKind::Model)).await {
                Err(_) => return Ok(State::Summarising(self.timeout())),
                Ok(Err(no)) => return unanswered(no),
                Ok(Ok(answered)) => answered,
            };
        let calls: Vec<StepCall> = answer.tool_calls.iter().map(from_call).collect();
        let mut step = Step::model(
            self.next_seq(),
            answer.text.clone(),
            calls.clone(),
            answer.usage,
            millis(started),
        );
        step.cost = cost;
        step.tried = tried;
        if calls.is_empty() {
            // Stored with the outcome: one transaction fewer for every task.
            self.last = Some(step);
            let tool_calls = self.counts.tool_calls;
            return Ok(State::Ended(Outcome::Complete { text: answer.text, tool_calls }));
        }
        self.asked = Some(step);
        self.counts.model_calls += 1;
        self.model
            .request
            .messages
            .push(Message::Assistant { text: answer.text, tool_calls: answer.tool_calls });
        Ok(State::Calling { calls, stop: None })
    }

    /// One model call of kind `step` with the conversation so far, along the agent's fallback
    /// chain, counting its retries; its cost is reserved before each model is sent it and
    /// settled when one answers (see [`super::fallback`] and [`super::spend`]).
    async fn ask(&mut self, step: StepKind) -> Result<Answered, Unanswered> {
        let run = RunRef { agent: self.agent, task: &self.claimed.task.id, node: self.node.id() };
        let Model { provider, request, .. } = &self.model;
        self.started(step, None);
        let first = First { provider, request };
        ask_chain(self.node, run, self.claimed, first, &mut self.counts.retries).await
    }

    fn timeout(&self) -> Stop {
        Stop::Timeout(self.node.config.task_timeout.as_secs())
    }

    /// [`State::Summarising`]: calls the model once more, without tools, for a summary of the
    /// work.
    async fn summarise(&mut self, stop: Stop) -> Result<Outcome, Halt> {
        self.model.request.messages.push(Message::User(summary_request(stop)));
        self.model.request.tool_choice = ToolChoice::None;
        let started = Instant::now();
        // The task's time may be up already: the summary gets a grace of its own, so a wait
        // (a shared rate limit, every model cooling down) cannot hold the task for ever.
        let grace = SUMMARY_GRACE.max(self.node.config.retry_max);
        let answered = match tokio::time::timeout(grace, self.ask(StepKind::Summary)).await {
            Ok(answered) => answered,
            Err(_) => Err(Unanswered::Ended(Outcome::Failed {
                error: "the summary call ran out of time".into(),
                permanent: false,
            })),
        };
        let (summary, usage, cost, tried) = match answered {
            Ok(Answered { completion, cost, tried }) if !completion.text.trim().is_empty() => {
                (completion.text, completion.usage, cost, tried)
            }
            Ok(Answered { completion, cost, tried }) => {
                ("(The model gave no summary.)".to_owned(), completion.usage, cost, tried)
            }
            Err(Unanswered::Ended(exhausted @ Outcome::BudgetExhausted { .. })) => {
                return Ok(exhausted);
            }
            Err(Unanswered::Interrupted) => return Err(Halt::Interrupted),
            Err(Unanswered::Ended(_)) => (
                "(The summary could not be asked for: the model call failed.)".to_owned(),
                None,
                None,
                Vec::new(),
            ),
        };
        let mut step =
            Step::model(self.next_seq(), summary.clone(), Vec::new(), usage, millis(started));
        step.kind = StepKind::Summary;
        step.cost = cost;
        step.tried = tried;
        step.error = Some(stop.to_string());
        self.store(&step, None).await?;
        Ok(Outcome::Stopped { reason: stop.to_string(), summary })
    }

    /// Tells the owner's streams on this node that the next step began (live only: a stream
    /// elsewhere sees the step when it is stored).
    fn started(&self, kind: StepKind, tool: Option<&str>) {
        let started = StepStarted { seq: self.next_seq(), kind, tool: tool.map(str::to_owned) };
        let event =
            Event::step_started(&self.agent.agent_id, self.claimed.task.id.as_str(), started);
        self.node.core.live_event(&WorkspaceId::from_trusted(self.agent.owner_id.clone()), event);
    }

    /// The number of the next step to store.
    fn next_seq(&self) -> i32 {
        self.counts.seq + if self.asked.is_some() { 2 } else { 1 }
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
    async fn store(&mut self, step: &Step, effect: Option<&Effect>) -> Result<Step, Halt> {
        let run = RunRef { agent: self.agent, task: &self.claimed.task.id, node: self.node.id() };
        let asked = self.asked.take();
        let node = self.node;
        let record = || node.core.run_store().record_step(run, asked.as_ref(), step, effect);
        match super::write_retrying(node, run.task, "store a step", record).await {
            Some(Some(stored)) => {
                self.counts.seq = stored.seq;
                node.core.ring_events(&WorkspaceId::from_trusted(self.agent.owner_id.clone()));
                Ok(stored)
            }
            Some(None) => {
                tracing::info!(task = %run.task, "run stopped: the task, its agent or its lease is gone");
                Err(Halt::LeaseLost)
            }
            // The lease runs out and the run resumes from its last stored step.
            None => Err(Halt::LeaseLost),
        }
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
