//! The cluster dashboard: one HTML page with its script and style sheet, embedded in the
//! binary (no CDN, nothing fetched from elsewhere). The page polls `/v1/cluster/stats`,
//! `/v1/memnodes`, `/v1/tables`, `/v1/rereplication` and `/metrics` every second and
//! `/v1/cluster/history` every few seconds, and looks keys up with
//! `/v1/tables/{name}/location`.
//!
//! | route | answer |
//! |---|---|
//! | `GET /` | 307 to `/dashboard` |
//! | `GET /dashboard` | the page |
//! | `GET /dashboard/app.js` | its script |
//! | `GET /dashboard/style.css` | its style sheet |

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::state::AppState;

/// The page.
pub const INDEX_HTML: &str = include_str!("../dashboard/index.html");
/// The script.
pub const APP_JS: &str = include_str!("../dashboard/app.js");
/// The style sheet.
pub const STYLE_CSS: &str = include_str!("../dashboard/style.css");

/// The dashboard's routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::temporary("/dashboard") }))
        .route(
            "/dashboard",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/dashboard/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/dashboard/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_self_contained() {
        for text in [INDEX_HTML, APP_JS, STYLE_CSS] {
            assert!(!text.contains("//cdn"), "no CDN");
            assert!(!text.contains("https://"), "nothing fetched from elsewhere");
        }
        assert!(INDEX_HTML.contains("/dashboard/app.js"));
        assert!(INDEX_HTML.contains("/dashboard/style.css"));
        for path in [
            "/v1/cluster/stats",
            "/v1/cluster/history",
            "/v1/memnodes",
            "/v1/tables",
            "/v1/rereplication",
            "/location?key=",
            "/metrics",
        ] {
            assert!(APP_JS.contains(path), "the script polls {path}");
        }
    }

    /// Metric names are read in one place: the `METRIC` table at the top of the script.
    #[test]
    fn metric_names_live_in_one_table() {
        let start = APP_JS.find("const METRIC = {").expect("a METRIC table");
        let end = start + APP_JS[start..].find("};").expect("its end");
        let prefix = "dmkv_";
        let outside =
            APP_JS[..start].matches(prefix).count() + APP_JS[end..].matches(prefix).count();
        assert_eq!(outside, 0, "{prefix}* named outside the METRIC table");
        assert!(APP_JS[start..end].contains("dmkv_metadata_requests_total"));
    }
}
