//! The two lists of an agent's page that grow without end, a bounded page at a time, chosen by
//! the page's query string so that they work without JavaScript (links and a GET form):
//! the backlog (newest first, [`BACKLOG_PAGE`] a page, a status filter and a search) and the
//! activity log (newest first, with "Newer" and "Older" links that land on its section).

use minijinja::{Value, context};
use serde::Deserialize;

use agentcore::Principal;
use agentcore::ValidationErrors;
use agentcore::domain::activity::ActivityQuery;
use agentcore::domain::agent::AgentId;
use agentcore::domain::paging::{TaskCursor, TaskOrder, TaskPage, TaskSearch};
use agentcore::domain::task::TaskStatus;

use crate::AppState;

use super::{Failed, agent_url, fail};

/// Tasks on one page of the dashboard's backlog.
pub(super) const BACKLOG_PAGE: u32 = 20;

/// The statuses the filter offers, in a task's life order.
const STATUSES: [TaskStatus; 6] = [
    TaskStatus::Queued,
    TaskStatus::InProgress,
    TaskStatus::AwaitingApproval,
    TaskStatus::Complete,
    TaskStatus::Failed,
    TaskStatus::Cancelled,
];

/// The agent page's query string. Backlog: `status` (blank: every status), `search`, and
/// `cursor` (where the page starts). Activity: `before` (the page below an entry's time) or
/// `after` (the page above it).
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct ListsQuery {
    status: Option<String>,
    search: Option<String>,
    cursor: Option<String>,
    before: Option<String>,
    after: Option<String>,
}

/// What the lists show, and the query's problems, by field (shown beside the filter; the
/// lists are then shown unfiltered from their start rather than not at all).
pub(super) struct Lists {
    pub backlog: Value,
    pub activity: Value,
    pub errors: Option<agentcore::Error>,
}

impl ListsQuery {
    /// Reads both lists of `agent` as the query asks.
    pub(super) async fn read(
        &self,
        state: &AppState,
        who: &Principal,
        agent: &AgentId,
    ) -> Result<Lists, Failed> {
        let mut errors = ValidationErrors::new();
        let status = blank_is_none(&self.status)
            .and_then(|raw| errors.check("status", raw.parse::<TaskStatus>()));
        let search = self
            .search
            .as_deref()
            .and_then(|raw| errors.check("search", TaskSearch::parse(raw)))
            .flatten();
        let cursor = blank_is_none(&self.cursor)
            .and_then(|raw| errors.check("cursor", TaskCursor::parse(raw)));
        let before = blank_is_none(&self.before).and_then(|raw| errors.check("before", time(raw)));
        let after = blank_is_none(&self.after).and_then(|raw| errors.check("after", time(raw)));
        let errors = errors.into_result().err();
        // A query with a problem shows both lists from their start, unfiltered.
        let (status, search, cursor, before, after) = match errors {
            Some(_) => (None, None, None, None, None),
            None => (status, search, cursor, before, after),
        };
        let mut backlog = backlog(state, who, agent, status, search, cursor).await?;
        if errors.is_some() {
            // The filter's fields keep what was typed, beside its problem.
            let typed = context! {
                status => self.status.clone().unwrap_or_default(),
                search => self.search.clone().unwrap_or_default(),
            };
            backlog = context! { ..typed, ..backlog };
        }
        let activity = activity(state, who, agent, before, after).await?;
        Ok(Lists { backlog, activity, errors })
    }
}

async fn backlog(
    state: &AppState,
    who: &Principal,
    agent: &AgentId,
    status: Option<TaskStatus>,
    search: Option<TaskSearch>,
    cursor: Option<TaskCursor>,
) -> Result<Value, Failed> {
    let filtered = status.is_some() || search.is_some();
    let paged = cursor.is_some();
    let page =
        TaskPage { order: TaskOrder::Newest, status, limit: BACKLOG_PAGE, after: cursor, search };
    let tasks = state.core.task_page(who, agent, &page).await.map_err(fail)?;
    let filter = |cursor: Option<String>| {
        let mut pairs = Vec::new();
        if let Some(status) = page.status {
            pairs.push(("status", status.as_str().to_owned()));
        }
        if let Some(search) = &page.search {
            pairs.push(("search", search.as_str().to_owned()));
        }
        if let Some(cursor) = cursor {
            pairs.push(("cursor", cursor));
        }
        with_query(agent, &pairs, "backlog-filter")
    };
    Ok(context! {
        tasks => tasks.tasks,
        filtered,
        status => page.status.map(TaskStatus::as_str).unwrap_or_default(),
        search => page.search.as_ref().map(TaskSearch::as_str).unwrap_or_default(),
        next => tasks.next.map(|next| filter(Some(next.to_string()))),
        first => paged.then(|| filter(None)),
        all => filtered.then(|| with_query(agent, &[], "backlog-filter")),
        limit => BACKLOG_PAGE,
        statuses => STATUSES.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        max_search => TaskSearch::MAX_CHARS,
    })
}

async fn activity(
    state: &AppState,
    who: &Principal,
    agent: &AgentId,
    before: Option<chrono::DateTime<chrono::Utc>>,
    after: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<Value, Failed> {
    let limit = ActivityQuery::DEFAULT_LIMIT;
    // One entry more than a page says whether there is more in the direction read.
    let query =
        ActivityQuery { limit: limit + 1, before, after: after.filter(|_| before.is_none()) };
    let mut entries = state.core.activity(who, agent, &query).await.map_err(fail)?;
    let more = entries.len() > limit as usize;
    let (older_exist, newer_exist) = if query.after.is_some() {
        if more {
            entries.remove(0);
        }
        (true, more)
    } else {
        entries.truncate(limit as usize);
        (more, before.is_some())
    };
    let at = |entry: &agentcore::domain::activity::ActivityEntry| {
        entry.timestamp.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    };
    let older = match entries.last() {
        Some(last) if older_exist => {
            Some(with_query(agent, &[("before", at(last))], "activity-section"))
        }
        _ => None,
    };
    let newer = match (entries.first(), before) {
        (Some(first), _) if newer_exist => {
            Some(with_query(agent, &[("after", at(first))], "activity-section"))
        }
        // An empty page below some time: the newest page is the way back.
        (None, Some(_)) => Some(with_query(agent, &[], "activity-section")),
        _ => None,
    };
    let paged = before.is_some() || query.after.is_some();
    Ok(context! {
        entries, older, newer, newest => paged.then(|| with_query(agent, &[], "activity-section")),
    })
}

fn blank_is_none(raw: &Option<String>) -> Option<&str> {
    raw.as_deref().map(str::trim).filter(|raw| !raw.is_empty())
}

fn time(raw: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(raw)
        .map(|at| at.to_utc())
        .map_err(|_| "must be a time such as 2026-03-28T10:00:00Z".to_owned())
}

/// The agent's page with `pairs` as its query, landing on the section `anchor`.
fn with_query(agent: &AgentId, pairs: &[(&str, String)], anchor: &str) -> String {
    let mut url = agent_url(agent);
    for (n, (name, value)) in pairs.iter().enumerate() {
        url.push(if n == 0 { '?' } else { '&' });
        url.push_str(name);
        url.push('=');
        url.push_str(&urlencoding(value));
    }
    url.push('#');
    url.push_str(anchor);
    url
}

/// Percent-encoding of everything but unreserved characters (RFC 3986).
fn urlencoding(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char);
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_carry_the_filter_encoded_and_land_on_their_section() {
        let agent = AgentId::parse("writer").unwrap();
        let pairs = [("status", "queued".to_owned()), ("search", "a&b c/é".to_owned())];
        assert_eq!(
            with_query(&agent, &pairs, "backlog-filter"),
            "/agents/writer?status=queued&search=a%26b%20c%2F%C3%A9#backlog-filter"
        );
        assert_eq!(with_query(&agent, &[], "activity-section"), "/agents/writer#activity-section");
    }
}
