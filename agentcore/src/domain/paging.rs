//! Pages of a backlog: a limit and a cursor that says where the previous page ended. A cursor
//! names a task by its time and id, not by its position, so a page never repeats or skips a
//! task when tasks are added or removed between pages.

use std::fmt;

use chrono::{DateTime, Utc};

use super::task::{TaskId, TaskStatus};

/// Where a page of tasks starts: just past this task in the page's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCursor {
    /// The task's creation time (backlog pages) or finishing time (finished pages).
    pub at: DateTime<Utc>,
    pub id: TaskId,
}

impl TaskCursor {
    /// Reads a cursor as [`Display`](fmt::Display) writes it: `<microseconds>.<task id>`.
    pub fn parse(value: &str) -> Result<Self, String> {
        let bad = || "must be a next_cursor returned by an earlier page".to_owned();
        let (micros, id) = value.split_once('.').ok_or_else(bad)?;
        let micros: i64 = micros.parse().map_err(|_| bad())?;
        let at = DateTime::from_timestamp_micros(micros).ok_or_else(bad)?;
        let id = TaskId::parse(id).map_err(|_| bad())?;
        Ok(Self { at, id })
    }
}

impl fmt::Display for TaskCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.at.timestamp_micros(), self.id)
    }
}

/// The order a page follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskOrder {
    /// Every task (or those of one status), oldest first: `GET .../backlog`.
    Created,
    /// Finished tasks (complete or failed), the most recently finished first: the agent view.
    Finished,
    /// Every task (or those of one status), newest first: the dashboard's backlog, whose
    /// first page shows what was added last however long the agent's history.
    Newest,
}

/// One page of an agent's tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPage {
    pub order: TaskOrder,
    /// Only tasks in this status (in [`TaskOrder::Created`] and [`TaskOrder::Newest`]).
    pub status: Option<TaskStatus>,
    pub limit: u32,
    pub after: Option<TaskCursor>,
    /// Only tasks whose title or description holds this text (as `status`).
    pub search: Option<TaskSearch>,
}

/// Text a backlog is searched for: 1 to [`TaskSearch::MAX_CHARS`] characters after trimming,
/// found in a task's title or description, letter case aside (on SQLite, for ASCII letters
/// only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSearch(String);

impl TaskSearch {
    /// The longest search accepted: a search box is for words, not documents.
    pub const MAX_CHARS: usize = 100;

    /// `None` for blank text (no search); a refusal for text over the limit or holding NUL
    /// (which no stored text holds, and PostgreSQL refuses in a parameter).
    pub fn parse(raw: &str) -> Result<Option<Self>, String> {
        let text = raw.trim();
        if text.contains('\0') {
            return Err("must not contain NUL characters".into());
        }
        if text.chars().count() > Self::MAX_CHARS {
            return Err(format!("must be at most {} characters", Self::MAX_CHARS));
        }
        Ok((!text.is_empty()).then(|| Self(text.to_owned())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A `LIKE` pattern (escape character `\`) that matches any text holding this one.
    pub fn pattern(&self) -> String {
        let mut pattern = String::with_capacity(self.0.len() + 2);
        pattern.push('%');
        for c in self.0.chars() {
            if matches!(c, '%' | '_' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push('%');
        pattern
    }
}

/// The most any page holds: tasks here, entries of the activity log.
pub const MAX_LIMIT: u32 = 1000;

/// A page's `limit` as a query string gives it: a whole number from 1 to [`MAX_LIMIT`].
pub fn parse_limit(raw: &str) -> Result<u32, String> {
    let value: i64 = raw.parse().map_err(|_| "must be an integer".to_owned())?;
    u32::try_from(value)
        .ok()
        .filter(|limit| (1..=MAX_LIMIT).contains(limit))
        .ok_or_else(|| format!("must be an integer from 1 to {MAX_LIMIT}"))
}

/// A page and where the next one starts, if there may be one.
#[derive(Debug, Clone, PartialEq)]
pub struct TasksPage {
    pub tasks: Vec<super::task::Task>,
    pub next: Option<TaskCursor>,
}

impl TasksPage {
    /// The page from `fetched`, which holds up to one task more than `limit`: that one only
    /// says there is more.
    pub fn from_fetched(mut fetched: Vec<super::task::Task>, page: &TaskPage) -> Self {
        let limit = page.limit as usize;
        let more = fetched.len() > limit;
        fetched.truncate(limit);
        let next = match fetched.last() {
            Some(last) if more => Some(TaskCursor {
                at: match page.order {
                    TaskOrder::Created | TaskOrder::Newest => last.created_at,
                    TaskOrder::Finished => last.completed_at.unwrap_or(last.updated_at),
                },
                id: last.id.clone(),
            }),
            _ => None,
        };
        Self { tasks: fetched, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_from_its_text_and_refuses_anything_else() {
        let cursor = TaskCursor {
            at: DateTime::from_timestamp_micros(1_764_159_000_123_456).unwrap(),
            id: TaskId::parse("0196a1b2-0000-7000-8000-000000000001").unwrap(),
        };
        let text = cursor.to_string();
        assert_eq!(text, "1764159000123456.0196a1b2-0000-7000-8000-000000000001");
        assert_eq!(TaskCursor::parse(&text).unwrap(), cursor);
        for bad in ["", "123", "x.0196a1b2", "1764159000123456.", "99999999999999999999.a"] {
            assert!(TaskCursor::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_limit("1000"), Ok(1000));
        assert_eq!(parse_limit("ten").unwrap_err(), "must be an integer");
        assert!(parse_limit("0").is_err() && parse_limit("1001").is_err());
    }

    #[test]
    fn a_search_is_trimmed_bounded_and_matched_literally() {
        assert_eq!(TaskSearch::parse("  "), Ok(None));
        let search = TaskSearch::parse(" 50%_off\\ ").unwrap().unwrap();
        assert_eq!(search.as_str(), "50%_off\\");
        assert_eq!(search.pattern(), "%50\\%\\_off\\\\%");
        assert!(TaskSearch::parse(&"é".repeat(100)).unwrap().is_some());
        assert!(TaskSearch::parse(&"é".repeat(101)).is_err());
    }
}
