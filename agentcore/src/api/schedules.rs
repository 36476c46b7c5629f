//! Schedules: the bodies of `POST` and `PATCH /api/agents/{id}/schedules[/{schedule_id}]`, and
//! the list.

use serde::{Deserialize, Serialize};

use crate::domain::schedule::{
    CatchUp, CronSpec, NewSchedule, Overlap, Schedule, SchedulePatch, Timing, Zone,
};
use crate::domain::task::{NewTask, Priority, TaskDescription, TaskTitle};
use crate::error::ValidationErrors;

use super::{nullable, required};

/// The body of `POST /api/agents/{id}/schedules`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateScheduleRequest {
    /// Five fields: minute, hour, day of month, month, day of week (`0 9 * * MON-FRI`).
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false, max_length = 200))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// An IANA zone name; `UTC` when absent.
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 64))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The title of each task it queues.
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 200)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 20000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = -2147483648, maximum = 2147483647))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// `skip` (default) or `run_once`.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
    /// `skip_if_active` (default) or `enqueue`.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// `true` when absent.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl CreateScheduleRequest {
    pub fn parse(&self) -> Result<NewSchedule, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let cron =
            required(&mut e, "cron", &self.cron).and_then(|v| e.check("cron", CronSpec::parse(v)));
        let zone = e.check("timezone", Zone::parse(self.timezone.as_deref().unwrap_or("UTC")));
        let title = required(&mut e, "title", &self.title)
            .and_then(|v| e.check("title", TaskTitle::parse(v)));
        let description = self
            .description
            .as_deref()
            .and_then(|v| e.check("description", TaskDescription::parse(v)));
        let priority = e.check("priority", Priority::parse(self.priority.unwrap_or(0)));
        let catch_up = e
            .check("catch_up", self.catch_up.as_deref().map_or(Ok(CatchUp::default()), str::parse));
        let overlap =
            e.check("overlap", self.overlap.as_deref().map_or(Ok(Overlap::default()), str::parse));
        match (cron, zone, title, priority, catch_up, overlap) {
            (
                Some(cron),
                Some(zone),
                Some(title),
                Some(priority),
                Some(catch_up),
                Some(overlap),
            ) if e.is_empty() => Ok(NewSchedule {
                timing: Timing { cron, zone },
                task: NewTask {
                    title,
                    description: description.filter(|d| !d.as_str().is_empty()),
                    priority,
                },
                catch_up,
                overlap,
                enabled: self.enabled.unwrap_or(true),
            }),
            _ => Err(e),
        }
    }
}

/// The body of `PATCH /api/agents/{id}/schedules/{schedule_id}`: any of the fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateScheduleRequest {
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 200))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_length = 64))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, min_length = 1, max_length = 200))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `null` or `""` clears it.
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = -2147483648, maximum = 2147483647))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl UpdateScheduleRequest {
    pub fn parse(&self) -> Result<SchedulePatch, ValidationErrors> {
        let mut e = ValidationErrors::new();
        let patch = SchedulePatch {
            cron: self.cron.as_deref().and_then(|v| e.check("cron", CronSpec::parse(v))),
            zone: self.timezone.as_deref().and_then(|v| e.check("timezone", Zone::parse(v))),
            title: self.title.as_deref().and_then(|v| e.check("title", TaskTitle::parse(v))),
            description: self.description.as_ref().and_then(|v| match v.as_deref() {
                None | Some("") => Some(None),
                Some(v) => e.check("description", TaskDescription::parse(v)).map(Some),
            }),
            priority: self.priority.and_then(|v| e.check("priority", Priority::parse(v))),
            catch_up: self.catch_up.as_deref().and_then(|v| e.check("catch_up", v.parse())),
            overlap: self.overlap.as_deref().and_then(|v| e.check("overlap", v.parse())),
            enabled: self.enabled,
        };
        if e.is_empty() { Ok(patch) } else { Err(e) }
    }
}

/// `{"schedules": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScheduleList {
    pub schedules: Vec<Schedule>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_field_is_named() {
        let request = CreateScheduleRequest {
            cron: Some("61 * * * *".into()),
            timezone: Some("Mars/Olympus_Mons".into()),
            title: None,
            catch_up: Some("twice".into()),
            overlap: Some("sometimes".into()),
            ..CreateScheduleRequest::default()
        };
        let errors = request.parse().unwrap_err();
        let fields: Vec<&str> = errors.fields().keys().map(String::as_str).collect();
        assert_eq!(fields, ["catch_up", "cron", "overlap", "timezone", "title"]);
    }

    #[test]
    fn defaults_fill_what_is_absent() {
        let request = CreateScheduleRequest {
            cron: Some("0 9 * * MON-FRI".into()),
            title: Some("Daily brief".into()),
            ..CreateScheduleRequest::default()
        };
        let new = request.parse().unwrap();
        assert_eq!(new.timing.zone, Zone::UTC);
        assert_eq!(
            (new.catch_up, new.overlap, new.enabled),
            (CatchUp::Skip, Overlap::SkipIfActive, true)
        );
    }
}
