//! Pages from templates: the template set compiled into the binary, the values every page
//! gets, Markdown for untrusted text, and errors shown in words.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use minijinja::{Environment, Value, context};
use pulldown_cmark::{Event, Options, Parser, html};
use serde::Serialize;

use crate::error::ApiError;

use super::assets;

/// Every template, by name; `.html` names are auto-escaped.
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("../../templates/base.html")),
    ("macros.html", include_str!("../../templates/macros.html")),
    ("error.html", include_str!("../../templates/error.html")),
    ("login.html", include_str!("../../templates/login.html")),
    ("register.html", include_str!("../../templates/register.html")),
    ("agents.html", include_str!("../../templates/agents.html")),
    ("agent_rows.html", include_str!("../../templates/agent_rows.html")),
    ("agent.html", include_str!("../../templates/agent.html")),
    ("agent_live.html", include_str!("../../templates/agent_live.html")),
    ("task.html", include_str!("../../templates/task.html")),
    ("discord.html", include_str!("../../templates/discord.html")),
    ("guild.html", include_str!("../../templates/guild.html")),
    ("onboarding.html", include_str!("../../templates/onboarding.html")),
    ("usage.html", include_str!("../../templates/usage.html")),
    ("team.html", include_str!("../../templates/team.html")),
    ("invite.html", include_str!("../../templates/invite.html")),
    ("models.html", include_str!("../../templates/models.html")),
    ("agent_limit.html", include_str!("../../templates/agent_limit.html")),
    ("confirm.html", include_str!("../../templates/confirm.html")),
    ("agent_triggers.html", include_str!("../../templates/agent_triggers.html")),
    ("webhooks.html", include_str!("../../templates/webhooks.html")),
    ("webhook.html", include_str!("../../templates/webhook.html")),
];

static TEMPLATE_SET: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    for (name, source) in TEMPLATES {
        if let Err(error) = env.add_template(name, source) {
            // A template that does not parse is a build mistake; the unit test below catches
            // it, and at run time the page says so instead of the server failing.
            tracing::error!(template = name, %error, "a dashboard template does not parse");
        }
    }
    env.set_formatter(escape);
    env.add_filter("markdown", |text: Option<String>| {
        Value::from_safe_string(markdown(&text.unwrap_or_default()))
    });
    env.add_filter("truncate", |text: String, chars: usize| match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    });
    // Cents, except below one cent, where a single model call's cost would read as $0.00.
    env.add_filter("usd", |micros: i64| match micros {
        1..10_000 => format!("${:.4}", micros as f64 / 1_000_000.0),
        _ => format!("${:.2}", micros as f64 / 1_000_000.0),
    });
    // A time in the viewer's zone (or the one named), with its label (`zone.rs`).
    env.add_filter("when", |at: String, zone: Option<String>| {
        super::zone::show(&at, zone.as_deref())
    });
    env.add_global("htmx_path", Value::from_safe_string(assets::HTMX.path()));
    env.add_global("live_path", Value::from_safe_string(assets::LIVE.path()));
    // The server's time when the page was made: live.js measures the browser's clock against
    // it, so elapsed times read right on a machine whose clock is off.
    env.add_function("now", || {
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    });
    env.add_global("style_path", Value::from_safe_string(assets::STYLE.path()));
    env
});

/// HTML escaping of `& < > " '` only: minijinja's own also escapes `/`, which is harmless but
/// makes every URL in an attribute unreadable in the page source.
fn escape(
    out: &mut minijinja::Output<'_>,
    state: &minijinja::State<'_, '_>,
    value: &Value,
) -> Result<(), minijinja::Error> {
    if value.is_safe()
        || value.is_undefined()
        || value.is_none()
        || !matches!(state.auto_escape(), minijinja::AutoEscape::Html)
    {
        return minijinja::escape_formatter(out, state, value);
    }
    let text = value.to_string();
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    out.write_str(&escaped).map_err(|_| {
        minijinja::Error::new(minijinja::ErrorKind::WriteFailure, "the page could not be written")
    })
}

/// A page (or a fragment of one) and its status.
#[derive(Debug)]
pub(super) struct Page {
    pub template: &'static str,
    pub values: Value,
    pub status: StatusCode,
}

impl Page {
    pub(super) fn new(template: &'static str, values: Value) -> Self {
        Self { template, values, status: StatusCode::OK }
    }

    pub(super) fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        match render(self.template, &self.values) {
            Ok(html) => (self.status, Html(html)).into_response(),
            Err(error) => {
                tracing::error!(template = self.template, %error, "a dashboard page failed to render");
                (StatusCode::INTERNAL_SERVER_ERROR, "The page could not be rendered.")
                    .into_response()
            }
        }
    }
}

/// `template` with `values`, and the message a form left for this page (`flash`), if any.
pub(super) fn render(template: &str, values: &Value) -> Result<String, minijinja::Error> {
    let template = TEMPLATE_SET.get_template(template)?;
    template.render(context! { flash => super::flash::take(), ..values.clone() })
}

/// A whole page for an error that has no form to stand beside: its status and its words.
/// The page carries its error ([`ShownError`]), so the outermost layer (`errors.rs`) can show it
/// again with the navigation of whoever is signed in.
pub(super) fn error_page(error: &ApiError) -> Response {
    error.log();
    let body = error.body(&crate::request_id::current().unwrap_or_default()).error;
    let shown = ShownError { code: body.code, message: body.message, request_id: body.request_id };
    let page = Page::new("error.html", shown.values()).with_status(error.status());
    let mut response = page.into_response();
    response.extensions_mut().insert(shown);
    response
}

/// An error as its page shows it.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub(super) struct ShownError {
    pub code: String,
    pub message: String,
    #[serde(default)]
    pub request_id: String,
}

impl ShownError {
    pub(super) fn values(&self) -> Value {
        context! { code => self.code, message => self.message, request_id => self.request_id }
    }
}

/// What a refused form shows: a sentence at the top and, for each field the API named, its
/// problem beside that field.
#[derive(Debug, Default, Serialize)]
pub(super) struct FormErrors {
    pub message: Option<String>,
    pub fields: BTreeMap<String, String>,
}

impl FormErrors {
    pub(super) fn of(error: &ApiError) -> Self {
        error.log();
        let body = error.body(&crate::request_id::current().unwrap_or_default()).error;
        Self { message: Some(body.message), fields: body.details.unwrap_or_default() }
    }
}

/// Markdown from a model (untrusted) as HTML: raw HTML in it is shown as text, never passed
/// through, and links keep only safe schemes.
pub(super) fn markdown(text: &str) -> String {
    let events = Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).map(
        |event| match event {
            Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
            Event::Start(pulldown_cmark::Tag::Link { link_type, dest_url, title, id }) => {
                let dest_url = if safe_url(&dest_url) { dest_url } else { "#".into() };
                Event::Start(pulldown_cmark::Tag::Link { link_type, dest_url, title, id })
            }
            Event::Start(pulldown_cmark::Tag::Image { dest_url, title, .. }) => {
                // Images would make the viewer's browser fetch a model-chosen address.
                Event::Text(format!("[image: {title} {dest_url}]").into())
            }
            other => other,
        },
    );
    let mut out = String::new();
    html::push_html(&mut out, events);
    out
}

fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    lower.starts_with("https://")
        || lower.starts_with("http://")
        || lower.starts_with("mailto:")
        || lower.starts_with('#')
        || (!lower.contains(':') && !lower.starts_with("//"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses() {
        for (name, _) in TEMPLATES {
            assert!(TEMPLATE_SET.get_template(name).is_ok(), "{name} does not parse");
        }
    }

    #[test]
    fn raw_html_in_markdown_is_text() {
        let out = markdown(
            "Done.\n\n<script>alert(1)</script>\n\nand <img src=x onerror=alert(1)> inline",
        );
        assert!(!out.contains("<script"), "{out}");
        assert!(!out.contains("<img"), "{out}");
        assert!(out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{out}");
    }

    #[test]
    fn values_in_pages_are_escaped_but_urls_stay_readable() {
        let source = "<a href=\"/agents/{{ id }}\" title=\"{{ t }}\">{{ t }}</a>";
        let template = TEMPLATE_SET.template_from_named_str("probe.html", source).unwrap();
        let page = template.render(context! { id => "a-b", t => "<b>\"x\" & 'y'</b>" }).unwrap();
        let text = "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;";
        assert_eq!(page, format!("<a href=\"/agents/a-b\" title=\"{text}\">{text}</a>"));
    }

    #[test]
    fn markdown_formats_and_links_keep_safe_schemes_only() {
        let out = markdown(
            "# Title\n\n**bold** [a](https://example.com) [b](javascript:alert(1)) ![i](https://x/y.png)",
        );
        assert!(out.contains("<h1>Title</h1>") && out.contains("<strong>bold</strong>"), "{out}");
        assert!(out.contains("href=\"https://example.com\""), "{out}");
        assert!(!out.contains("javascript:"), "{out}");
        assert!(!out.contains("<img"), "{out}");
    }
}
