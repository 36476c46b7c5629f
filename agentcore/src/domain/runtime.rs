//! What running a task does to the task, its agent, the activity log and the channel. Pure: the
//! store applies the result under the agent's lock, fenced on the task's lease.

use chrono::{DateTime, Utc};

use super::activity::{Action, NewActivity};
use super::agent::AgentStatus;
use super::chat::NewPost;
use super::message::{ActionRow, Button, Embed, MessageBody};
use super::task::{Task, TaskStatus};

/// Consecutive failed tasks that put an agent in `error`.
pub const FAILED_TASKS_BEFORE_ERROR: i32 = 3;

/// Discord's embed limits: a longer title or description is refused.
const EMBED_TITLE_CHARS: usize = 256;
const EMBED_DESCRIPTION_CHARS: usize = 4096;

/// One agent, named across users: what leases and wake-ups are about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentKey {
    pub owner_id: String,
    pub agent_id: String,
}

impl AgentKey {
    pub fn new(owner_id: impl Into<String>, agent_id: impl Into<String>) -> Self {
        Self { owner_id: owner_id.into(), agent_id: agent_id.into() }
    }
}

/// What the runtime needs of an agent, with its run state.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRun {
    pub name: String,
    pub status: AgentStatus,
    pub status_before_vacation: Option<AgentStatus>,
    pub role_prompt: String,
    pub model: Option<String>,
    pub throttle_seconds: f64,
    pub lease_owner: Option<String>,
    pub next_run_at: Option<DateTime<Utc>>,
    pub failure_streak: i32,
    pub tools: Vec<super::tools::ToolName>,
    pub max_steps: i32,
    /// The MCP servers whose tools it may call.
    pub mcp_servers: Vec<super::mcp::McpServerName>,
    /// Tools whose calls wait for a person's approval.
    pub approval_tools: Vec<String>,
    /// Its own fallback chain; `None`: the server's for its model.
    pub fallback_models: Option<Vec<String>>,
    pub memory: String,
}

/// A task this node took, with what it needs to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedTask {
    pub task: Task,
    pub agent: AgentRun,
}

impl ClaimedTask {
    /// The user message: the title, then the description when there is one.
    pub fn user_message(&self) -> String {
        match self.task.description.as_deref().map(str::trim) {
            Some(description) if !description.is_empty() => {
                format!("{}\n\n{description}", self.task.title)
            }
            _ => self.task.title.clone(),
        }
    }
}

/// What asking an agent for its next task found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    Task(Box<ClaimedTask>),
    /// Nothing to run now: look again after this long (the throttle, or the lease of a task
    /// another node still holds, as the database's clock counts it), or when woken.
    Wait(Option<std::time::Duration>),
    /// Not this node's to run any more: stopped, deleted, or leased by another node.
    Lost,
}

/// How the model calls for a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The model answered without a tool call; `tool_calls` were run on the way.
    Complete { text: String, tool_calls: i32 },
    /// A limit stopped the run (`reason` starts with its name); `summary` is what the model
    /// said it did, asked without tools at the end.
    Stopped { reason: String, summary: String },
    /// `permanent`: the provider will never accept this agent's calls as configured.
    Failed { error: String, permanent: bool },
    /// The next model call could cross a budget, so it was not sent; `error` says which
    /// budget and how much of it is spent.
    BudgetExhausted { error: String },
}

/// The agent's run state after a task.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentAfterTask {
    pub status: AgentStatus,
    pub status_before_vacation: Option<AgentStatus>,
    pub failure_streak: i32,
    pub next_run_at: DateTime<Utc>,
}

/// Everything one finished task writes, in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    pub task: Task,
    pub agent: AgentAfterTask,
    pub activity: Vec<NewActivity>,
    /// Queued in this order for the agent's channel, when it is mapped.
    pub posts: Vec<NewPost>,
}

/// Applies `outcome` of `calls` model calls to `task` (as claimed, its attempt already
/// counted) and its agent, at `at`.
pub fn finish(
    agent: &AgentRun,
    task: &Task,
    outcome: &Outcome,
    calls: i32,
    at: DateTime<Utc>,
) -> Finish {
    let mut done = task.clone();
    // The claim counted the first call; retries add the rest.
    done.attempts = task.attempts.saturating_add((calls - 1).max(0));
    done.completed_at = Some(at);
    done.updated_at = at;
    let throttle = chrono::Duration::microseconds((agent.throttle_seconds * 1e6).round() as i64);
    let mut after = AgentAfterTask {
        status: agent.status,
        status_before_vacation: agent.status_before_vacation,
        failure_streak: 0,
        next_run_at: at + throttle,
    };
    let mut activity = Vec::new();
    let mut posts = Vec::new();
    match outcome {
        Outcome::Complete { text, tool_calls } => {
            done.status = TaskStatus::Complete;
            done.result = Some(text.clone());
            done.error = None;
            activity.push(NewActivity::for_task(
                Action::TaskCompleted,
                task.id.as_str(),
                format!(
                    "Task '{}' completed in {} ({}).",
                    task.title,
                    plural(task.steps, "step"),
                    plural(*tool_calls, "tool call")
                ),
            ));
            posts.push(task_post(&task.title, text, 0x2E_CC_71));
        }
        Outcome::Failed { .. } | Outcome::Stopped { .. } | Outcome::BudgetExhausted { .. } => {
            let (error, permanent, summary) = match outcome {
                Outcome::Failed { error, permanent } => (error, *permanent, None),
                Outcome::Stopped { reason, summary } => (reason, false, Some(summary)),
                Outcome::BudgetExhausted { error } => (error, true, None),
                Outcome::Complete { .. } => unreachable!("matched above"),
            };
            done.status = TaskStatus::Failed;
            done.result = summary.cloned();
            done.error = Some(error.clone());
            let tries = if done.attempts == 1 {
                "1 attempt".into()
            } else {
                format!("{} attempts", done.attempts)
            };
            activity.push(NewActivity::for_task(
                Action::TaskFailed,
                task.id.as_str(),
                format!("Task '{}' failed after {tries}: {error}", task.title),
            ));
            let told = match summary {
                Some(summary) => format!("{error}\n\n{summary}"),
                None => error.clone(),
            };
            posts.push(task_post(&format!("Failed: {}", task.title), &told, 0xE7_4C_3C));
            if let Outcome::BudgetExhausted { error } = outcome {
                activity.push(NewActivity::for_task(
                    Action::BudgetExhausted,
                    task.id.as_str(),
                    format!("Task '{}' stopped at a budget: {error}", task.title),
                ));
            }
            after.failure_streak = agent.failure_streak.saturating_add(1);
            let why = if let Outcome::BudgetExhausted { error } = outcome {
                Some(format!(
                    "Stopped before a model call that could cross a budget: {error}. Its queued \
                     tasks wait; raise the budget (or wait for next month), then start the agent \
                     again."
                ))
            } else if permanent {
                Some(format!(
                    "The model provider rejected this agent's calls: {error}. Fix the model or \
                     its key, then start the agent again."
                ))
            } else if after.failure_streak >= FAILED_TASKS_BEFORE_ERROR {
                Some(format!(
                    "{} tasks in a row failed; the last one: {error}. Start the agent again to \
                     resume.",
                    after.failure_streak
                ))
            } else {
                None
            };
            // A stop or vacation during the task is the user's word and stands.
            if let (Some(why), AgentStatus::Active) = (why, agent.status) {
                after.status = AgentStatus::Error;
                after.status_before_vacation = None;
                activity.push(NewActivity::new(Action::AgentError, why.clone()));
                posts.push(status_post(&agent.name, AgentStatus::Error, &why));
            }
        }
    }
    Finish { task: done, agent: after, activity, posts }
}

/// `n thing` or `n things`.
fn plural(n: i32, thing: &str) -> String {
    if n == 1 { format!("1 {thing}") } else { format!("{n} {thing}s") }
}

/// A task's result (or failure) as an embed titled with the task.
fn task_post(title: &str, text: &str, color: u32) -> NewPost {
    let embed = Embed {
        title: Some(cut(title, EMBED_TITLE_CHARS)),
        description: Some(cut(text, EMBED_DESCRIPTION_CHARS)),
        color: Some(color),
    };
    NewPost::new(MessageBody::new(None, Some(embed)))
}

/// Characters of a task's description shown under "Working on".
const STARTED_DESCRIPTION_CHARS: usize = 300;

/// The post announcing that `task` (as claimed, its attempt counted) started, with its Cancel
/// button; only at its first start: `None` for a run that resumes (after a crash, its attempt
/// is not the first; after an approval, it has stored steps).
pub fn started_post(task: &Task) -> Option<NewPost> {
    if task.attempts != 1 || task.steps != 0 {
        return None;
    }
    let description = task.description.as_deref().map(str::trim).filter(|d| !d.is_empty());
    let embed = Embed {
        title: Some(cut(&format!("Working on: {}", task.title), EMBED_TITLE_CHARS)),
        description: description.map(|d| cut(d, STARTED_DESCRIPTION_CHARS)),
        color: Some(0x34_98_DB),
    };
    let mut body = MessageBody::new(None, Some(embed));
    let cancel = super::interaction::cancel_custom_id(task.id.as_str());
    body.components = vec![ActionRow::buttons(vec![Button::new(Button::DANGER, "Cancel", cancel)])];
    Some(NewPost::new(body))
}

/// The "Working on" post once its Cancel button was clicked: who cancelled, no button.
pub fn started_cancelled_body(title: &str, by: &str) -> MessageBody {
    let embed = Embed {
        title: Some(cut(&format!("Cancelled: {title}"), EMBED_TITLE_CHARS)),
        description: Some(cut(&format!("Cancelled by {by}."), EMBED_DESCRIPTION_CHARS)),
        color: Some(0x95_A5_A6),
    };
    MessageBody::new(None, Some(embed))
}

/// A cancelled task, posted in the agent's channel: who stopped it, and what stays done.
pub fn cancel_post(title: &str, text: &str) -> NewPost {
    task_post(&format!("Cancelled: {title}"), text, 0x95_A5_A6)
}

/// A budget's warning, posted in the agent's channel.
pub fn budget_post(text: &str) -> NewPost {
    let embed = Embed {
        title: Some("Budget warning".to_owned()),
        description: Some(cut(text, EMBED_DESCRIPTION_CHARS)),
        color: Some(0xF3_9C_12),
    };
    NewPost::new(MessageBody::new(None, Some(embed)))
}

/// The short post announcing a status change in the agent's channel.
pub fn status_post(name: &str, status: AgentStatus, details: &str) -> NewPost {
    let color = match status {
        AgentStatus::Active => 0x2E_CC_71,
        AgentStatus::Idle => 0x95_A5_A6,
        AgentStatus::Vacation => 0x34_98_DB,
        AgentStatus::Error => 0xE7_4C_3C,
    };
    let embed = Embed {
        title: Some(cut(&format!("{name} is {status}"), EMBED_TITLE_CHARS)),
        description: Some(cut(details, EMBED_DESCRIPTION_CHARS)),
        color: Some(color),
    };
    NewPost::new(MessageBody::new(None, Some(embed)))
}

/// `text` within `max` characters, ending in an ellipsis when it was cut. Discord counts
/// characters, not bytes.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::agent::AgentId;
    use crate::domain::task::{TaskId, Usage};

    fn agent(status: AgentStatus, streak: i32) -> AgentRun {
        AgentRun {
            name: "Writer".into(),
            status,
            status_before_vacation: None,
            role_prompt: "You write.".into(),
            model: None,
            throttle_seconds: 1.5,
            lease_owner: Some("node".into()),
            next_run_at: None,
            failure_streak: streak,
            tools: Vec::new(),
            max_steps: 8,
            mcp_servers: Vec::new(),
            approval_tools: Vec::new(),
            fallback_models: None,
            memory: String::new(),
        }
    }

    fn task() -> Task {
        let at = crate::domain::now();
        Task {
            id: TaskId::parse("t1").unwrap(),
            agent_id: AgentId::parse("writer").unwrap(),
            title: "Weekly update".into(),
            description: None,
            priority: 0,
            status: TaskStatus::InProgress,
            result: None,
            error: None,
            attempts: 1,
            created_at: at,
            updated_at: at,
            started_at: Some(at),
            completed_at: None,
            usage: None,
            steps: 1,
            created_by: crate::domain::task::CreatedBy::User,
            depth: 0,
            cancelled_by: None,
            trace: None,
        }
    }

    fn failed(permanent: bool) -> Outcome {
        Outcome::Failed { error: "boom".into(), permanent }
    }

    fn actions(finish: &Finish) -> Vec<Action> {
        finish.activity.iter().map(|a| a.action).collect()
    }

    #[test]
    fn a_completed_task_keeps_its_answer_resets_the_streak_and_starts_the_throttle() {
        let at = crate::domain::now();
        let usage = Some(Usage::new(3, 4));
        let done = finish(
            &agent(AgentStatus::Active, 2),
            &Task { usage, ..task() },
            &Outcome::Complete { text: "Done.".into(), tool_calls: 0 },
            1,
            at,
        );
        assert_eq!(done.task.status, TaskStatus::Complete);
        assert_eq!(
            (done.task.result.as_deref(), done.task.usage, done.task.attempts),
            (Some("Done."), usage, 1)
        );
        assert_eq!(done.agent.failure_streak, 0);
        assert_eq!(done.agent.next_run_at, at + chrono::Duration::milliseconds(1500));
        assert_eq!(actions(&done), [Action::TaskCompleted]);
        let embed = &done.posts[0].body.embeds[0];
        assert_eq!(embed.title.as_deref(), Some("Weekly update"));
        assert_eq!(embed.description.as_deref(), Some("Done."));
    }

    #[test]
    fn the_third_failure_in_a_row_or_a_permanent_one_puts_an_active_agent_in_error() {
        let at = crate::domain::now();
        let second = finish(&agent(AgentStatus::Active, 1), &task(), &failed(false), 3, at);
        assert_eq!((second.agent.status, second.agent.failure_streak), (AgentStatus::Active, 2));
        assert_eq!(actions(&second), [Action::TaskFailed]);

        let third = finish(&agent(AgentStatus::Active, 2), &task(), &failed(false), 3, at);
        assert_eq!(third.agent.status, AgentStatus::Error);
        assert_eq!(actions(&third), [Action::TaskFailed, Action::AgentError]);
        assert!(third.activity[1].details.contains("3 tasks in a row"));
        assert_eq!(third.posts.len(), 2);

        let permanent = finish(&agent(AgentStatus::Active, 0), &task(), &failed(true), 1, at);
        assert_eq!(permanent.agent.status, AgentStatus::Error);
        assert!(permanent.activity[1].details.contains("boom"));

        let stopped = finish(&agent(AgentStatus::Idle, 2), &task(), &failed(true), 1, at);
        assert_eq!(stopped.agent.status, AgentStatus::Idle);
        assert_eq!(actions(&stopped), [Action::TaskFailed]);
    }

    #[test]
    fn only_a_first_start_posts_working_on_with_its_cancel_button() {
        let first = started_post(&Task { steps: 0, ..task() }).expect("a first start posts");
        let embed = &first.body.embeds[0];
        assert_eq!(embed.title.as_deref(), Some("Working on: Weekly update"));
        assert_eq!(embed.description, None);
        let button = &first.body.components[0].components[0];
        assert_eq!((button.label.as_str(), button.style), ("Cancel", Button::DANGER));
        assert_eq!(button.custom_id, "task:cancel:t1");
        let long = Task { steps: 0, description: Some("d".repeat(1000)), ..task() };
        let shown = started_post(&long).unwrap().body.embeds[0].description.clone().unwrap();
        assert_eq!(shown.chars().count(), STARTED_DESCRIPTION_CHARS);
        // Re-claimed after a crash, or resumed after an approval: no second post.
        assert_eq!(started_post(&Task { steps: 0, attempts: 2, ..task() }), None);
        assert_eq!(started_post(&Task { steps: 2, attempts: 1, ..task() }), None);
    }

    #[test]
    fn long_text_is_cut_to_the_limit_with_an_ellipsis() {
        assert_eq!(cut("short", 10), "short");
        let long = "é".repeat(5000);
        let kept = cut(&long, EMBED_DESCRIPTION_CHARS);
        assert_eq!(kept.chars().count(), EMBED_DESCRIPTION_CHARS);
        assert!(kept.ends_with('…'));
    }

    #[test]
    fn the_user_message_is_the_title_then_the_description() {
        let mut claimed = ClaimedTask { task: task(), agent: agent(AgentStatus::Active, 0) };
        assert_eq!(claimed.user_message(), "Weekly update");
        claimed.task.description = Some("Cover sales.".into());
        assert_eq!(claimed.user_message(), "Weekly update\n\nCover sales.");
    }
}
