//! `read_channel`: the latest messages of the agent's Discord channel, read over Discord REST
//! by the facade when the runtime runs the call.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Prepared, object, parse};
use crate::domain::tool_result::ToolError;

/// Messages `read_channel` returns unless asked for another number, and at most.
pub const READ_CHANNEL_DEFAULT: u8 = 20;
pub const READ_CHANNEL_MAX: u8 = 50;

pub(super) fn info() -> (String, Value) {
    let description = "Reads the latest messages of your team's Discord channel: author and \
                       text, newest first.";
    let parameters = object(
        json!({
            "limit": {"type": "integer", "minimum": 1, "maximum": READ_CHANNEL_MAX,
                      "description": format!("{READ_CHANNEL_DEFAULT} when left out")},
        }),
        &[],
    );
    (description.to_owned(), parameters)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    limit: Option<i64>,
}

pub(super) fn prepare(arguments: &str) -> Result<Prepared, ToolError> {
    let args: Args = parse(arguments)?;
    let limit = args.limit.unwrap_or(i64::from(READ_CHANNEL_DEFAULT));
    u8::try_from(limit)
        .ok()
        .filter(|l| (1..=READ_CHANNEL_MAX).contains(l))
        .map(|limit| Prepared::ReadChannel { limit })
        .ok_or_else(|| {
            ToolError::invalid_arguments(format!("limit must be from 1 to {READ_CHANNEL_MAX}"))
        })
}
