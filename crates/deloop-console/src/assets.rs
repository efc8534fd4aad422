//! The stylesheet and the plain ES modules, embedded in the binary and
//! served from `/ui/assets/{name}`. They are deloop's own (nothing vendored)
//! and need no build step.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// Every asset: name, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    ),
    (
        "live.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/live.js"),
    ),
    (
        "ask.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/ask.js"),
    ),
    (
        "check.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/check.js"),
    ),
];

/// The version in asset URLs: the crate's, so a new binary is never served
/// a cached old module.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The URL of asset `name`.
pub fn url(name: &str) -> String {
    format!("/ui/assets/{name}?v={VERSION}")
}

/// `GET /ui/assets/{name}`.
pub async fn serve(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, ty, body)) => (
            [
                (header::CONTENT_TYPE, *ty),
                (header::CACHE_CONTROL, "public, max-age=3600"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
