//! How each kind of answer looks as a table. `--output json` bypasses this and prints the
//! service's JSON as it came.
//!
//! Every answer type says how it looks ([`Render`]): the lists and the answers with a view of
//! their own read their typed fields (a renamed field does not compile), and the flat answers
//! (statuses, a user, a task, billing...) show every field they serialize, as field / value
//! rows. A cell shows a value as its JSON would: strings as they are, `null` as `-`, anything
//! else (numbers, timestamps, lists) as compact JSON; odd types (ids, enums, timestamps, floats)
//! are serialized with serde, as the service serializes them, so the cells read as they did
//! when the tables were drawn from the JSON itself.

use comfy_table::{ContentArrangement, Table, presets};
use serde::Serialize;
use serde_json::Value;

use agentcore::api::{
    AgentStatusResponse, ApprovalDecided, ConnectionTest, Deleted, Disconnected, Mapped,
    StatusResponse, Unmapped,
};
use agentcore::domain::access::ApiKey;
use agentcore::domain::billing::Billing;
use agentcore::domain::chat::Connection;
use agentcore::domain::mcp::McpServer;
use agentcore::domain::task::Task;
use agentcore::domain::usage::BudgetView;
use agentcore::domain::user::User;
use agentcore::domain::workspace::{Member, Workspace};
use agentcore::{Connected, OauthUrl, Sent};

mod account;
mod agents;
pub(crate) mod events;
mod teams;
#[cfg(test)]
mod tests;

pub(crate) use teams::InviteLink;

/// An answer as `--output table` prints it.
pub(crate) trait Render {
    fn render(&self) -> String;
}

/// Answers shown as field / value rows: every field of a flat object, in the order the JSON
/// object's keys print (serde_json keeps them sorted).
macro_rules! flat {
    ($($answer:ty),* $(,)?) => {$(
        impl Render for $answer {
            fn render(&self) -> String {
                flat(self)
            }
        }
    )*};
}

flat!(
    AgentStatusResponse,
    ApiKey,
    ApprovalDecided,
    Billing,
    BudgetView,
    Connected,
    Connection,
    ConnectionTest,
    Deleted,
    Disconnected,
    Mapped,
    McpServer,
    Member,
    OauthUrl,
    Sent,
    StatusResponse,
    Task,
    Unmapped,
    User,
    Workspace,
);

fn table() -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_HORIZONTAL_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    table
}

/// One row per item under `headers`, its cells from `row`; `(none)` without items.
fn rows<T, const N: usize>(
    items: &[T],
    headers: [&str; N],
    row: impl Fn(&T) -> [String; N],
) -> String {
    if items.is_empty() {
        return "(none)".to_owned();
    }
    let mut table = table();
    table.set_header(headers);
    for item in items {
        table.add_row(row(item));
    }
    table.to_string()
}

/// Field / value rows, sorted by field as a JSON object's keys are.
fn fields<'a>(rows: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let mut rows: Vec<(&str, String)> = rows.into_iter().collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    let mut table = table();
    for (field, value) in rows {
        table.add_row([field.to_owned(), value]);
    }
    table.to_string()
}

/// Every field `value` serializes, as field / value rows (a value that is not an object, as
/// its cell).
fn flat(value: &impl Serialize) -> String {
    match serde_json::to_value(value).unwrap_or_default() {
        Value::Object(object) => {
            fields(object.iter().map(|(key, field)| (key.as_str(), text(field))))
        }
        other => text(&other),
    }
}

/// A cell of any serializable value (an id, a status, a timestamp, a number, a list): as the
/// service's JSON shows it.
fn cell(value: &impl Serialize) -> String {
    text(&serde_json::to_value(value).unwrap_or_default())
}

/// A cell: strings as they are, `null` as `-`, anything else as compact JSON.
fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
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
