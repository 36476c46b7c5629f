//! How each kind of answer looks as a table. `--output json` bypasses this and prints the
//! service's JSON as it came.

use comfy_table::{ContentArrangement, Table, presets};
use serde_json::Value;

/// The kinds of answer, one renderer each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// Any flat object as field / value rows: statuses, a user, a task, billing.
    Fields,
    Session,
    Agents,
    Agent,
    Tasks,
    Steps,
    Memory,
    Tools,
    McpServers,
    McpTools,
    Schedules,
    Schedule,
    Usage,
    Activity,
    Templates,
    Onboarded,
    Connections,
    Channels,
    Mappings,
}

impl View {
    pub(crate) fn render(self, value: &Value) -> String {
        match self {
            View::Fields => fields(value, &[]),
            View::Session => {
                let user = &value["user"];
                format!(
                    "Logged in as {} <{}> ({}).",
                    text(&user["name"]),
                    text(&user["email"]),
                    text(&user["id"])
                )
            }
            View::Agents => rows(
                &value["agents"],
                &[
                    ("ID", "id"),
                    ("NAME", "name"),
                    ("STATUS", "status"),
                    ("CHANNEL", "channel"),
                    ("WORKSPACE", "workspace"),
                    ("MODEL", "model"),
                    ("QUEUED", "backlog_summary.queued"),
                    ("RUNNING", "backlog_summary.in_progress"),
                    ("WAITING", "backlog_summary.awaiting_approval"),
                    ("DONE", "backlog_summary.complete"),
                    ("FAILED", "backlog_summary.failed"),
                ],
            ),
            View::Agent => {
                let agent = fields(value, &["backlog", "backlog_summary"]);
                let backlog = View::Tasks.render(&serde_json::json!({"tasks": value["backlog"]}));
                format!("{agent}\nBacklog:\n{backlog}")
            }
            View::Tasks => rows(
                &value["tasks"],
                &[
                    ("ID", "id"),
                    ("TITLE", "title"),
                    ("STATUS", "status"),
                    ("PRIORITY", "priority"),
                    ("ATTEMPTS", "attempts"),
                    ("CREATED", "created_at"),
                ],
            ),
            View::Steps => steps(&value["steps"]),
            View::Memory => {
                let memory = text(&value["memory"]);
                let used =
                    format!("({} of {} characters)", text(&value["chars"]), text(&value["limit"]));
                if memory.is_empty() {
                    format!("(empty) {used}")
                } else {
                    format!("{memory}\n{used}")
                }
            }
            View::Tools => {
                let builtin = rows(
                    &value["tools"],
                    &[("NAME", "name"), ("EFFECT", "effect"), ("DESCRIPTION", "description")],
                );
                let servers = value["mcp_servers"].as_array().cloned().unwrap_or_default();
                let mcp: Vec<String> = servers.iter().map(|s| View::McpTools.render(s)).collect();
                [builtin].into_iter().chain(mcp).collect::<Vec<_>>().join("\n")
            }
            View::McpServers => {
                let own = rows(
                    &value["servers"],
                    &[
                        ("NAME", "name"),
                        ("URL", "url"),
                        ("TOKEN", "has_token"),
                        ("ADDED", "created_at"),
                    ],
                );
                let names: Vec<String> = value["operator_servers"]
                    .as_array()
                    .map(|a| a.iter().map(text).collect())
                    .unwrap_or_default();
                let operator =
                    if names.is_empty() { "(none)".to_owned() } else { names.join(", ") };
                format!("{own}\nThe operator's servers: {operator}")
            }
            View::McpTools => {
                let head =
                    format!("MCP server {} ({})", text(&value["server"]), text(&value["origin"]));
                let warning = match value.get("warning").filter(|w| !w.is_null()) {
                    Some(warning) => format!("\nWarning: {}", text(warning)),
                    None => String::new(),
                };
                match value.get("error").filter(|e| !e.is_null()) {
                    Some(error) => format!("{head}: unreachable: {}", text(error)),
                    None => format!(
                        "{head}:\n{}{warning}",
                        rows(&value["tools"], &[("NAME", "name"), ("DESCRIPTION", "description")])
                    ),
                }
            }
            View::Schedules => {
                let mut listed = value["schedules"].clone();
                for schedule in listed.as_array_mut().into_iter().flatten() {
                    let next = schedule["next_runs"][0]["local"].clone();
                    schedule["next_run"] = if next.is_null() { "(off)".into() } else { next };
                }
                rows(
                    &listed,
                    &[
                        ("ID", "id"),
                        ("CRON", "cron"),
                        ("ZONE", "timezone"),
                        ("TITLE", "title"),
                        ("ENABLED", "enabled"),
                        ("NEXT RUN (LOCAL)", "next_run"),
                        ("LAST FIRED", "last_fired_at"),
                    ],
                )
            }
            View::Schedule => {
                let head = fields(value, &["next_runs"]);
                let runs =
                    rows(&value["next_runs"], &[("NEXT RUNS (LOCAL)", "local"), ("UTC", "at")]);
                format!("{head}\n{runs}")
            }
            View::Usage => {
                let columns = [
                    ("GROUP", "key"),
                    ("INPUT TOKENS", "input_tokens"),
                    ("OUTPUT TOKENS", "output_tokens"),
                    ("COST (USD)", "cost_usd"),
                    ("TASKS", "tasks"),
                    ("CALLS", "steps"),
                    ("UNPRICED CALLS", "unpriced_steps"),
                ];
                let mut listed = value["rows"].as_array().cloned().unwrap_or_default();
                let mut total = value["total"].clone();
                total["key"] = "(total)".into();
                listed.push(total);
                format!(
                    "Usage from {} to {}\n{}",
                    text(&value["from"]),
                    text(&value["to"]),
                    rows(&Value::Array(listed), &columns)
                )
            }
            View::Activity => rows(
                &value["entries"],
                &[
                    ("TIME", "timestamp"),
                    ("ACTION", "action"),
                    ("TASK", "task_id"),
                    ("DETAILS", "details"),
                ],
            ),
            View::Templates => rows(
                &value["templates"],
                &[
                    ("ID", "id"),
                    ("NAME", "name"),
                    ("CHANNEL", "channel"),
                    ("DESCRIPTION", "description"),
                ],
            ),
            View::Onboarded => format!(
                "Created agent {} ({}, {}) posting to #{}, with its first task queued: {} ({}).",
                text(&value["agent"]["id"]),
                text(&value["agent"]["name"]),
                text(&value["agent"]["status"]),
                text(&value["agent"]["channel"]),
                text(&value["task"]["title"]),
                text(&value["task"]["id"]),
            ),
            View::Connections => rows(
                &value["connections"],
                &[
                    ("GUILD", "guild_id"),
                    ("NAME", "guild_name"),
                    ("KIND", "kind"),
                    ("CHANNELS", "channel_count"),
                    ("CONNECTED", "connected_at"),
                ],
            ),
            View::Channels => rows(
                &value["channels"],
                &[("ID", "id"), ("NAME", "name"), ("POSITION", "position")],
            ),
            View::Mappings => rows(
                &value["mappings"],
                &[
                    ("AGENT", "agent_id"),
                    ("GUILD", "guild_id"),
                    ("CHANNEL", "channel_id"),
                    ("NAME", "channel_name"),
                ],
            ),
        }
    }
}

fn table() -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_HORIZONTAL_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    table
}

/// One row per element of `items`, one column per `(header, dotted path)`.
fn rows(items: &Value, columns: &[(&str, &str)]) -> String {
    let items = items.as_array().map(Vec::as_slice).unwrap_or_default();
    if items.is_empty() {
        return "(none)".to_owned();
    }
    let mut table = table();
    table.set_header(columns.iter().map(|(header, _)| *header));
    for item in items {
        table.add_row(columns.iter().map(|(_, path)| text(at(item, path))));
    }
    table.to_string()
}

/// Field / value rows of an object, leaving out `skip`.
fn fields(value: &Value, skip: &[&str]) -> String {
    let Some(object) = value.as_object() else {
        return text(value);
    };
    let mut table = table();
    for (key, field) in object.iter().filter(|(key, _)| !skip.contains(&key.as_str())) {
        table.add_row([key.clone(), text(field)]);
    }
    table.to_string()
}

fn at<'a>(value: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(value, |value, key| &value[key])
}

/// A cell: strings as they are, `null` as `-`, anything else as compact JSON.
/// A run's transcript: one row a step; a model step shows the calls it asked for, a tool step
/// its arguments; long texts are cut to a line.
fn steps(items: &Value) -> String {
    let items = items.as_array().map(Vec::as_slice).unwrap_or_default();
    if items.is_empty() {
        return "(none)".to_owned();
    }
    let mut table = table();
    table.set_header(["#", "KIND", "CALL", "RESULT", "MS", "TOKENS"]);
    for step in items {
        let call = match step["kind"].as_str() {
            Some("tool") => {
                format!("{}({})", text(&step["tool"]), short(&text(&step["arguments"])))
            }
            _ => {
                let calls: Vec<String> = step["tool_calls"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|c| text(&c["name"]))
                    .collect();
                if calls.is_empty() { "-".into() } else { format!("→ {}", calls.join(", ")) }
            }
        };
        let result = match &step["error"] {
            Value::Null => short(&text(&step["output"])),
            error => format!("error: {}", short(&text(error))),
        };
        let tokens = match &step["usage"] {
            Value::Null => "-".into(),
            usage => format!("{}/{}", text(&usage["input_tokens"]), text(&usage["output_tokens"])),
        };
        table.add_row([
            text(&step["seq"]),
            text(&step["kind"]),
            call,
            result,
            text(&step["duration_ms"]),
            tokens,
        ]);
    }
    table.to_string()
}

/// The first line of `value`, at most 80 characters.
fn short(value: &str) -> String {
    let line = value.lines().next().unwrap_or_default();
    let cut: String = line.chars().take(80).collect();
    if cut.len() < value.len() { format!("{cut}…") } else { cut }
}

/// The items of a comma-separated list, trimmed, empty ones dropped.
pub(crate) fn list_items(all: &str) -> Vec<String> {
    all.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_render_their_columns_and_empty_ones_say_so() {
        let agents = json!({"agents": [{"id": "writer", "name": "Writer", "status": "idle", "channel": "news",
            "workspace": null, "model": null, "backlog_summary": {"queued": 2, "in_progress": 0, "complete": 1, "failed": 0}}]});
        let table = View::Agents.render(&agents);
        for expected in ["ID", "QUEUED", "writer", "Writer", "idle", "news", "2"] {
            assert!(table.contains(expected), "{expected} missing from\n{table}");
        }
        assert_eq!(View::Tasks.render(&json!({"tasks": []})), "(none)");
        assert!(
            View::Fields.render(&json!({"plan": "free", "agent_limit": 3})).contains("agent_limit")
        );
    }
}
