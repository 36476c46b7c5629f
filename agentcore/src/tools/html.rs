//! HTML to readable text, by hand: a small tokenizer that keeps the text a person would read.
//!
//! Scripts, styles, `<noscript>`, `<template>` and the `<head>` (except its `<title>`) are
//! dropped; block elements become line breaks, list items `- ` bullets; a link's address follows
//! its text in parentheses, resolved against the page's address (http and https links only, and
//! not when the text already is the address), so an agent can follow it; the common entities are
//! decoded; runs of whitespace become one space and blank lines are collapsed. It does not build
//! a tree, so broken markup degrades to more or less text, never to an error.

use reqwest::Url;

/// Elements whose content is never shown.
const HIDDEN: [&str; 4] = ["script", "style", "noscript", "template"];

/// Elements that stand apart from what surrounds them by a blank line.
const PARAGRAPHS: [&str; 26] = [
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "ul",
    "ol",
    "dl",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "main",
    "aside",
    "blockquote",
    "pre",
    "hr",
    "figure",
    "form",
    "address",
    "details",
    "fieldset",
];

/// Elements that start on a line of their own.
const LINES: [&str; 10] =
    ["div", "br", "li", "tr", "dt", "dd", "option", "summary", "caption", "figcaption"];

/// The readable text of an HTML document found at `page`.
pub(super) fn to_text(html: &str, page: &Url) -> String {
    let mut text = Text::default();
    let mut in_head = false;
    // The open link's address, and where its text starts in the output.
    let mut link: Option<(String, usize)> = None;
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        if !in_head {
            text.push_decoded(&rest[..at]);
        }
        rest = &rest[at..];
        let Some(tag) = Tag::parse(rest) else {
            if !in_head {
                text.push_decoded("<");
            }
            rest = &rest[1..];
            continue;
        };
        rest = &rest[tag.len..];
        match (tag.name.as_str(), tag.closing) {
            ("head", false) => in_head = true,
            ("head", true) | ("body", false) => in_head = false,
            ("title", false) => {
                let (title, after) = raw_content(rest, "title");
                text.push_decoded(title);
                text.line_break(2);
                rest = after;
            }
            (name, false) if HIDDEN.contains(&name) => rest = raw_content(rest, name).1,
            ("a", false) => {
                let target = tag.href.as_deref().and_then(|href| followable(page, href));
                link = target.map(|target| (target, text.out.len()));
            }
            ("a", true) => {
                if let Some((target, from)) = link.take() {
                    let shown = text.out.get(from..).unwrap_or("").trim();
                    if !shown.is_empty() && shown != target {
                        text.push_str(&format!(" ({target})"));
                    }
                }
            }
            (name, closing) => text.element(name, closing),
        }
    }
    if !in_head {
        text.push_decoded(rest);
    }
    text.finish()
}

/// A start or end tag, or something skipped whole (comment, doctype, processing instruction),
/// which has an empty name.
#[derive(Debug)]
struct Tag {
    name: String,
    closing: bool,
    /// A start tag's `href` attribute, entities decoded.
    href: Option<String>,
    /// Bytes from `<` to past `>`.
    len: usize,
}

impl Tag {
    /// The tag at the start of `html` (which starts with `<`), or `None` when the `<` starts no
    /// tag and is text.
    fn parse(html: &str) -> Option<Tag> {
        let skipped = |len| Some(Tag { name: String::new(), closing: false, href: None, len });
        if let Some(comment) = html.strip_prefix("<!--") {
            return skipped(comment.find("-->").map_or(html.len(), |end| 4 + end + 3));
        }
        if html.starts_with("<!") || html.starts_with("<?") {
            return skipped(html.find('>').map_or(html.len(), |end| end + 1));
        }
        let closing = html.starts_with("</");
        let start = if closing { 2 } else { 1 };
        let name_len =
            html[start..].find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(html.len() - start);
        let name = &html[start..start + name_len];
        if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return None;
        }
        let attributes_len = tag_end(&html[start + name_len..]);
        let attributes = &html[start + name_len..start + name_len + attributes_len];
        let href = if closing { None } else { attribute(attributes, "href") };
        let len = start + name_len + attributes_len;
        Some(Tag { name: name.to_ascii_lowercase(), closing, href, len })
    }
}

/// The value of attribute `name` (lowercase) among a tag's `attributes`, entities decoded.
fn attribute(attributes: &str, name: &str) -> Option<String> {
    let mut rest = attributes;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '/');
        let key_len = rest.find(|c: char| c.is_whitespace() || "=>/".contains(c))?;
        let (key, after) = rest.split_at(key_len);
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('=') {
            None => ("", after),
            Some(value) => {
                let value = value.trim_start();
                match value.chars().next() {
                    Some(quote @ ('"' | '\'')) => {
                        let end = value[1..].find(quote).map_or(value.len(), |end| end + 1);
                        (&value[1..end], value.get(end + 1..).unwrap_or(""))
                    }
                    _ => {
                        let end = value
                            .find(|c: char| c.is_whitespace() || c == '>')
                            .unwrap_or(value.len());
                        value.split_at(end)
                    }
                }
            }
        };
        if key.eq_ignore_ascii_case(name) {
            let mut decoded = Text::default();
            decoded.push_decoded(value);
            return Some(decoded.finish());
        }
        if next.len() == rest.len() {
            return None;
        }
        rest = next;
    }
}

/// The address a link points to, when an agent could fetch it: resolved against `page`,
/// http or https, without its fragment.
fn followable(page: &Url, href: &str) -> Option<String> {
    let mut target = page.join(href.trim()).ok()?;
    if !matches!(target.scheme(), "http" | "https") {
        return None;
    }
    target.set_fragment(None);
    Some(target.to_string())
}

/// Bytes up to past the `>` that ends a tag's attributes (quoted values may hold a `>`).
fn tag_end(attributes: &str) -> usize {
    let mut quote = None;
    for (at, c) in attributes.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), _) if q == c => quote = None,
            (None, '>') => return at + 1,
            _ => {}
        }
    }
    attributes.len()
}

/// The content of a raw-text element up to its end tag `</name`, and what follows that tag.
fn raw_content<'a>(html: &'a str, name: &str) -> (&'a str, &'a str) {
    let mut from = 0;
    while let Some(at) = html[from..].find("</").map(|at| from + at) {
        let after = &html[at + 2..];
        let is_end =
            after.get(..name.len()).is_some_and(|candidate| candidate.eq_ignore_ascii_case(name));
        if is_end {
            let rest = &html[at..];
            return (&html[..at], &rest[rest.find('>').map_or(rest.len(), |end| end + 1)..]);
        }
        from = at + 2;
    }
    (html, "")
}

/// The text being written: whitespace is collapsed as it comes.
#[derive(Debug, Default)]
struct Text {
    out: String,
    /// A space is owed before the next visible character.
    space: bool,
    /// Line breaks owed before the next visible character (2 makes a blank line).
    breaks: usize,
}

impl Text {
    /// What an element's start or end tag does to the text.
    fn element(&mut self, name: &str, closing: bool) {
        if name == "br" {
            self.breaks = (self.breaks + 1).min(2);
        } else if PARAGRAPHS.contains(&name) {
            self.line_break(2);
        } else if LINES.contains(&name) {
            self.line_break(1);
            if name == "li" && !closing {
                self.push_char('-');
                self.space = true;
            }
        } else if matches!(name, "td" | "th") {
            self.space = true;
        }
    }

    fn line_break(&mut self, breaks: usize) {
        self.breaks = self.breaks.max(breaks);
    }

    /// Text with its entities decoded.
    fn push_decoded(&mut self, raw: &str) {
        let mut rest = raw;
        while let Some(at) = rest.find('&') {
            self.push_str(&rest[..at]);
            rest = &rest[at..];
            match decode_entity(rest) {
                Some((c, len)) => {
                    self.push_char(c);
                    rest = &rest[len..];
                }
                None => {
                    self.push_char('&');
                    rest = &rest[1..];
                }
            }
        }
        self.push_str(rest);
    }

    fn push_str(&mut self, s: &str) {
        s.chars().for_each(|c| self.push_char(c));
    }

    fn push_char(&mut self, c: char) {
        if c.is_whitespace() {
            self.space = true;
            return;
        }
        if !self.out.is_empty() {
            if self.breaks > 0 {
                self.out.extend(std::iter::repeat_n('\n', self.breaks));
            } else if self.space {
                self.out.push(' ');
            }
        }
        self.out.push(c);
        self.space = false;
        self.breaks = 0;
    }

    fn finish(self) -> String {
        self.out
    }
}

/// The character of the entity at the start of `s` (which starts with `&`), and its length.
fn decode_entity(s: &str) -> Option<(char, usize)> {
    let end = s[1..].char_indices().take(10).find(|&(_, c)| c == ';')?.0 + 1;
    let name = &s[1..end];
    let c = match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "hellip" => '…',
        "mdash" => '—',
        "ndash" => '–',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "middot" => '·',
        "bull" => '•',
        "euro" => '€',
        _ => numeric_entity(name)?,
    };
    Some((c, end + 1))
}

/// `#NN` or `#xNN`: the character, U+FFFD for a number that is none.
fn numeric_entity(name: &str) -> Option<char> {
    let number = name.strip_prefix('#')?;
    let code = match number.strip_prefix(['x', 'X']) {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => number.parse().ok()?,
    };
    Some(char::from_u32(code).filter(|&c| c != '\0').unwrap_or('\u{FFFD}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_text(html: &str) -> String {
        super::to_text(html, &Url::parse("https://example.com/menu/today").unwrap())
    }

    #[test]
    fn a_page_becomes_its_readable_text() {
        let page = r#"<!DOCTYPE html>
<html><head>
  <meta charset="utf-8"><title>Fish &amp; Chips</title>
  <style>body { color: red; }</style>
  <script>var x = "<p>not shown</p>"; if (a < b) {}</script>
</head>
<body>
  <!-- a comment <p>hidden</p> -->
  <noscript>Enable JavaScript</noscript>
  <h1>Menu</h1>
  <p>Cod,   haddock
     and <a href="/plaice" title="a > b">plaice</a>.</p>
  <ul><li>Salt &lt;coarse&gt;</li><li>Vinegar&nbsp;&#39;malt&#39;</li></ul>
  <div>5 &#8364; or &#x20AC;5 &unknown; 3 < 4</div>
  line<br>break<br/><br>gap
  <table><tr><td>a</td><td>b</td></tr></table>
  <SCRIPT type="text/javascript">alert(1)</SCRIPT>
</body></html>"#;
        let expected = "Fish & Chips\n\nMenu\n\nCod, haddock and plaice \
                        (https://example.com/plaice).\n\n- Salt <coarse>\n\
                        - Vinegar 'malt'\n\n5 € or €5 &unknown; 3 < 4\nline\nbreak\n\ngap\n\na b";
        assert_eq!(to_text(page), expected);
    }

    #[test]
    fn entities_decode_and_bad_ones_stay_literal() {
        assert_eq!(to_text("&quot;a&quot; &apos; &#65;&#x42;&#X43;"), "\"a\" ' ABC");
        assert_eq!(to_text("&#0; &#xD800; &#xZZ; & alone"), "\u{FFFD} \u{FFFD} &#xZZ; & alone");
    }

    #[test]
    fn broken_markup_degrades_to_text() {
        assert_eq!(to_text("<p>open <b>bold"), "open bold");
        assert_eq!(to_text("a <3 b"), "a <3 b");
        assert_eq!(to_text("<script>never closed"), "");
        assert_eq!(to_text("x <a href='y"), "x");
        assert_eq!(to_text("émoji ✓ <i>ok</i>"), "émoji ✓ ok");
    }

    #[test]
    fn links_show_where_they_go_when_an_agent_could_follow_them() {
        let cases = [
            ("<a href=\"specials\">Specials</a>", "Specials (https://example.com/menu/specials)"),
            (
                "<a class=x HREF='../wine?a=1&amp;b=2#red'>Wine</a>",
                "Wine (https://example.com/wine?a=1&b=2)",
            ),
            ("<a href=http://other.example/>Other</a> site", "Other (http://other.example/) site"),
            ("<a href=\"https://example.com/\">https://example.com/</a>", "https://example.com/"),
            ("<a href=\"mailto:chef@example.com\">Mail</a>", "Mail"),
            ("<a href=\"javascript:go()\">Go</a>", "Go"),
            ("<a name=top>Top</a>", "Top"),
            ("<a href=\"/x\"><img src=a.png></a>after", "after"),
            ("<a href=\"/a\">one <b>two</b></a>", "one two (https://example.com/a)"),
        ];
        for (html, expected) in cases {
            assert_eq!(to_text(html), expected, "{html}");
        }
    }
}
