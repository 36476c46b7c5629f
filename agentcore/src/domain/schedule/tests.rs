//! Fire times across daylight saving changes, and what a look at a due schedule decides, with
//! an injected clock.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::*;
use crate::domain::activity::Action;
use crate::domain::task::{NewTask, Priority, TaskTitle};

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

fn timing(cron: &str, zone: &str) -> Timing {
    Timing { cron: CronSpec::parse(cron).unwrap(), zone: Zone::parse(zone).unwrap() }
}

fn fires(timing: &Timing, from: &str, count: usize) -> Vec<DateTime<Utc>> {
    timing.upcoming(utc(from), count)
}

#[test]
fn standard_syntax_parses_and_bad_expressions_say_why() {
    for good in
        ["*/15 9-17 * * MON-FRI", "0 9 1,15 * *", "0 0 * JAN,JUL 0", "@daily", " 5  4 * * * "]
    {
        assert!(CronSpec::parse(good).is_ok(), "{good}");
    }
    assert_eq!(CronSpec::parse(" 5  4 * * * ").unwrap().as_str(), "5 4 * * *");
    for (bad, says) in [
        ("61 * * * *", "not a valid cron expression"),
        ("* * *", "must have 5 fields"),
        ("* * * * * * *", "must have 5 fields"),
        ("", "must be a cron expression"),
        ("every day", "must have 5 fields"),
        ("0 9 * * FUNDAY", "not a valid cron expression"),
    ] {
        let error = CronSpec::parse(bad).unwrap_err();
        assert!(error.contains(says), "{bad}: {error}");
    }
    assert!(!CronSpec::parse("0 9 * * *").unwrap().has_seconds());
    assert!(CronSpec::parse("*/2 * * * * *").unwrap().has_seconds());
    assert!(!CronSpec::parse("@hourly").unwrap().has_seconds());
    assert!(Zone::parse("Europe/Berlin").is_ok());
    assert!(Zone::parse("Mars/Olympus_Mons").unwrap_err().contains("IANA"));
}

#[test]
fn weekdays_at_nine_in_new_york_are_named_in_utc() {
    let runs = fires(&timing("0 9 * * MON-FRI", "America/New_York"), "2026-11-20T15:00:00Z", 3);
    // Friday the 20th has passed 9:00; Saturday and Sunday are skipped; EST is UTC-5.
    assert_eq!(
        runs,
        [utc("2026-11-23T14:00:00Z"), utc("2026-11-24T14:00:00Z"), utc("2026-11-25T14:00:00Z")]
    );
    assert_eq!(
        Zone::parse("America/New_York").unwrap().local(runs[0]),
        "2026-11-23T09:00:00-05:00"
    );
}

#[test]
fn a_local_time_that_does_not_exist_fires_once_at_the_first_instant_after_the_gap() {
    // New York springs forward on 8 March 2026: 02:00 EST becomes 03:00 EDT.
    let new_york = fires(&timing("30 2 * * *", "America/New_York"), "2026-03-07T00:00:00Z", 3);
    assert_eq!(
        new_york,
        [utc("2026-03-07T07:30:00Z"), utc("2026-03-08T07:00:00Z"), utc("2026-03-09T06:30:00Z")]
    );
    // Berlin springs forward on 29 March 2026: 02:00 CET becomes 03:00 CEST.
    let berlin = fires(&timing("30 2 * * *", "Europe/Berlin"), "2026-03-28T00:00:00Z", 3);
    assert_eq!(
        berlin,
        [utc("2026-03-28T01:30:00Z"), utc("2026-03-29T01:00:00Z"), utc("2026-03-30T00:30:00Z")]
    );
}

#[test]
fn a_local_time_that_occurs_twice_fires_once() {
    // New York falls back on 1 November 2026: 01:00-02:00 happens in EDT, then in EST.
    let new_york = fires(&timing("30 1 * * *", "America/New_York"), "2026-10-31T00:00:00Z", 3);
    assert_eq!(
        new_york,
        [utc("2026-10-31T05:30:00Z"), utc("2026-11-01T05:30:00Z"), utc("2026-11-02T06:30:00Z")]
    );
    // Berlin falls back on 25 October 2026: 02:00-03:00 happens in CEST, then in CET.
    let berlin = fires(&timing("30 2 * * *", "Europe/Berlin"), "2026-10-24T00:00:00Z", 3);
    assert_eq!(
        berlin,
        [utc("2026-10-24T00:30:00Z"), utc("2026-10-25T00:30:00Z"), utc("2026-10-26T01:30:00Z")]
    );
}

#[test]
fn an_hourly_schedule_never_fires_twice_at_one_instant_across_either_change() {
    for (zone, from) in [
        ("America/New_York", "2026-03-08T00:00:00Z"),
        ("America/New_York", "2026-11-01T00:00:00Z"),
        ("Europe/Berlin", "2026-03-28T20:00:00Z"),
        ("Europe/Berlin", "2026-10-24T20:00:00Z"),
    ] {
        let runs = fires(&timing("0 * * * *", zone), from, 12);
        assert_eq!(runs.len(), 12);
        assert!(runs.windows(2).all(|pair| pair[0] < pair[1]), "{zone}: {runs:?}");
        assert!(runs.windows(2).all(|pair| pair[1] - pair[0] <= chrono::Duration::hours(2)));
    }
}

#[test]
fn the_plan_sorts_due_fire_times_into_missed_and_on_time_across_a_dst_change() {
    let every_minute = timing("* * * * *", "UTC");
    let minute = Duration::from_secs(60);
    let fresh =
        plan(&every_minute, utc("2026-05-01T10:00:00Z"), utc("2026-05-01T10:00:01Z"), minute);
    assert_eq!(fresh.missed, None);
    assert_eq!(fresh.on_time, [utc("2026-05-01T10:00:00Z")]);
    assert_eq!(fresh.next_fire_at, Some(utc("2026-05-01T10:01:00Z")));

    let down =
        plan(&every_minute, utc("2026-05-01T10:00:00Z"), utc("2026-05-01T10:03:30Z"), minute);
    let missed = down.missed.unwrap();
    assert_eq!(
        (missed.count, missed.first, missed.last),
        (3, utc("2026-05-01T10:00:00Z"), utc("2026-05-01T10:02:00Z"))
    );
    assert_eq!(down.on_time, [utc("2026-05-01T10:03:00Z")]);
    assert_eq!(down.next_fire_at, Some(utc("2026-05-01T10:04:00Z")));

    // Down across Berlin's spring forward: 02:30 does not exist, its run is 03:00 CEST.
    let daily = timing("30 2 * * *", "Europe/Berlin");
    let across = plan(&daily, utc("2026-03-27T01:30:00Z"), utc("2026-03-29T12:00:00Z"), minute);
    let missed = across.missed.unwrap();
    assert_eq!((missed.count, missed.last), (3, utc("2026-03-29T01:00:00Z")));
    assert!(across.on_time.is_empty());
    assert_eq!(across.next_fire_at, Some(utc("2026-03-30T00:30:00Z")));

    // A month down, every minute: the walk is bounded and the last missed time exact.
    let month =
        plan(&every_minute, utc("2026-04-01T00:00:00Z"), utc("2026-05-01T00:00:30Z"), minute);
    let missed = month.missed.unwrap();
    assert_eq!((missed.count, missed.last), (10_000, utc("2026-04-30T23:59:00Z")));
    assert_eq!(month.on_time, [utc("2026-05-01T00:00:00Z")]);
}

fn schedule(catch_up: CatchUp, overlap: Overlap) -> ScheduleRecord {
    let new = NewSchedule {
        timing: timing("* * * * *", "UTC"),
        task: NewTask {
            title: TaskTitle::parse("Daily brief").unwrap(),
            description: None,
            priority: Priority::parse(0).unwrap(),
        },
        catch_up,
        overlap,
        enabled: true,
    };
    ScheduleRecord::create(&AgentId::parse("briefer").unwrap(), new, utc("2026-05-01T09:00:00Z"))
}

const ACTIVE: FireState = FireState { agent_active: true, last_task_active: false, queued: 0 };

fn actions(write: &FireWrite) -> Vec<Action> {
    write.activity.iter().map(|entry| entry.action).collect()
}

#[test]
fn missed_runs_queue_nothing_with_skip_and_exactly_one_task_with_run_once() {
    let now = utc("2026-05-01T10:03:30Z");
    let down = plan(
        &timing("* * * * *", "UTC"),
        utc("2026-05-01T10:00:00Z"),
        now,
        Duration::from_secs(60),
    );
    let skipping = schedule(CatchUp::Skip, Overlap::SkipIfActive);
    let write = decide(&skipping, &down, ACTIVE, now, 0);
    assert_eq!(actions(&write), [Action::ScheduleMissed]);
    assert!(write.activity[0].details.contains("missed 3 runs"), "{}", write.activity[0].details);
    // The on-time fire time still runs.
    assert_eq!(write.tasks.len(), 1);
    assert_eq!(write.tasks[0].0, utc("2026-05-01T10:03:00Z"));

    let all_missed = FirePlan { on_time: Vec::new(), ..down.clone() };
    assert!(decide(&skipping, &all_missed, ACTIVE, now, 0).tasks.is_empty());

    let catching_up = schedule(CatchUp::RunOnce, Overlap::SkipIfActive);
    let write = decide(&catching_up, &all_missed, ACTIVE, now, 0);
    assert_eq!(write.tasks.len(), 1);
    assert_eq!(write.tasks[0].0, utc("2026-05-01T10:02:00Z"));
    let fired = &write.tasks[0].2[1];
    assert_eq!(fired.action, Action::ScheduleFired);
    assert!(fired.details.contains("catch up on 3 runs"), "{}", fired.details);
    // With the on-time one too, skip_if_active leaves it to the catch-up task.
    let write = decide(&catching_up, &down, ACTIVE, now, 0);
    assert_eq!(write.tasks.len(), 1);
    assert_eq!(actions(&write), [Action::ScheduleSkipped]);
    assert_eq!(write.skip_noted, Some(SkipReason::Overlap));
}

#[test]
fn an_inactive_agent_or_a_running_task_queues_nothing_and_is_logged_once() {
    let now = utc("2026-05-01T10:00:01Z");
    let due = plan(
        &timing("* * * * *", "UTC"),
        utc("2026-05-01T10:00:00Z"),
        now,
        Duration::from_secs(60),
    );
    let mut record = schedule(CatchUp::Skip, Overlap::SkipIfActive);
    let idle = FireState { agent_active: false, last_task_active: false, queued: 0 };
    let first = decide(&record, &due, idle, now, 0);
    assert!(first.tasks.is_empty());
    assert_eq!(actions(&first), [Action::ScheduleSkipped]);
    assert!(first.activity[0].details.contains("agent_not_active"));
    record.skip_noted = first.skip_noted;
    assert!(decide(&record, &due, idle, now, 0).activity.is_empty(), "logged once, not per fire");

    let busy = FireState { agent_active: true, last_task_active: true, queued: 0 };
    let overlap = decide(&record, &due, busy, now, 0);
    assert!(overlap.tasks.is_empty());
    assert_eq!(actions(&overlap), [Action::ScheduleSkipped], "a new reason is logged");
    let enqueue = schedule(CatchUp::Skip, Overlap::Enqueue);
    assert_eq!(decide(&enqueue, &due, busy, now, 0).tasks.len(), 1);
    let full = FireState { agent_active: true, last_task_active: true, queued: 5 };
    let skipped = decide(&enqueue, &due, full, now, 5);
    assert!(skipped.tasks.is_empty(), "a full queue takes no more");
    assert!(skipped.activity[0].details.contains("queue_full"), "{:?}", skipped.activity);
    assert_eq!(decide(&enqueue, &due, full, now, 6).tasks.len(), 1, "room for one more");

    let fired = decide(&record, &due, ACTIVE, now, 0);
    assert_eq!(fired.tasks.len(), 1);
    assert_eq!(fired.skip_noted, None, "a queued task ends the quiet");
    assert_eq!(fired.last_task_id.as_ref(), Some(&fired.tasks[0].1.id));
    assert_eq!(fired.last_fired_at, Some(utc("2026-05-01T10:00:00Z")));
}

#[test]
fn a_patch_of_the_timing_or_enabling_again_moves_the_next_fire_time_past_now() {
    let record = schedule(CatchUp::Skip, Overlap::SkipIfActive);
    assert_eq!(record.next_fire_at, Some(utc("2026-05-01T09:01:00Z")));
    let later = utc("2026-05-01T12:00:30Z");
    let title_only = SchedulePatch {
        title: Some(TaskTitle::parse("Brief").unwrap()),
        ..SchedulePatch::default()
    };
    assert_eq!(record.patched(&title_only, later).next_fire_at, record.next_fire_at);
    let hourly = SchedulePatch {
        cron: Some(CronSpec::parse("0 * * * *").unwrap()),
        ..SchedulePatch::default()
    };
    assert_eq!(record.patched(&hourly, later).next_fire_at, Some(utc("2026-05-01T13:00:00Z")));
    let off =
        record.patched(&SchedulePatch { enabled: Some(false), ..SchedulePatch::default() }, later);
    assert!(off.public().next_runs.is_empty());
    let on = off.patched(&SchedulePatch { enabled: Some(true), ..SchedulePatch::default() }, later);
    assert_eq!(on.next_fire_at, Some(utc("2026-05-01T12:01:00Z")));
    let shown = on.public();
    assert_eq!(shown.next_runs.len(), NEXT_RUNS);
    assert_eq!(shown.next_runs[4].at, utc("2026-05-01T12:05:00Z"));
    assert_eq!(shown.next_runs[0].local, "2026-05-01T12:01:00+00:00");
}
