//! The viewer's time zone, for every time a page shows. `live.js` stores the browser's IANA
//! zone (`Intl.DateTimeFormat().resolvedOptions().timeZone`) in the `tz` cookie; the server
//! takes it only when the zone database knows the name. Without it (no JavaScript yet, or a
//! first page) times are UTC, and either way each time carries its zone's label, so a time is
//! never shown without saying which clock it is on.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// The cookie `live.js` writes.
pub(crate) const COOKIE: &str = "tz";

/// The longest zone name accepted (the database's longest is 32 characters).
const MAX_NAME: usize = 64;

tokio::task_local! {
    static VIEWER_ZONE: Tz;
}

/// Middleware: makes the viewer's zone, read from the request's cookie, the one pages of this
/// request are written in.
pub(crate) async fn scope(request: Request, next: Next) -> Response {
    let zone = super::session::cookie(request.headers(), COOKIE)
        .and_then(|name| parse(&name))
        .unwrap_or(Tz::UTC);
    VIEWER_ZONE.scope(zone, next.run(request)).await
}

/// A zone name the database knows, or `None` (an unknown or overlong name is ignored: the
/// page is then in UTC, as without the cookie).
pub(crate) fn parse(name: &str) -> Option<Tz> {
    if name.len() > MAX_NAME {
        return None;
    }
    name.parse().ok()
}

/// The zone of the request being handled; UTC outside one.
fn current() -> Tz {
    VIEWER_ZONE.try_with(|zone| *zone).unwrap_or(Tz::UTC)
}

/// `at` (RFC 3339) as pages show a time: to the second, in `zone` when given (a schedule's
/// own) or the viewer's, with the zone's abbreviation (`UTC`, `CET`, `JST`), or its name where
/// the database has only an offset for it. Text that is not a time is shown as it is.
pub(crate) fn show(at: &str, zone: Option<&str>) -> String {
    let Ok(at) = DateTime::parse_from_rfc3339(at) else {
        return at.to_owned();
    };
    let zone = zone.and_then(parse).unwrap_or_else(current);
    format_in(at.with_timezone(&Utc), zone)
}

fn format_in(at: DateTime<Utc>, zone: Tz) -> String {
    let local = at.with_timezone(&zone);
    let label = local.format("%Z").to_string();
    let label = if label.starts_with(['+', '-']) { zone.name().to_owned() } else { label };
    format!("{} {label}", local.format("%Y-%m-%d %H:%M:%S"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_carries_its_zone_and_utc_is_the_default() {
        let at = "2026-11-27T08:30:05.123Z";
        assert_eq!(show(at, None), "2026-11-27 08:30:05 UTC");
        assert_eq!(show(at, Some("Asia/Tokyo")), "2026-11-27 17:30:05 JST");
        assert_eq!(
            show("2026-07-01T08:00:00+00:00", Some("Europe/Berlin")),
            "2026-07-01 10:00:00 CEST"
        );
        // Only an offset in the database: the zone's name says where.
        assert_eq!(show(at, Some("Asia/Dubai")), "2026-11-27 12:30:05 Asia/Dubai");
        assert_eq!(show("yesterday", None), "yesterday");
    }

    #[test]
    fn only_names_the_zone_database_knows_are_taken() {
        assert_eq!(parse("Europe/Paris"), Some(chrono_tz::Europe::Paris));
        for bad in ["", "Mars/Olympus", "UTC; path=/", &"A".repeat(65)] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn inside_a_request_the_viewers_zone_is_used() {
        let shown = VIEWER_ZONE
            .scope(chrono_tz::America::New_York, async { show("2026-11-27T15:00:00Z", None) })
            .await;
        assert_eq!(shown, "2026-11-27 10:00:00 EST");
    }
}
