//! `agents watch`, `tasks watch` and `tasks add --watch`: the service's event stream, shown
//! as it comes (a line per event, or with `-o json` each event's JSON as received, one per
//! line). A dropped connection is opened again after the last event seen (`Last-Event-ID`),
//! with a growing pause; a watched task's end ends the command with its outcome.

use std::time::Duration;

use serde_json::Value;

use agentcore::api::CreateTaskRequest;
use agentcore::domain::agent::AgentStatus;
use agentcore::domain::event::Event;
use agentcore::domain::task::TaskStatus;

use super::{Context, print_out};
use crate::cli::Output;
use crate::client::{Client, Incoming};
use crate::failure::{Failure, Kind};
use crate::render::events::line;
use crate::sse::{Message, Parser};

/// The pause before the first attempt to reconnect; it doubles up to [`MOST_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(250);
const MOST_DELAY: Duration = Duration::from_secs(4);

/// How a watch ends: `Ok` for a task that completed (or none watched), the failure whose exit
/// code tells how the task ended otherwise.
type Outcome = Result<(), Failure>;

/// `agents watch [<agent>]`: every event of the agent (of all the user's agents without one)
/// until Ctrl-C.
pub(super) async fn agents(cx: &Context, client: &Client, agent: Option<String>) -> Outcome {
    let watch = Watch { cx, client, agent, task: None, last_id: None };
    let first = client.events(watch.agent.as_deref(), None, None).await?;
    match &watch.agent {
        Some(agent) => eprintln!("Following agent {agent}'s events; Ctrl-C stops."),
        None => eprintln!("Following the events of all your agents; Ctrl-C stops."),
    }
    watch.run(first, false).await
}

/// `tasks watch <agent> <task>`: the task's events until it ends (at once if it had).
pub(super) async fn task(cx: &Context, client: &Client, agent: String, task: String) -> Outcome {
    let watch = Watch { cx, client, agent: Some(agent), task: Some(task), last_id: None };
    let first = client.events(watch.agent.as_deref(), watch.task.as_deref(), None).await?;
    watch.warn_if_idle().await;
    watch.run(first, true).await
}

/// `tasks add ... --watch`: the stream is opened before the task is added, so even a task
/// that ends at once is seen from its first event.
pub(super) async fn add(
    cx: &Context,
    client: &Client,
    agent: String,
    request: &CreateTaskRequest,
) -> Outcome {
    let first = client.events(Some(&agent), None, None).await?;
    let added = client.add_task(&agent, request).await?;
    let task = Some(added.body.id.as_str().to_owned());
    let watch = Watch { cx, client, agent: Some(agent), task, last_id: None };
    watch.warn_if_idle().await;
    watch.run(first, false).await
}

struct Watch<'a> {
    cx: &'a Context,
    client: &'a Client,
    agent: Option<String>,
    /// The task followed to its end: only its events are shown.
    task: Option<String>,
    /// The id of the last event seen, sent when the stream is opened again.
    last_id: Option<i64>,
}

impl Watch<'_> {
    /// Follows `first` until the watched task ends, or until Ctrl-C.
    async fn run(mut self, first: Incoming, check: bool) -> Outcome {
        let interrupted = agentd::shutdown_signal();
        let watched = self.task.clone().zip(self.agent.clone());
        tokio::select! {
            outcome = self.follow(first, check) => outcome,
            () = interrupted => match watched {
                None => Ok(()),
                Some((task, agent)) => Err(Failure::watched(
                    Kind::Interrupted,
                    format!("stopped watching; task {task} goes on \
                             (`agentctl tasks watch {agent} {task}` follows it again)"),
                )),
            },
        }
    }

    /// Reads the stream, opening it again whenever it breaks. `check`: whether the watched
    /// task may have ended before the stream was opened (then its status says how).
    async fn follow(&mut self, mut stream: Incoming, mut check: bool) -> Outcome {
        let mut delay = FIRST_DELAY;
        loop {
            if check && let Some(outcome) = self.ended().await? {
                return outcome;
            }
            let mut parser = Parser::default();
            let mut why = loop {
                match stream.chunk().await {
                    Ok(Some(bytes)) => {
                        for message in parser.push(&bytes) {
                            delay = FIRST_DELAY;
                            if let Some(outcome) = self.show(message).await? {
                                return outcome;
                            }
                        }
                    }
                    Ok(None) => break "the server ended the stream".to_owned(),
                    Err(failure) => break failure.message,
                }
            };
            stream = loop {
                eprintln!("{why}; reconnecting in {:.1} s", delay.as_secs_f64());
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MOST_DELAY);
                let task = self.task.as_deref();
                match self.client.events(self.agent.as_deref(), task, self.last_id).await {
                    Ok(stream) => break stream,
                    Err(failure) if worth_retrying(&failure) => why = failure.message,
                    Err(failure) => return Err(failure),
                }
            };
            match self.last_id {
                Some(id) => eprintln!("Reconnected; following on after event {id}."),
                None => eprintln!("Reconnected."),
            }
            // Without an id the events in between are gone: the task may have ended there.
            check = self.last_id.is_none();
        }
    }

    /// Prints one message; `Some` when it ends the watched task.
    async fn show(&mut self, message: Message) -> Result<Option<Outcome>, Failure> {
        if let Some(id) = message.id.as_deref().and_then(|id| id.trim().parse().ok()) {
            self.last_id = Some(id);
        }
        let value: Value = serde_json::from_str(&message.data).unwrap_or(Value::Null);
        if message.event == "resync" {
            self.print(&message);
            if self.cx.global.output == Output::Json {
                eprintln!("Events were missed (the server no longer has them); following on.");
            }
            // The task's end may be among what was missed.
            return self.ended().await;
        }
        if let Some(task) = &self.task
            && value["task_id"].as_str() != Some(task.as_str())
        {
            return Ok(None);
        }
        self.print(&message);
        let task = value["task_id"].as_str().unwrap_or("?");
        Ok(match message.event.as_str() {
            "task.completed" => Some(Ok(())),
            "task.failed" => Some(Err(failed(task))),
            "task.cancelled" => Some(Err(cancelled(task))),
            _ => None,
        })
    }

    fn print(&self, message: &Message) {
        match self.cx.global.output {
            Output::Json => print_out(&message.data),
            Output::Table => match serde_json::from_str::<Event>(&message.data) {
                Ok(event) => print_out(&line(&event)),
                // A kind of event newer than this agentctl: shown as it came.
                Err(_) => print_out(&format!("{}  {}", message.event, message.data)),
            },
        }
    }

    /// The watched task's outcome if it has ended already (read from the service).
    async fn ended(&self) -> Result<Option<Outcome>, Failure> {
        let (Some(agent), Some(task)) = (&self.agent, &self.task) else {
            return Ok(None);
        };
        let status = self.client.task(agent, task).await?.body.status;
        let outcome = match status {
            TaskStatus::Complete => Ok(()),
            TaskStatus::Failed => Err(failed(task)),
            TaskStatus::Cancelled => Err(cancelled(task)),
            TaskStatus::Queued | TaskStatus::InProgress | TaskStatus::AwaitingApproval => {
                return Ok(None);
            }
        };
        eprintln!("Task {task} has ended: it is {}.", status.as_str());
        Ok(Some(outcome))
    }

    /// Says so when the agent is not working through its backlog: the task would wait.
    async fn warn_if_idle(&self) {
        let Some(agent) = &self.agent else { return };
        if let Ok(shown) = self.client.agent(agent).await
            && shown.body.agent.status != AgentStatus::Active
        {
            eprintln!(
                "Agent {agent} is {}: its tasks wait until it is started (`agentctl agents \
                 start {agent}`).",
                shown.body.agent.status.as_str()
            );
        }
    }
}

fn failed(task: &str) -> Failure {
    Failure::watched(Kind::TaskFailed, format!("task {task} failed"))
}

fn cancelled(task: &str) -> Failure {
    Failure::watched(Kind::TaskCancelled, format!("task {task} was cancelled"))
}

/// A refusal that may pass: the network, the server (5xx, a rate limit), or the stream limit
/// while the server has not yet noticed the broken stream.
fn worth_retrying(failure: &Failure) -> bool {
    failure.kind == Kind::Failure || failure.code.as_deref() == Some("quota_exceeded")
}
