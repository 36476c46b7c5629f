//! The dashboard's static files, compiled in: htmx (vendored, unmodified, 0BSD), `live.js`
//! (ours: the live pages' event stream and refreshes) and the stylesheet. Each is served under a name carrying a hash of its content, so browsers may
//! cache it for a year and still fetch a new build's file at once.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

pub(super) struct Asset {
    content_type: &'static str,
    body: &'static [u8],
    path: String,
}

impl Asset {
    fn new(stem: &str, extension: &str, content_type: &'static str, body: &'static [u8]) -> Self {
        let hash: String =
            Sha256::digest(body).iter().take(6).map(|b| format!("{b:02x}")).collect();
        Self { content_type, body, path: format!("/assets/{stem}-{hash}.{extension}") }
    }

    /// Where the pages link it: `/assets/<stem>-<hash>.<extension>`.
    pub(super) fn path(&self) -> String {
        self.path.clone()
    }
}

pub(super) static HTMX: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(
        "htmx-2.0.11",
        "js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/htmx-2.0.11.min.js"),
    )
});

pub(super) static LIVE: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(
        "live",
        "js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/live.js"),
    )
});

pub(super) static STYLE: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new("style", "css", "text/css; charset=utf-8", include_bytes!("../../assets/style.css"))
});

/// `GET /assets/{file}`: a file by its current name; an old or unknown name is 404.
pub(super) async fn serve(Path(file): Path<String>) -> Response {
    let wanted = format!("/assets/{file}");
    for asset in [&*HTMX, &*LIVE, &*STYLE] {
        if asset.path == wanted {
            return (
                [
                    (header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type)),
                    (
                        header::CACHE_CONTROL,
                        HeaderValue::from_static("public, max-age=31536000, immutable"),
                    ),
                ],
                asset.body,
            )
                .into_response();
        }
    }
    (StatusCode::NOT_FOUND, "No such file.").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_content_hash() {
        assert!(HTMX.path().starts_with("/assets/htmx-2.0.11-"));
        assert!(STYLE.path().ends_with(".css"));
        assert!(LIVE.path().starts_with("/assets/live-") && LIVE.path().ends_with(".js"));
        assert_ne!(HTMX.path(), STYLE.path());
    }
}
