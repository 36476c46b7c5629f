//! A server's tool list, read within bounds: a server (a user's, on a shared instance) decides
//! how many pages, tools and bytes it answers with, and every tool it lists is held by the node
//! and offered to the model in each run. So the list is read a page at a time, at most
//! [`MAX_PAGES`] pages and [`MAX_TOOLS`] tools; a description is cut past
//! [`MAX_DESCRIPTION_CHARS`], a tool whose input schema is over [`MAX_SCHEMA_BYTES`] is left
//! out, and the tools kept hold at most [`MAX_LISTING_BYTES`] together. What was left out or
//! cut is said in the listing's `warning`, never dropped silently.

use rmcp::RoleClient;
use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::service::{Peer, ServiceError};

use super::connection::McpTool;
use crate::domain::mcp::{McpServerName, McpToolInfo, qualified_tool};
use crate::domain::runtime::cut;

/// Pages of `tools/list` read, at most.
pub(crate) const MAX_PAGES: usize = 8;
/// Tools kept per server: the providers refuse requests that offer much more than a hundred.
pub(crate) const MAX_TOOLS: usize = 128;
/// A tool's description is cut to this many characters.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 2_000;
/// A tool whose input schema (as JSON) is larger is left out: cutting a schema breaks it.
pub(crate) const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// The kept tools' names, descriptions and schemas together, at most.
pub(crate) const MAX_LISTING_BYTES: usize = 512 * 1024;
/// One answer of the server (a page of the list, or a call's result) read at most: the HTTP
/// transport refuses a larger body instead of holding it.
pub(crate) const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// The tools kept, and what was left out or cut.
#[derive(Debug, Default)]
pub struct Listing {
    pub tools: Vec<McpTool>,
    pub warning: Option<String>,
}

/// Reads `server`'s tools through `peer` within the bounds above.
pub(super) async fn list(
    server: &McpServerName,
    peer: &Peer<RoleClient>,
) -> Result<Listing, ServiceError> {
    let mut kept = Bounded::default();
    let mut cursor = None;
    for page in 1..=MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let result = peer.list_tools(Some(params)).await?;
        for tool in &result.tools {
            kept.add(server, tool);
        }
        cursor = result.next_cursor;
        if cursor.is_none() {
            break;
        }
        if kept.full() || page == MAX_PAGES {
            kept.unread_after = Some(page);
            break;
        }
    }
    Ok(kept.into_listing(server))
}

/// A server's tool as the loop offers it, its description within bounds (`None`: its name
/// does not fit the providers' rules).
pub(crate) fn tool_info(server: &McpServerName, tool: &Tool) -> Option<McpToolInfo> {
    let name = qualified_tool(server, &tool.name)?;
    let description = tool.description.as_deref().unwrap_or_default();
    Some(McpToolInfo {
        name,
        tool: tool.name.to_string(),
        description: cut(description, MAX_DESCRIPTION_CHARS),
        parameters: serde_json::Value::Object((*tool.input_schema).clone()),
    })
}

/// The tools kept so far, and counts of what was not.
#[derive(Debug, Default)]
struct Bounded {
    tools: Vec<McpTool>,
    bytes: usize,
    past_count: usize,
    past_bytes: usize,
    large_schemas: Vec<String>,
    bad_names: Vec<String>,
    descriptions_cut: usize,
    /// The page after which the server had more that was not read.
    unread_after: Option<usize>,
}

impl Bounded {
    /// Whether reading more pages can add nothing.
    fn full(&self) -> bool {
        self.tools.len() >= MAX_TOOLS || self.past_bytes > 0
    }

    fn add(&mut self, server: &McpServerName, tool: &Tool) {
        if self.tools.len() >= MAX_TOOLS {
            self.past_count += 1;
            return;
        }
        let schema_bytes = serde_json::to_vec(&*tool.input_schema).map_or(usize::MAX, |s| s.len());
        if schema_bytes > MAX_SCHEMA_BYTES {
            self.large_schemas.push(cut(&tool.name, 64));
            return;
        }
        let Some(info) = tool_info(server, tool) else {
            self.bad_names.push(cut(&tool.name, 64));
            return;
        };
        let bytes = info.name.len() + info.description.len() + schema_bytes;
        if self.bytes + bytes > MAX_LISTING_BYTES {
            self.past_bytes += 1;
            return;
        }
        if tool.description.as_deref().is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS) {
            self.descriptions_cut += 1;
        }
        self.bytes += bytes;
        self.tools.push(McpTool { info });
    }

    fn into_listing(self, server: &McpServerName) -> Listing {
        let mut said = Vec::new();
        if self.past_count > 0 {
            said.push(format!(
                "{} tools past the first {MAX_TOOLS} left out (at most {MAX_TOOLS} per server)",
                self.past_count
            ));
        }
        if let Some(page) = self.unread_after {
            said.push(format!(
                "the list goes on past page {page}, not read (at most {MAX_PAGES} pages)"
            ));
        }
        if self.past_bytes > 0 {
            said.push(format!(
                "{} tools left out: the list holds at most {} KB",
                self.past_bytes,
                MAX_LISTING_BYTES / 1024
            ));
        }
        if !self.large_schemas.is_empty() {
            said.push(format!(
                "{} left out: an input schema over {} KB ({})",
                plural(self.large_schemas.len(), "tool"),
                MAX_SCHEMA_BYTES / 1024,
                names(&self.large_schemas)
            ));
        }
        if !self.bad_names.is_empty() {
            said.push(format!(
                "{} left out: a name the model providers refuse ({})",
                plural(self.bad_names.len(), "tool"),
                names(&self.bad_names)
            ));
        }
        if self.descriptions_cut > 0 {
            said.push(format!(
                "{} cut to {MAX_DESCRIPTION_CHARS} characters",
                plural(self.descriptions_cut, "description")
            ));
        }
        let warning = (!said.is_empty()).then(|| said.join("; "));
        if let Some(warning) = &warning {
            tracing::warn!(server = %server, kept = self.tools.len(), "MCP tool list bounded: {warning}");
        }
        Listing { tools: self.tools, warning }
    }
}

fn plural(count: usize, noun: &str) -> String {
    if count == 1 { format!("1 {noun}") } else { format!("{count} {noun}s") }
}

/// The first few names, for a message.
fn names(all: &[String]) -> String {
    let shown: Vec<&str> = all.iter().take(5).map(String::as_str).collect();
    let more = all.len().saturating_sub(shown.len());
    if more == 0 { shown.join(", ") } else { format!("{}, and {more} more", shown.join(", ")) }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn tool(name: &str, description: &str, schema_padding: usize) -> Tool {
        let schema =
            serde_json::json!({"type": "object", "description": "x".repeat(schema_padding)});
        Tool::new(
            name.to_owned(),
            description.to_owned(),
            Arc::new(schema.as_object().unwrap().clone()),
        )
    }

    fn server() -> McpServerName {
        McpServerName::parse("files").unwrap()
    }

    #[test]
    fn a_list_within_bounds_is_kept_whole_and_says_nothing() {
        let mut kept = Bounded::default();
        for i in 0..3 {
            kept.add(&server(), &tool(&format!("t{i}"), "Does a thing.", 10));
        }
        let listing = kept.into_listing(&server());
        assert_eq!((listing.tools.len(), listing.warning), (3, None));
        assert_eq!(listing.tools[0].info.name, "files__t0");
    }

    #[test]
    fn each_bound_leaves_out_or_cuts_and_says_so() {
        let mut kept = Bounded::default();
        kept.add(&server(), &tool("huge", "Big schema.", MAX_SCHEMA_BYTES + 1));
        kept.add(&server(), &tool("bad name!", "Bad name.", 0));
        kept.add(&server(), &tool("wordy", &"w".repeat(MAX_DESCRIPTION_CHARS + 10), 0));
        for i in 0..MAX_TOOLS + 2 {
            kept.add(&server(), &tool(&format!("t{i}"), "x", 0));
        }
        let listing = kept.into_listing(&server());
        assert_eq!(listing.tools.len(), MAX_TOOLS);
        let wordy = &listing.tools[0].info.description;
        assert_eq!(wordy.chars().count(), MAX_DESCRIPTION_CHARS);
        let warning = listing.warning.unwrap();
        for said in [
            "3 tools past the first 128",
            "1 tool left out: an input schema over 16 KB (huge)",
            "a name the model providers refuse (bad name!)",
            "1 description cut",
        ] {
            assert!(warning.contains(said), "{said}: {warning}");
        }
    }

    #[test]
    fn the_kept_tools_hold_at_most_the_listing_budget() {
        let mut kept = Bounded::default();
        let schema = MAX_SCHEMA_BYTES - 100;
        for i in 0..MAX_TOOLS {
            kept.add(&server(), &tool(&format!("t{i}"), "x", schema));
        }
        assert!(kept.full());
        let listing = kept.into_listing(&server());
        assert!(listing.tools.len() < MAX_LISTING_BYTES / schema + 1, "{}", listing.tools.len());
        assert!(listing.warning.unwrap().contains("the list holds at most 512 KB"));
    }
}
