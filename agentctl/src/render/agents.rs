//! Agents and their work: the agent list and one agent, its backlog, a task's steps, its
//! memory, its activity and its schedules.

use agentcore::api::{ActivityList, AgentList, ScheduleList, StepList, TaskList};
use agentcore::domain::agent::{Agent, AgentDetail, AgentSummary};
use agentcore::domain::schedule::Schedule;
use agentcore::domain::steps::StepKind;
use agentcore::domain::task::Task;
use agentcore::domain::tools::Memory;

use super::{Render, cell, fields, rows, short};

impl Render for AgentList {
    fn render(&self) -> String {
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
        rows(&self.agents, headers, |agent| {
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
    fn render(&self) -> String {
        with_backlog(agent_fields(self, None), &[])
    }
}

impl Render for AgentDetail {
    fn render(&self) -> String {
        with_backlog(agent_fields(&self.agent, self.next_cursor.as_deref()), &self.backlog)
    }
}

fn with_backlog(agent: String, backlog: &[Task]) -> String {
    format!("{agent}\nBacklog:\n{}", tasks(backlog))
}

/// Every field of the agent but its backlog counts (the backlog follows), with the page's
/// cursor when there is one. The fields are named one by one: a field added to the agent
/// does not compile here until it is shown.
fn agent_fields(agent: &Agent, next_cursor: Option<&str>) -> String {
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
        created_at,
        updated_at,
        backlog_summary: _,
    } = summary;
    let shown = [
        ("approval_tools", cell(approval_tools)),
        ("budget_monthly_usd", cell(budget_monthly_usd)),
        ("channel", channel.clone()),
        ("created_at", cell(created_at)),
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
    fields(shown.into_iter().chain(cursor))
}

impl Render for TaskList {
    fn render(&self) -> String {
        tasks(&self.tasks)
    }
}

fn tasks(tasks: &[Task]) -> String {
    let headers = ["ID", "TITLE", "STATUS", "PRIORITY", "ATTEMPTS", "CREATED"];
    rows(tasks, headers, |task| {
        [
            cell(&task.id),
            task.title.clone(),
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
    fn render(&self) -> String {
        let headers = ["#", "KIND", "CALL", "RESULT", "MS", "TOKENS"];
        rows(&self.steps, headers, |step| {
            let call = match step.kind {
                StepKind::Tool => {
                    format!("{}({})", cell(&step.tool), short(&cell(&step.arguments)))
                }
                StepKind::Model | StepKind::Summary => {
                    let calls: Vec<&str> =
                        step.tool_calls.iter().map(|c| c.name.as_str()).collect();
                    if calls.is_empty() { "-".into() } else { format!("→ {}", calls.join(", ")) }
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
    fn render(&self) -> String {
        let used = format!("({} of {} characters)", self.chars, self.limit);
        if self.memory.is_empty() {
            format!("(empty) {used}")
        } else {
            format!("{}\n{used}", self.memory)
        }
    }
}

impl Render for ActivityList {
    fn render(&self) -> String {
        let headers = ["TIME", "ACTION", "TASK", "DETAILS"];
        rows(&self.entries, headers, |entry| {
            [
                cell(&entry.timestamp),
                cell(&entry.action),
                cell(&entry.task_id),
                entry.details.clone(),
            ]
        })
    }
}

/// Next runs are shown in the schedule's own zone; `(off)` when none is coming.
impl Render for ScheduleList {
    fn render(&self) -> String {
        let headers = ["ID", "CRON", "ZONE", "TITLE", "ENABLED", "NEXT RUN (LOCAL)", "LAST FIRED"];
        rows(&self.schedules, headers, |schedule| {
            let next = schedule.next_runs.first().map_or("(off)", |run| run.local.as_str());
            [
                cell(&schedule.id),
                schedule.cron.clone(),
                schedule.timezone.clone(),
                schedule.title.clone(),
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
    fn render(&self) -> String {
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
        let head = fields([
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
        ]);
        let runs =
            rows(next_runs, ["NEXT RUNS (LOCAL)", "UTC"], |run| [run.local.clone(), cell(&run.at)]);
        format!("{head}\n{runs}")
    }
}
