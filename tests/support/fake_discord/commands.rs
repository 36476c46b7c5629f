//! Slash commands as the tests write them and as the fake checks them: builders of the
//! payloads Discord sends for a command, an autocomplete or a click, and Discord's validation
//! of the commands an application registers.

use std::collections::HashSet;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::interactions::snowflake_of;

/// A slash command (type 2) with these options (`[]` or null for none).
pub fn slash(name: &str, options: Value) -> Value {
    command(2, name, options)
}

/// A slash command's subcommand `sub`, with these options.
pub fn subcommand(command_name: &str, sub: &str, options: Value) -> Value {
    let options = if options.is_null() { json!([]) } else { options };
    command(2, command_name, json!([{"type": 1, "name": sub, "options": options}]))
}

/// A filled option: type 3 (string), 4 (integer), 5 (boolean) or 10 (number) by the value.
pub fn option(name: &str, value: Value) -> Value {
    let kind = match &value {
        Value::Number(n) if n.is_f64() => 10,
        Value::Number(_) => 4,
        Value::Bool(_) => 5,
        _ => 3,
    };
    json!({"name": name, "type": kind, "value": value})
}

/// An autocomplete request (type 4): the user is typing `partial` into the string option
/// `focused` of the command (or of its subcommand `sub`).
pub fn autocomplete(command_name: &str, sub: Option<&str>, focused: &str, partial: &str) -> Value {
    let focused = json!([{"name": focused, "type": 3, "value": partial, "focused": true}]);
    let options = match sub {
        Some(sub) => json!([{"type": 1, "name": sub, "options": focused}]),
        None => focused,
    };
    command(4, command_name, options)
}

/// An interaction of `kind` (2: the command, 4: autocomplete) on a chat input command.
fn command(kind: u8, name: &str, options: Value) -> Value {
    let id = snowflake_of(&format!("command:{name}"));
    let mut data = json!({"id": id, "name": name, "type": 1});
    if options.as_array().is_some_and(|o| !o.is_empty()) {
        data["options"] = options;
    }
    json!({"type": kind, "data": data})
}

/// A click (type 3, MESSAGE_COMPONENT) on the button `custom_id` of the message; the fake
/// fills in the message as stored when the bot posted it.
pub fn button(custom_id: &str, message_id: &str) -> Value {
    json!({"type": 3, "data": {"custom_id": custom_id, "component_type": 2},
        "message": {"id": message_id, "content": "", "embeds": [], "components": []}})
}

/// The first violation found: where (the path in the body), Discord's code, and its message.
pub(super) type Violation = (Vec<String>, &'static str, &'static str);

/// Discord's 400 for a form that fails validation, the violation nested at its path.
pub(super) fn invalid_form((path, code, message): Violation) -> Response {
    let leaf = json!({"_errors": [{"code": code, "message": message}]});
    let nest = |inner, key: &String| Value::Object(Map::from_iter([(key.clone(), inner)]));
    let errors = path.iter().rev().fold(leaf, nest);
    let body = json!({"code": 50035, "message": "Invalid Form Body", "errors": errors});
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

/// Commands (`top`, at most 100) or their options (at most 25; recursively through
/// subcommands and groups) as Discord validates them: unique names matching
/// `^[-_a-z0-9]{1,32}$` and descriptions of 1 to 100 characters (for chat input commands),
/// required options before optional ones.
pub(super) fn check_items(items: &Value, path: Vec<String>, top: bool) -> Result<(), Violation> {
    if items.is_null() && !top {
        return Ok(());
    }
    let Some(items) = items.as_array() else {
        return Err((path, "MODEL_TYPE_CONVERT", "Only iterables may be used in a ListType"));
    };
    if items.len() > if top { 100 } else { 25 } {
        return Err((path, "BASE_TYPE_MAX_LENGTH", "Must be fewer in length."));
    }
    let (mut names, mut optional_seen) = (HashSet::new(), false);
    for (i, item) in items.iter().enumerate() {
        let at = |field: &str| [&path[..], &[i.to_string(), field.to_owned()]].concat();
        let kind = item["type"].as_u64().or(top.then_some(1));
        let name = item["name"].as_str().unwrap_or_default();
        let chat_input = !top || kind == Some(1);
        let length_ok = (1..=32).contains(&name.chars().count());
        if !(if chat_input { valid_name(name) } else { length_ok }) {
            return Err((at("name"), "APPLICATION_COMMAND_INVALID_NAME", "Invalid name"));
        }
        if !names.insert((if top { kind } else { None }, name)) {
            return Err((at("name"), "APPLICATION_COMMANDS_DUPLICATE_NAME", "Duplicate name"));
        }
        if !chat_input {
            continue;
        }
        if !item["description"].as_str().is_some_and(|d| (1..=100).contains(&d.chars().count())) {
            return Err((at("description"), "BASE_TYPE_BAD_LENGTH", "Must be 1 to 100 long."));
        }
        let required = item["required"].as_bool().unwrap_or(false);
        match kind {
            _ if top => check_items(&item["options"], at("options"), false)?,
            Some(1 | 2) => check_items(&item["options"], at("options"), false)?,
            Some(3..=11) if required && optional_seen => {
                let message = "Required options must be placed before non-required options";
                return Err((
                    at("required"),
                    "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID",
                    message,
                ));
            }
            Some(3..=11) => optional_seen |= !required,
            _ => return Err((at("type"), "BASE_TYPE_CHOICES", "Value must be one of 1..11.")),
        }
    }
    Ok(())
}

/// `^[-_a-z0-9]{1,32}$`.
fn valid_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_'))
}
