//! How each kind of answer looks as a table. `--output json` bypasses this and prints the
//! service's JSON as it came.
//!
//! Tables fit the [`Screen`]: `COLUMNS` when set, else the terminal's width; printed to a pipe
//! or a file they are not wrapped. Lists cut long texts (a title, a description, a result) to
//! one line with an ellipsis; `show` and `--output json` have them whole. Money reads as the
//! dashboard's does ([`usd`]).
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
use agentcore::domain::trigger::{self, Trigger};
use agentcore::domain::user::User;
use agentcore::domain::webhook::{self, Delivery, Webhook};
use agentcore::domain::workspace::{Member, Workspace};
use agentcore::{Connected, OauthUrl, Sent};

mod account;
mod agents;
pub(crate) mod events;
mod integrations;
mod teams;
#[cfg(test)]
mod tests;

pub(crate) use agents::Added;
pub(crate) use teams::InviteLink;

/// An answer as `--output table` prints it, within `screen`'s width.
pub(crate) trait Render {
    fn render(&self, screen: Screen) -> String;
}

/// Where a table is printed: how many columns it may take (`None`: as many as it needs, for a
/// pipe or a file, so that nothing a script reads is wrapped).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Screen {
    pub width: Option<u16>,
}

impl Screen {
    /// `COLUMNS` when set to a number (as `ls` and most tools honour it), else the width of
    /// the terminal standard output is, else none.
    pub(crate) fn detect() -> Self {
        let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<u16>().ok());
        let width = columns
            .filter(|&width| width > 0)
            .or_else(|| console::Term::stdout().size_checked().map(|(_, columns)| columns));
        Self { width }
    }

    fn table(self) -> Table {
        let mut table = Table::new();
        table
            .load_preset(presets::UTF8_HORIZONTAL_ONLY)
            .set_content_arrangement(ContentArrangement::Dynamic);
        if let Some(width) = self.width {
            table.set_width(width);
        }
        table
    }
}

/// Answers shown as field / value rows: every field of a flat object, in the order the JSON
/// object's keys print (serde_json keeps them sorted).
macro_rules! flat {
    ($($answer:ty),* $(,)?) => {$(
        impl Render for $answer {
            fn render(&self, screen: Screen) -> String {
                flat(screen, self)
            }
        }
    )*};
}

flat!(
    AgentStatusResponse,
    ApiKey,
    ApprovalDecided,
    Billing,
    Connected,
    Connection,
    ConnectionTest,
    Deleted,
    Delivery,
    Disconnected,
    Mapped,
    McpServer,
    Member,
    OauthUrl,
    Sent,
    StatusResponse,
    Task,
    Trigger,
    trigger::RotatedSecret,
    Unmapped,
    User,
    Webhook,
    webhook::RotatedSecret,
    Workspace,
);

/// One row per item under `headers`, its cells from `row`; `(none)` without items.
fn rows<T, const N: usize>(
    screen: Screen,
    items: &[T],
    headers: [&str; N],
    row: impl Fn(&T) -> [String; N],
) -> String {
    if items.is_empty() {
        return "(none)".to_owned();
    }
    let mut table = screen.table();
    table.set_header(headers);
    for item in items {
        table.add_row(row(item));
    }
    table.to_string()
}

/// Field / value rows, sorted by field as a JSON object's keys are.
fn fields<'a>(screen: Screen, rows: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let mut rows: Vec<(&str, String)> = rows.into_iter().collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    let mut table = screen.table();
    for (field, value) in rows {
        table.add_row([field.to_owned(), value]);
    }
    table.to_string()
}

/// Every field `value` serializes, as field / value rows (a value that is not an object, as
/// its cell).
fn flat(screen: Screen, value: &impl Serialize) -> String {
    match serde_json::to_value(value).unwrap_or_default() {
        Value::Object(object) => {
            fields(screen, object.iter().map(|(key, field)| (key.as_str(), text(field))))
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

/// The first line of `value`, at most 80 characters, with an ellipsis where it was cut.
fn short(value: &str) -> String {
    let line = value.lines().next().unwrap_or_default();
    let cut: String = line.chars().take(80).collect();
    if cut.len() < value.trim_end().len() { format!("{cut}…") } else { cut }
}

/// Micro-dollars as the dashboard's `usd` filter shows them: `$0.00`, `$12.50`; below one
/// cent four decimals (`$0.0042`), where one model call's cost would read as `$0.00`.
pub(crate) fn usd(micros: i64) -> String {
    match micros {
        1..10_000 => format!("${:.4}", micros as f64 / 1_000_000.0),
        _ => format!("${:.2}", micros as f64 / 1_000_000.0),
    }
}

/// Dollars as given in a setting (a budget), shown as [`usd`] shows money.
fn dollars(usd_amount: f64) -> String {
    usd(agentcore::domain::budget::micros(usd_amount))
}

/// The items of a comma-separated list, trimmed, empty ones dropped.
pub(crate) fn list_items(all: &str) -> Vec<String> {
    all.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}
