//! `post_message`: a message to the agent's Discord channel, queued through the outbox with
//! its step (the effect is applied by the store; see [`Effect::Post`]).

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Prepared, object, parse};
use crate::domain::chat::{NewPost, OutgoingMessage};
use crate::domain::steps::Effect;
use crate::domain::tool_result::ToolError;

pub(super) fn info() -> (String, Value) {
    let description = format!(
        "Posts a message to your team's Discord channel. Give `content` (up to {} characters), \
         or an embed with `embed_title` and `embed_description`, or both.",
        OutgoingMessage::MAX_CONTENT
    );
    let parameters = object(
        json!({
            "content": {"type": "string", "maxLength": OutgoingMessage::MAX_CONTENT},
            "embed_title": {"type": "string", "maxLength": OutgoingMessage::MAX_TITLE},
            "embed_description": {"type": "string", "maxLength": OutgoingMessage::MAX_DESCRIPTION},
        }),
        &[],
    );
    (description, parameters)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    content: Option<String>,
    embed_title: Option<String>,
    embed_description: Option<String>,
}

pub(super) fn prepare(arguments: &str) -> Result<Prepared, ToolError> {
    let args: Args = parse(arguments)?;
    let field = |name: &str, value: Option<String>, check: fn(&str) -> Result<String, String>| {
        value
            .map(|v| check(&v).map_err(|e| ToolError::invalid_arguments(format!("{name} {e}"))))
            .transpose()
    };
    let content = field("content", args.content, OutgoingMessage::content)?;
    let title = field("embed_title", args.embed_title, OutgoingMessage::embed_title)?;
    let description =
        field("embed_description", args.embed_description, OutgoingMessage::embed_description)?;
    let message = OutgoingMessage::new(content, title, description, None).ok_or_else(|| {
        ToolError::invalid_arguments("give content, or an embed_title or embed_description")
    })?;
    Ok(Prepared::Effect(Effect::Post(NewPost::new(message.body()))))
}
