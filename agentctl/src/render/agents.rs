//! Agents and their work: the agent list and one agent, its backlog, a task's steps, its
//! memory, its activity and its schedules.

use agentcore::api::{ActivityList, AgentList, ScheduleList, StepList, TaskList};
use agentcore::domain::agent::{Agent, AgentDetail, AgentSummary};
use agentcore::domain::schedule::Schedule;
use agentcore::domain::steps::StepKind;
use agentcore::domain::task::Task;
use agentcore::domain::tools::Memory;

use super::{Render, Screen, cell, dollars, fields, rows, short};

impl Render for AgentList {
    fn render(&self, screen: Screen) -> String {
        let headers = [
            "ID",
            "NAME",
            "STATUS",
            "CHANNEL",
            "WORKSPACE",
            "MODEL",
            "QUEUED",
            "RUNNING",
            "WAITING",
            "DONE",
            "FAILED",
        ];
        rows(screen, &self.agents, headers, |agent| {
            let backlog = &agent.backlog_summary;
            [
                cell(&agent.id),
                agent.name.clone(),
                cell(&agent.status),
                agent.channel.clone(),
                cell(&agent.workspace),
                cell(&agent.model),
                backlog.queued.to_string(),
                backlog.in_progress.to_string(),
                backlog.awaiting_approval.to_string(),
                backlog.complete.to_string(),
                backlog.failed.to_string(),
            ]
        })
    }
}

/// An agent as created or updated: its fields, and no backlog.
impl Render for Agent {
    fn render(&self, screen: Screen) -> String {
        with_backlog(screen, agent_fields(screen, self, None), &[])
    }
}

/// The role prompt is shown whole, wrapped to the screen; the backlog's titles are cut.
impl Render for AgentDetail {
    fn render(&self, screen: Screen) -> String {
        let agent = agent_fields(screen, &self.agent, self.next_cursor.as_deref());
        with_backlog(screen, agent, &self.backlog)
    }
}

/// The backlog newest first, as `tasks list` and the dashboard list it (the API's single-agent
/// view, which `-o json` prints, keeps its run order).
fn with_backlog(screen: Screen, agent: String, backlog: &[Task]) -> String {
    let mut newest = backlog.to_vec();
    newest.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| b.id.cmp(&a.id)));
    format!("{agent}\nBacklog:\n{}", tasks(screen, &newest))
}

/// Every field of the agent but its backlog counts (the backlog follows), with the page's
/// cursor when there is one. The fields are named one by one: a field added to the agent
/// does not compile here until it is shown.
fn agent_fields(screen: Screen, agent: &Agent, next_cursor: Option<&str>) -> String {
    let Agent { summary, role_prompt, status_before_vacation: _ } = agent;
    let AgentSummary {
        id,
        name,
        status,
        channel,
        throttle_seconds,
        workspace,
        model,
        tools,
        max_steps,
        mcp_servers,
        budget_monthly_usd,
        approval_tools,
        fallback_models,
        created_at,
        updated_at,
        backlog_summary: _,
    } = summary;
    let shown = [
        ("approval_tools", cell(approval_tools)),
        ("budget_monthly_usd", budget_monthly_usd.map_or_else(|| "-".to_owned(), dollars)),
        ("channel", channel.clone()),
        ("created_at", cell(created_at)),
        ("fallback_models", fallback_models.as_ref().map_or_else(|| "(server's)".to_owned(), cell)),
        ("id", cell(id)),
        ("max_steps", max_steps.to_string()),
        ("mcp_servers", cell(mcp_servers)),
        ("model", cell(model)),
        ("name", name.clone()),
        ("role_prompt", role_prompt.clone()),
        ("status", cell(status)),
        ("throttle_seconds", cell(throttle_seconds)),
        ("tools", cell(tools)),
        ("updated_at", cell(updated_at)),
        ("workspace", cell(workspace)),
    ];
    let cursor = next_cursor.map(|cursor| ("next_cursor", cursor.to_owned()));
    fields(screen, shown.into_iter().chain(cursor))
}

/// A task just queued, in two lines: what a person checks (its id, title, priority and
/// status); `tasks show` and `--output json` have every field.
pub(crate) struct Added<'a>(pub &'a Task);

impl Render for Added<'_> {
    fn render(&self, _screen: Screen) -> String {
        let task = self.0;
        format!(
            "Added task {}: {}\nPriority {}, {}.",
            cell(&task.id),
            short(&task.title),
            task.priority,
            cell(&task.status)
        )
    }
}

impl Render for TaskList {
    fn render(&self, screen: Screen) -> String {
        tasks(screen, &self.tasks)
    }
}

fn tasks(screen: Screen, tasks: &[Task]) -> String {
    let headers = ["ID", "TITLE", "STATUS", "PRIORITY", "ATTEMPTS", "CREATED"];
    rows(screen, tasks, headers, |task| {
        [
            cell(&task.id),
            short(&task.title),
            cell(&task.status),
            task.priority.to_string(),
            task.attempts.to_string(),
            cell(&task.created_at),
        ]
    })
}

/// A run's transcript: one row a step; a model step shows the calls it asked for, a tool step
/// its arguments; long texts are cut to a line.
impl Render for StepList {
    fn render(&self, screen: Screen) -> String {
        let headers = ["#", "KIND", "CALL", "RESULT", "MS", "TOKENS"];
        rows(screen, &self.steps, headers, |step| {
            let call = match step.kind {
                StepKind::Tool => {
                    format!("{}({})", cell(&step.tool), short(&cell(&step.arguments)))
                }
                StepKind::Model | StepKind::Summary => {
                    let calls: Vec<&str> =
                        step.tool_calls.iter().map(|c| c.name.as_str()).collect();
                    if calls.is_empty() { "-".into() } else { format!("→ {}", calls.join(", ")) }
                }
                StepKind::Compaction => {
                    format!("summary of 1-{}", step.compacted_through.unwrap_or_default())
                }
            };
            let result = match &step.error {
                None => short(&cell(&step.output)),
                Some(error) => format!("error: {}", short(error)),
            };
            let tokens = match &step.usage {
                None => "-".into(),
                Some(usage) => format!("{}/{}", usage.input_tokens, usage.output_tokens),
            };
            [
                step.seq.to_string(),
                cell(&step.kind),
                call,
                result,
                step.duration_ms.to_string(),
                tokens,
            ]
        })
    }
}

impl Render for Memory {
    fn render(&self, _screen: Screen) -> String {
        let used = format!("({} of {} characters)", self.chars, self.limit);
        if self.memory.is_empty() {
            format!("(empty) {used}")
        } else {
            format!("{}\n{used}", self.memory)
        }
    }
}

impl Render for ActivityList {
    fn render(&self, screen: Screen) -> String {
        let headers = ["TIME", "ACTION", "TASK", "DETAILS"];
        rows(screen, &self.entries, headers, |entry| {
            [
                cell(&entry.timestamp),
                cell(&entry.action),
                cell(&entry.task_id),
                short(&entry.details),
            ]
        })
    }
}

/// Next runs are shown in the schedule's own zone; `(off)` when none is coming.
impl Render for ScheduleList {
    fn render(&self, screen: Screen) -> String {
        let headers = ["ID", "CRON", "ZONE", "TITLE", "ENABLED", "NEXT RUN (LOCAL)", "LAST FIRED"];
        rows(screen, &self.schedules, headers, |schedule| {
            let next = schedule.next_runs.first().map_or("(off)", |run| run.local.as_str());
            [
                cell(&schedule.id),
                schedule.cron.clone(),
                schedule.timezone.clone(),
                short(&schedule.title),
                schedule.enabled.to_string(),
                next.to_owned(),
                cell(&schedule.last_fired_at),
            ]
        })
    }
}

/// Every field of the schedule, then its next runs in its zone and in UTC. The fields are
/// named one by one: a field added to the schedule does not compile here until it is shown.
impl Render for Schedule {
    fn render(&self, screen: Screen) -> String {
        let Schedule {
            id,
            agent_id,
            cron,
            timezone,
            title,
            description,
            priority,
            catch_up,
            overlap,
            enabled,
            next_runs,
            last_fired_at,
            created_at,
            updated_at,
        } = self;
        let head = fields(
            screen,
            [
                ("agent_id", cell(agent_id)),
                ("catch_up", cell(catch_up)),
                ("created_at", cell(created_at)),
                ("cron", cron.clone()),
                ("description", cell(description)),
                ("enabled", enabled.to_string()),
                ("id", cell(id)),
                ("last_fired_at", cell(last_fired_at)),
                ("overlap", cell(overlap)),
                ("priority", priority.to_string()),
                ("timezone", timezone.clone()),
                ("title", title.clone()),
                ("updated_at", cell(updated_at)),
            ],
        );
        let runs = rows(screen, next_runs, ["NEXT RUNS (LOCAL)", "UTC"], |run| {
            [run.local.clone(), cell(&run.at)]
        });
        format!("{head}\n{runs}")
    }
}
