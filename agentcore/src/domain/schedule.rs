//! Schedules: recurring tasks on a cron expression in a time zone, and the rules that decide
//! what one look at a due schedule does (`fire.rs`). Fire times are whole seconds in UTC; the
//! zone only decides which instants the expression names, so a local time that does not exist
//! (spring forward) fires once at the first instant after the gap, and one that occurs twice
//! (fall back) fires once, at its first occurrence.

mod fire;

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};

use super::agent::AgentId;
use super::task::{NewTask, TaskId};

pub use fire::{FirePlan, FireState, FireWrite, Missed, SkipReason, decide, plan};

/// How many upcoming fire times a schedule shows.
pub const NEXT_RUNS: usize = 5;

generated_id!(
    /// A schedule's id: a UUID v7 in its hyphenated text form.
    ScheduleId
);

/// A cron expression: five fields (minute, hour, day of month, month, day of week) with
/// ranges, lists, steps and names (`MON-FRI`, `JAN`), or a nickname (`@daily`). A sixth,
/// leading seconds field parses too; whether it is allowed is the operator's choice
/// (`schedules.seconds_field`), checked by the facade.
#[derive(Debug, Clone)]
pub struct CronSpec {
    source: String,
    cron: Cron,
}

impl CronSpec {
    pub fn parse(value: &str) -> Result<Self, String> {
        let source = value.split_whitespace().collect::<Vec<_>>().join(" ");
        let fields = source.split(' ').count();
        if source.is_empty() || source.len() > 200 {
            return Err("must be a cron expression of 5 fields, at most 200 characters".into());
        }
        if !source.starts_with('@') && !(5..=6).contains(&fields) {
            return Err(format!(
                "must have 5 fields (minute hour day-of-month month day-of-week), not {fields}"
            ));
        }
        let parser =
            CronParser::builder().seconds(Seconds::Optional).year(Year::Disallowed).build();
        let cron =
            parser.parse(&source).map_err(|e| format!("is not a valid cron expression: {e}"))?;
        Ok(Self { source, cron })
    }

    /// Whether it has the sixth (seconds) field.
    pub fn has_seconds(&self) -> bool {
        !self.source.starts_with('@') && self.source.split(' ').count() == 6
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// An IANA time zone name (`Europe/Berlin`, `America/New_York`, `UTC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone(chrono_tz::Tz);

impl Zone {
    pub const UTC: Zone = Zone(chrono_tz::UTC);

    pub fn parse(value: &str) -> Result<Self, String> {
        chrono_tz::Tz::from_str(value)
            .map(Self)
            .map_err(|_| format!("'{value}' is not an IANA time zone name (like Europe/Berlin)"))
    }

    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// `at` as a local date and time with its offset (RFC 3339).
    pub fn local(self, at: DateTime<Utc>) -> String {
        at.with_timezone(&self.0).to_rfc3339()
    }
}

/// When a schedule fires: an expression read in a zone.
#[derive(Debug, Clone)]
pub struct Timing {
    pub cron: CronSpec,
    pub zone: Zone,
}

impl Timing {
    /// The first fire time strictly after `after`, if the expression names any.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone.0);
        let next = self.cron.cron.find_next_occurrence(&local, false).ok()?;
        Some(next.with_timezone(&Utc))
    }

    /// The last fire time strictly before `before`, if any.
    pub fn last_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = before.with_timezone(&self.zone.0);
        let last = self.cron.cron.find_previous_occurrence(&local, false).ok()?;
        Some(last.with_timezone(&Utc))
    }

    /// The shortest time between two of its next `samples` fire times after `after` (`None`
    /// when it names fewer than two).
    pub fn shortest_gap(&self, after: DateTime<Utc>, samples: usize) -> Option<chrono::Duration> {
        let runs = self.upcoming(after, samples);
        runs.windows(2).map(|pair| pair[1] - pair[0]).min()
    }

    /// The next `count` fire times after `after`.
    pub fn upcoming(&self, after: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
        let mut runs = Vec::with_capacity(count);
        let mut cursor = after;
        while runs.len() < count {
            let Some(next) = self.next_after(cursor) else { break };
            runs.push(next);
            cursor = next;
        }
        runs
    }
}

/// What to do with fire times missed while no node was running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Queue nothing for them; log one `schedule_missed` entry.
    #[default]
    Skip,
    /// Queue one task, however many were missed.
    RunOnce,
}

/// What to do when a fire time comes while the schedule's previous task is not finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Queue nothing while its previous task is queued or in progress.
    #[default]
    SkipIfActive,
    /// Queue a task every time.
    Enqueue,
}

macro_rules! word_enum {
    ($name:ident, $($variant:ident = $word:literal),+) => {
        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(value: &str) -> Result<Self, String> {
                match value {
                    $($word => Ok($name::$variant),)+
                    _ => Err(format!("must be one of {}", [$($word),+].join(", "))),
                }
            }
        }
    };
}
word_enum!(CatchUp, Skip = "skip", RunOnce = "run_once");
word_enum!(Overlap, SkipIfActive = "skip_if_active", Enqueue = "enqueue");

/// A new schedule, as parsed from a request.
#[derive(Debug, Clone)]
pub struct NewSchedule {
    pub timing: Timing,
    pub task: NewTask,
    pub catch_up: CatchUp,
    pub overlap: Overlap,
    pub enabled: bool,
}

/// A partial update. `task_description: Some(None)` clears the description.
#[derive(Debug, Clone, Default)]
pub struct SchedulePatch {
    pub cron: Option<CronSpec>,
    pub zone: Option<Zone>,
    pub title: Option<super::task::TaskTitle>,
    pub description: Option<Option<super::task::TaskDescription>>,
    pub priority: Option<super::task::Priority>,
    pub catch_up: Option<CatchUp>,
    pub overlap: Option<Overlap>,
    pub enabled: Option<bool>,
}

/// A stored schedule with the state the firing keeps.
#[derive(Debug, Clone)]
pub struct ScheduleRecord {
    pub id: ScheduleId,
    pub agent_id: AgentId,
    pub timing: Timing,
    pub task: NewTask,
    pub catch_up: CatchUp,
    pub overlap: Overlap,
    pub enabled: bool,
    /// The next fire time not yet decided; `None` when the expression names no more.
    pub next_fire_at: Option<DateTime<Utc>>,
    pub last_fired_at: Option<DateTime<Utc>>,
    /// The last task it queued (for `skip_if_active`).
    pub last_task_id: Option<TaskId>,
    /// The reason of the last skip logged since its last task, so a skip is logged once.
    pub skip_noted: Option<SkipReason>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ScheduleRecord {
    /// A new schedule, first due at its first fire time after `now` (the database's time).
    pub fn create(agent: &AgentId, new: NewSchedule, now: DateTime<Utc>) -> Self {
        Self {
            id: ScheduleId::generate(),
            agent_id: agent.clone(),
            next_fire_at: new.timing.next_after(now),
            timing: new.timing,
            task: new.task,
            catch_up: new.catch_up,
            overlap: new.overlap,
            enabled: new.enabled,
            last_fired_at: None,
            last_task_id: None,
            skip_noted: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// The schedule after `patch` at `now`. A change of timing, or enabling it again, makes
    /// it next due at its first fire time after now: times that passed while it was off are
    /// not caught up.
    pub fn patched(&self, patch: &SchedulePatch, now: DateTime<Utc>) -> Self {
        let mut next = self.clone();
        if let Some(cron) = &patch.cron {
            next.timing.cron = cron.clone();
        }
        if let Some(zone) = patch.zone {
            next.timing.zone = zone;
        }
        if let Some(title) = &patch.title {
            next.task.title = title.clone();
        }
        if let Some(description) = &patch.description {
            next.task.description = description.clone();
        }
        if let Some(priority) = patch.priority {
            next.task.priority = priority;
        }
        next.catch_up = patch.catch_up.unwrap_or(self.catch_up);
        next.overlap = patch.overlap.unwrap_or(self.overlap);
        next.enabled = patch.enabled.unwrap_or(self.enabled);
        let enabled_again = !self.enabled && next.enabled;
        if patch.cron.is_some() || patch.zone.is_some() || enabled_again {
            next.next_fire_at = next.timing.next_after(now);
        }
        next.updated_at = now;
        next
    }

    /// Whether `other` is this schedule's twin: the same agent, cron expression (compared
    /// as written, whitespace and letter case aside), zone, task title and description. Such a
    /// pair would queue the same task twice at every fire time; priority, catch-up, overlap
    /// and whether it is enabled do not make a twin different (enabling it would double).
    pub fn same_as(&self, other: &ScheduleRecord) -> bool {
        self.id != other.id && self.queues_as(other)
    }

    /// Whether the two queue the same task at the same times (their ids aside): what makes a
    /// twin, and what a change must touch before it is checked for one (so a twin made before
    /// the rule existed can still be paused, resumed or reprioritised).
    pub fn queues_as(&self, other: &ScheduleRecord) -> bool {
        self.agent_id == other.agent_id
            && self.timing.cron.as_str().eq_ignore_ascii_case(other.timing.cron.as_str())
            && self.timing.zone == other.timing.zone
            && self.task.title.as_str() == other.task.title.as_str()
            && self.task.description.as_ref().map(|d| d.as_str())
                == other.task.description.as_ref().map(|d| d.as_str())
    }

    /// Refuses this schedule when one of the agent's `others` is its twin ([`Self::same_as`]),
    /// in words that name the twin.
    pub fn refuse_twin(&self, others: &[ScheduleRecord]) -> Result<(), String> {
        match others.iter().find(|other| self.same_as(other)) {
            Some(twin) => Err(format!(
                "schedule {} already queues '{}' at '{}' in {}; change or delete that one \
                 instead of adding its twin",
                twin.id,
                twin.task.title.as_str(),
                twin.timing.cron.as_str(),
                twin.timing.zone.name()
            )),
            None => Ok(()),
        }
    }

    /// As the API shows it.
    pub fn public(&self) -> Schedule {
        let next_runs = match (self.enabled, self.next_fire_at) {
            (true, Some(first)) => {
                let mut runs = vec![first];
                runs.extend(self.timing.upcoming(first, NEXT_RUNS - 1));
                runs.into_iter()
                    .map(|at| NextRun { at, local: self.timing.zone.local(at) })
                    .collect()
            }
            _ => Vec::new(),
        };
        Schedule {
            id: self.id.clone(),
            agent_id: self.agent_id.clone(),
            cron: self.timing.cron.as_str().to_owned(),
            timezone: self.timing.zone.name().to_owned(),
            title: self.task.title.as_str().to_owned(),
            description: self.task.description.as_ref().map(|d| d.as_str().to_owned()),
            priority: self.task.priority.get(),
            catch_up: self.catch_up,
            overlap: self.overlap,
            enabled: self.enabled,
            next_runs,
            last_fired_at: self.last_fired_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A schedule as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Schedule {
    pub id: ScheduleId,
    pub agent_id: AgentId,
    pub cron: String,
    pub timezone: String,
    pub title: String,
    pub description: Option<String>,
    pub priority: i32,
    pub catch_up: CatchUp,
    pub overlap: Overlap,
    pub enabled: bool,
    /// The next fire times (empty when disabled or when the expression names no more).
    pub next_runs: Vec<NextRun>,
    pub last_fired_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One upcoming fire time, in UTC and in the schedule's zone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NextRun {
    pub at: DateTime<Utc>,
    /// The same instant in the schedule's zone, with its offset (RFC 3339).
    pub local: String,
}

/// A whole-second instant from stored seconds since the epoch.
pub fn from_epoch(seconds: i64) -> Option<DateTime<Utc>> {
    Utc.timestamp_opt(seconds, 0).single()
}

#[cfg(test)]
mod tests;
