//! One look at a due schedule: which fire times are due, which of them were missed while no
//! node was running (`plan`), and, given the agent's state read under its lock, what to queue
//! and log (`decide`). Pure, so the rules are tested with any clock.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{CatchUp, Overlap, ScheduleRecord, Timing};
use crate::domain::activity::{Action, NewActivity};
use crate::domain::task::{Task, TaskId};

/// The most fire times one look walks through; beyond it the rest count as missed.
const MAX_WALK: usize = 10_000;

/// Fire times missed while no node was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missed {
    /// How many: exact up to 10,000, and at least that beyond.
    pub count: usize,
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
}

/// The due fire times of one schedule at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirePlan {
    /// Those more than `missed_after` old: nobody was running when they came.
    pub missed: Option<Missed>,
    /// Those that came within `missed_after`, oldest first.
    pub on_time: Vec<DateTime<Utc>>,
    /// The first fire time after `now`.
    pub next_fire_at: Option<DateTime<Utc>>,
}

/// Sorts the fire times from `due` (the first not yet decided) to `now`, both included, into
/// missed and on time. Missed ones are counted up to a bound, not listed, so a schedule every
/// minute that was down for a month costs a bounded walk.
pub fn plan(
    timing: &Timing,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
    missed_after: Duration,
) -> FirePlan {
    let late = chrono::Duration::from_std(missed_after).unwrap_or(chrono::Duration::MAX);
    let cutoff = now.checked_sub_signed(late).unwrap_or(DateTime::<Utc>::MIN_UTC);
    let mut missed = None;
    let mut cursor = Some(due);
    if due < cutoff {
        let last = timing.last_before(cutoff).filter(|last| *last >= due).unwrap_or(due);
        let mut count = 0;
        let mut walk = Some(due);
        while let Some(at) = walk.filter(|at| *at <= last && count < MAX_WALK) {
            count += 1;
            walk = timing.next_after(at);
        }
        missed = Some(Missed { count, first: due, last });
        cursor = timing.next_after(last);
    }
    let mut on_time = Vec::new();
    while let Some(at) = cursor.filter(|at| *at <= now) {
        on_time.push(at);
        cursor = timing.next_after(at);
    }
    FirePlan { missed, on_time, next_fire_at: cursor }
}

/// Why a fire time queued nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The schedule's previous task is still queued or in progress (`skip_if_active`).
    Overlap,
    /// The agent is not `active`.
    AgentNotActive,
    /// The agent's queue holds as many tasks as `quotas.queued_tasks_per_agent` allows.
    QueueFull,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Overlap => "overlap",
            SkipReason::AgentNotActive => "agent_not_active",
            SkipReason::QueueFull => "queue_full",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "overlap" => Some(SkipReason::Overlap),
            "agent_not_active" => Some(SkipReason::AgentNotActive),
            "queue_full" => Some(SkipReason::QueueFull),
            _ => None,
        }
    }
}

/// What the store read under the agent's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FireState {
    pub agent_active: bool,
    /// Whether the schedule's last task is queued or in progress.
    pub last_task_active: bool,
    /// The agent's queued tasks.
    pub queued: i64,
}

/// What one look writes, in one transaction with the move of `next_fire_at`.
#[derive(Debug, Clone)]
pub struct FireWrite {
    /// Each task to queue, with the fire time it is for (unique per schedule) and its entries.
    pub tasks: Vec<(DateTime<Utc>, Task, Vec<NewActivity>)>,
    /// Entries that concern no task (missed, skipped).
    pub activity: Vec<NewActivity>,
    pub skip_noted: Option<super::SkipReason>,
    pub last_task_id: Option<TaskId>,
    pub last_fired_at: Option<DateTime<Utc>>,
    pub next_fire_at: Option<DateTime<Utc>>,
}

/// Decides what the plan's fire times do, given the agent's state. With `catch_up: run_once`,
/// the missed fire times together queue one task (for the last of them); with `skip`, they
/// queue nothing and log one `schedule_missed`. A skip is logged once until the schedule next
/// queues a task, not at every fire time.
/// `max_queued` is the agent's queue quota (0: none): a fire time that finds the queue full
/// is skipped.
pub fn decide(
    schedule: &ScheduleRecord,
    plan: &FirePlan,
    state: FireState,
    now: DateTime<Utc>,
    max_queued: u32,
) -> FireWrite {
    let mut write = FireWrite {
        tasks: Vec::new(),
        activity: Vec::new(),
        skip_noted: schedule.skip_noted,
        last_task_id: schedule.last_task_id.clone(),
        last_fired_at: schedule.last_fired_at,
        next_fire_at: plan.next_fire_at,
    };
    let mut candidates: Vec<(DateTime<Utc>, Option<Missed>)> = Vec::new();
    if let Some(missed) = plan.missed {
        match schedule.catch_up {
            CatchUp::Skip => write.activity.push(NewActivity::new(
                Action::ScheduleMissed,
                format!(
                    "Schedule '{}' ({}) missed {} while no node was running ({}); catch_up \
                     is skip, so nothing was queued for {}.",
                    schedule.task.title,
                    schedule.timing.cron.as_str(),
                    runs(missed.count),
                    span(&missed, schedule),
                    if missed.count == 1 { "it" } else { "them" }
                ),
            )),
            CatchUp::RunOnce => candidates.push((missed.last, Some(missed))),
        }
    }
    candidates.extend(plan.on_time.iter().map(|at| (*at, None)));
    let mut last_task_active = state.last_task_active;
    let mut queued = state.queued;
    for (at, caught_up) in candidates {
        let skip = if !state.agent_active {
            Some(SkipReason::AgentNotActive)
        } else if schedule.overlap == Overlap::SkipIfActive && last_task_active {
            Some(SkipReason::Overlap)
        } else if max_queued > 0 && queued >= i64::from(max_queued) {
            Some(SkipReason::QueueFull)
        } else {
            None
        };
        if let Some(reason) = skip {
            if write.skip_noted != Some(reason) {
                write.activity.push(skipped(schedule, reason, at));
                write.skip_noted = Some(reason);
            }
            continue;
        }
        let task = Task::queued(&schedule.agent_id, schedule.task.clone(), now);
        let why = match caught_up {
            Some(missed) => format!(
                " to catch up on {} missed while no node was running ({})",
                runs(missed.count),
                span(&missed, schedule)
            ),
            None => String::new(),
        };
        let entries = vec![
            crate::domain::activity::NewActivity::for_task(
                Action::TaskAdded,
                task.id.as_str(),
                format!("Task '{}' added with priority {}.", task.title, task.priority),
            ),
            NewActivity::for_task(
                Action::ScheduleFired,
                task.id.as_str(),
                format!(
                    "Schedule '{}' ({}, {}) queued its run of {}{why}.",
                    schedule.task.title,
                    schedule.timing.cron.as_str(),
                    schedule.timing.zone.name(),
                    schedule.timing.zone.local(at)
                ),
            ),
        ];
        write.last_task_id = Some(task.id.clone());
        write.last_fired_at = Some(at);
        write.skip_noted = None;
        write.tasks.push((at, task, entries));
        last_task_active = true;
        queued += 1;
    }
    write
}

fn skipped(schedule: &ScheduleRecord, reason: SkipReason, at: DateTime<Utc>) -> NewActivity {
    let because = match reason {
        SkipReason::Overlap => {
            "its previous task is still queued or in progress \
                                (overlap: skip_if_active)"
        }
        SkipReason::AgentNotActive => "the agent is not active",
        SkipReason::QueueFull => "the agent's queue is full (quotas.queued_tasks_per_agent)",
    };
    NewActivity::new(
        Action::ScheduleSkipped,
        format!(
            "Schedule '{}' ({}) queued nothing at {} because {because} (reason: {}); this is \
             logged once until it queues a task again.",
            schedule.task.title,
            schedule.timing.cron.as_str(),
            schedule.timing.zone.local(at),
            reason.as_str()
        ),
    )
}

fn runs(count: usize) -> String {
    if count == 1 { "1 run".to_owned() } else { format!("{count} runs") }
}

fn span(missed: &Missed, schedule: &ScheduleRecord) -> String {
    let zone = schedule.timing.zone;
    if missed.first == missed.last {
        zone.local(missed.first)
    } else {
        format!("{} to {}", zone.local(missed.first), zone.local(missed.last))
    }
}
