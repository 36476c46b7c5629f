//! The backlog of each agent, and its activity log.

use serde_json::json;

use super::{Core, Principal};
use crate::domain::activity::{Action, ActivityEntry, ActivityQuery, NewActivity};
use crate::domain::agent::{AgentId, AgentStatus};
use crate::domain::now;
use crate::domain::paging::{TaskPage, TasksPage};
use crate::domain::runtime::cancel_post;
use crate::domain::steps::StepKind;
use crate::domain::task::{NewTask, Task, TaskId, TaskPatch, TaskStatus};
use crate::domain::workspace::Need;
use crate::domain::workspace::WorkspaceId;
use crate::error::{Conflict, Error, Result};
use crate::store::{TaskChange, TaskWrite};

/// The `task_added` entry of a new task.
pub(super) fn task_added(task: &Task) -> NewActivity {
    NewActivity::for_task(
        Action::TaskAdded,
        task.id.as_str(),
        format!("Task '{}' added with priority {}.", task.title, task.priority),
    )
}

impl Core {
    /// Queues a task at the end of its priority.
    pub async fn add_task(&self, who: &Principal, agent: &AgentId, task: NewTask) -> Result<Task> {
        who.require(Need::Work)?;
        self.check_queue_room(&who.workspace, agent).await?;
        let task = Task::queued(agent, task, now());
        let activity = task_added(&task);
        let added = self.store().insert_task(&who.workspace, &task, &activity).await?;
        if added.agent_status == AgentStatus::Active {
            self.wake_agent(&who.workspace, agent);
        } else {
            self.ring_events(&who.workspace);
        }
        Ok(Task { created_at: added.created_at, updated_at: added.created_at, ..task })
    }

    /// A page of the agent's tasks in creation order (optionally of one status), and where
    /// the next starts. Tasks added while a client pages come after its cursor, so each task
    /// is on exactly one page.
    pub async fn task_page(
        &self,
        who: &Principal,
        agent: &AgentId,
        page: &TaskPage,
    ) -> Result<TasksPage> {
        let one_more = TaskPage { limit: page.limit.saturating_add(1), ..page.clone() };
        let fetched = self.store().task_page(&who.workspace, agent, &one_more).await?;
        Ok(TasksPage::from_fetched(fetched, page))
    }

    /// The agent's tasks in creation order, optionally only those in one status.
    pub async fn tasks(
        &self,
        who: &Principal,
        agent: &AgentId,
        status: Option<TaskStatus>,
    ) -> Result<Vec<Task>> {
        let mut tasks = self.store().tasks(&who.workspace, agent, status).await?;
        tasks.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok(tasks)
    }

    pub async fn task(&self, who: &Principal, agent: &AgentId, id: &TaskId) -> Result<Task> {
        self.store().task(&who.workspace, agent, id).await
    }

    /// Changes a queued task; any other status is `task_not_editable`.
    pub async fn update_task(
        &self,
        who: &Principal,
        agent: &AgentId,
        id: &TaskId,
        patch: TaskPatch,
    ) -> Result<Task> {
        who.require(Need::Work)?;
        self.store()
            .update_task(&who.workspace, agent, id, &|current| {
                require(current, TaskStatus::Queued, "edited")?;
                let mut next = current.clone();
                if let Some(title) = &patch.title {
                    next.title = title.as_str().to_owned();
                }
                if let Some(description) = &patch.description {
                    next.description = description.as_ref().map(|d| d.as_str().to_owned());
                }
                if let Some(priority) = patch.priority {
                    next.priority = priority.get();
                }
                next.updated_at = now();
                let activity = NewActivity::for_task(
                    Action::TaskUpdated,
                    id.as_str(),
                    format!("Task '{}' updated.", next.title),
                );
                Ok(TaskChange {
                    write: TaskWrite::Update(Box::new(next)),
                    activity: vec![activity],
                    post: None,
                })
            })
            .await
            .inspect(|_| self.ring_events(&who.workspace))
    }

    /// Removes a task that is not in progress.
    pub async fn delete_task(&self, who: &Principal, agent: &AgentId, id: &TaskId) -> Result<()> {
        who.require(Need::Work)?;
        let before = std::sync::Mutex::new(None);
        self.store()
            .update_task(&who.workspace, agent, id, &|current| {
                *crate::sync::lock(&before) = Some(current.clone());
                if current.status == TaskStatus::InProgress {
                    return Err(Error::conflict(
                        Conflict::TaskNotEditable,
                        format!(
                            "Task '{id}' is in progress and cannot be deleted until it finishes."
                        ),
                    ));
                }
                let activity = NewActivity::for_task(
                    Action::TaskDeleted,
                    id.as_str(),
                    format!("Task '{}' deleted.", current.title),
                );
                Ok(TaskChange { write: TaskWrite::Delete, activity: vec![activity], post: None })
            })
            .await?;
        self.ring_events(&who.workspace);
        let was = before.into_inner().ok().flatten().and_then(|t| serde_json::to_value(t).ok());
        let target = format!("{agent}/{id}");
        self.record(who, "task.deleted", ("task", &target), was, None).await;
        Ok(())
    }

    /// Queues a failed task again, with its attempts, error and timings reset.
    pub async fn retry_task(&self, who: &Principal, agent: &AgentId, id: &TaskId) -> Result<Task> {
        who.require(Need::Work)?;
        let task = self
            .store()
            .update_task(&who.workspace, agent, id, &|current| {
                require(current, TaskStatus::Failed, "retried")?;
                let next = Task {
                    status: TaskStatus::Queued,
                    error: None,
                    result: None,
                    attempts: 0,
                    started_at: None,
                    completed_at: None,
                    usage: None,
                    steps: 0,
                    updated_at: now(),
                    ..current.clone()
                };
                let activity = NewActivity::for_task(
                    Action::TaskRetried,
                    id.as_str(),
                    format!("Task '{}' queued again after failing.", current.title),
                );
                Ok(TaskChange {
                    write: TaskWrite::Update(Box::new(next)),
                    activity: vec![activity],
                    post: None,
                })
            })
            .await?;
        self.wake_agent(&who.workspace, agent);
        Ok(task)
    }

    /// Cancels a queued, waiting or running task, as the caller. A running one stops at once
    /// on whichever node runs it: its model call in flight is dropped and no further tool
    /// runs; what its tools did already stays done, and the activity entry and the post list
    /// it. A finished task is `task_finished`; a cancelled one `task_already_cancelled`.
    pub async fn cancel_task(&self, who: &Principal, agent: &AgentId, id: &TaskId) -> Result<Task> {
        who.require(Need::Work)?;
        let by = self.actor_label(who).await?;
        let task = self.cancel_task_as(&who.workspace, agent, id, &by).await?;
        let target = format!("{agent}/{id}");
        let after = json!({"title": task.title, "status": task.status});
        self.record(who, "task.cancelled", ("task", &target), None, Some(after)).await;
        Ok(task)
    }

    /// [`Core::cancel_task`], by `by` (an email, or `discord:<user>`).
    pub(super) async fn cancel_task_as(
        &self,
        owner: &WorkspaceId,
        agent: &AgentId,
        id: &TaskId,
        by: &str,
    ) -> Result<Task> {
        // The steps a run stored before the cancel: what it did stays done, and is listed.
        let done: Vec<String> = self
            .store()
            .steps(owner, agent, id)
            .await?
            .into_iter()
            .filter(|step| step.kind == StepKind::Tool && step.error.is_none())
            .filter_map(|step| step.tool)
            .collect();
        let task = self
            .store()
            .update_task(owner, agent, id, &|current| {
                match current.status {
                    TaskStatus::Cancelled => {
                        return Err(Error::conflict(
                            Conflict::TaskAlreadyCancelled,
                            format!("Task '{id}' was cancelled already."),
                        ));
                    }
                    status if status.is_finished() => {
                        return Err(Error::conflict(
                            Conflict::TaskFinished,
                            format!("Task '{id}' is {status}: there is nothing to cancel."),
                        ));
                    }
                    _ => {}
                }
                let at = now();
                let next = Task {
                    status: TaskStatus::Cancelled,
                    cancelled_by: Some(by.to_owned()),
                    completed_at: Some(at),
                    updated_at: at,
                    ..current.clone()
                };
                let kept = if done.is_empty() {
                    String::new()
                } else {
                    format!(" Already done, and kept: {}.", done.join(", "))
                };
                let details = format!("Task '{}' cancelled by {by}.{kept}", current.title);
                let post = cancel_post(&current.title, &format!("Cancelled by {by}.{kept}"));
                Ok(TaskChange {
                    write: TaskWrite::Update(Box::new(next)),
                    activity: vec![NewActivity::for_task(
                        Action::TaskCancelled,
                        id.as_str(),
                        details,
                    )],
                    post: Some(post),
                })
            })
            .await?;
        // The worker running it (here, or elsewhere through the store's notification) looks.
        self.after_agent_change(owner, agent);
        Ok(task)
    }

    /// The agent's activity, newest first.
    pub async fn activity(
        &self,
        who: &Principal,
        agent: &AgentId,
        query: &ActivityQuery,
    ) -> Result<Vec<ActivityEntry>> {
        self.store().activity(&who.workspace, agent, query).await
    }
}

/// `task_not_editable` unless the task is in `status`.
fn require(task: &Task, status: TaskStatus, verb: &str) -> Result<()> {
    if task.status == status {
        Ok(())
    } else {
        Err(Error::conflict(
            Conflict::TaskNotEditable,
            format!("Task '{}' is {} and can only be {verb} while {status}.", task.id, task.status),
        ))
    }
}
