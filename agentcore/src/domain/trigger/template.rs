//! A trigger's task templates: text with `{{path}}` placeholders filled from a call's JSON body.
//!
//! The syntax is the whole language: `{{alert.name}}` is the body's `alert` object's `name`,
//! `{{items.0.title}}` the first item's title (a number picks an array's element, or an
//! object's key of that name). Spaces inside the braces are ignored. A lone `{` or `}` is text;
//! there is no escape, loop, condition or filter, so a hostile template can do no more than
//! name fields. A string is inserted as it is, a number or a boolean as JSON, an object or an
//! array as compact JSON; a missing field or `null` is empty.
//!
//! Bounds: at most [`MAX_PLACEHOLDERS`] placeholders, each path at most [`MAX_PATH_CHARS`]
//! characters and [`MAX_SEGMENTS`] segments; filling stops at the output's limit, so its work is
//! bounded by that limit whatever the body holds.

use serde_json::Value;

/// Placeholders in one template, at most.
pub const MAX_PLACEHOLDERS: usize = 32;
/// Characters of one placeholder's path, at most.
pub const MAX_PATH_CHARS: usize = 200;
/// Segments of one placeholder's path, at most.
pub const MAX_SEGMENTS: usize = 16;

/// A parsed template: its source and its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Field(Vec<String>),
}

impl Template {
    /// Parses `source`, or says what is wrong with it.
    pub fn parse(source: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = source;
        let mut fields = 0;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or_else(|| "has a '{{' without its '}}'".to_owned())?;
            let path = after[..close].trim();
            fields += 1;
            if fields > MAX_PLACEHOLDERS {
                return Err(format!("must have at most {MAX_PLACEHOLDERS} placeholders"));
            }
            parts.push(Part::Field(parse_path(path)?));
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Self { source: source.to_owned(), parts })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The template filled from `body`, at most `max_chars` characters (cut there).
    pub fn fill(&self, body: &Value, max_chars: usize) -> String {
        let mut out = Bounded { text: String::new(), chars: 0, max: max_chars };
        for part in &self.parts {
            if out.full() {
                break;
            }
            match part {
                Part::Text(text) => out.push(text),
                Part::Field(path) => match lookup(body, path) {
                    None | Some(Value::Null) => {}
                    Some(Value::String(text)) => out.push(text),
                    Some(other) => out.push(&other.to_string()),
                },
            }
        }
        out.text
    }
}

/// `a.b.0.c` as its segments; each non-empty, without braces or white space.
fn parse_path(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Err("has an empty placeholder '{{}}'".into());
    }
    if path.chars().count() > MAX_PATH_CHARS {
        return Err(format!("has a placeholder longer than {MAX_PATH_CHARS} characters"));
    }
    let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
    if segments.len() > MAX_SEGMENTS {
        return Err(format!("has a placeholder deeper than {MAX_SEGMENTS} fields"));
    }
    let bad = |s: &String| {
        s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control() || c == '{')
    };
    if let Some(segment) = segments.iter().find(|s| bad(s)) {
        return Err(format!(
            "has a placeholder '{{{{{path}}}}}' with a bad field name '{segment}': fields are \
             separated by '.', without spaces"
        ));
    }
    Ok(segments)
}

/// The value at `path` in `body`: an object's key, or an array's element by its index.
fn lookup<'a>(body: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(body, |value, segment| match value {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// Text that stops growing at `max` characters.
struct Bounded {
    text: String,
    chars: usize,
    max: usize,
}

impl Bounded {
    fn full(&self) -> bool {
        self.chars >= self.max
    }

    fn push(&mut self, piece: &str) {
        for c in piece.chars() {
            if self.full() {
                return;
            }
            self.text.push(c);
            self.chars += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use serde_json::json;

    use super::*;

    #[test]
    fn fills_fields_array_elements_and_values_of_each_kind() {
        let template =
            Template::parse("{{alert.name}} on {{ items.0.host }}: {{n}} {{ok}} {{tags}}").unwrap();
        let body = json!({
            "alert": {"name": "Disk full"}, "items": [{"host": "db-1"}],
            "n": 97.5, "ok": false, "tags": ["a", {"b": 1}]
        });
        assert_eq!(template.fill(&body, 200), r#"Disk full on db-1: 97.5 false ["a",{"b":1}]"#);
    }

    #[test]
    fn a_missing_field_or_null_is_empty_and_single_braces_are_text() {
        let template = Template::parse("{x} {{gone.deeper}}|{{nothing}}|{{0}}").unwrap();
        assert_eq!(template.fill(&json!({"nothing": null}), 200), "{x} ||");
    }

    #[test]
    fn filling_stops_at_the_limit_in_characters() {
        let template = Template::parse("é{{a}}{{a}}").unwrap();
        let body = json!({"a": "ü".repeat(10_000)});
        let filled = template.fill(&body, 5);
        assert_eq!(filled, "éüüüü");
    }

    #[test]
    fn bad_syntax_and_bounds_are_refused() {
        assert!(Template::parse("{{open").unwrap_err().contains("without its"));
        assert!(Template::parse("{{ }}").unwrap_err().contains("empty"));
        assert!(Template::parse("{{a..b}}").unwrap_err().contains("bad field"));
        assert!(Template::parse("{{a b}}").unwrap_err().contains("bad field"));
        let many = "{{a}}".repeat(MAX_PLACEHOLDERS + 1);
        assert!(Template::parse(&many).unwrap_err().contains("at most"));
        let deep = vec!["a"; MAX_SEGMENTS + 1].join(".");
        assert!(Template::parse(&format!("{{{{{deep}}}}}")).unwrap_err().contains("deeper"));
        assert!(Template::parse("plain text, no fields").is_ok());
    }
}
