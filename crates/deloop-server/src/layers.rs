//! Cross-cutting behaviour as middleware, not code inside handlers: auth,
//! load shedding with a whole-request deadline, and request metrics.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::{bearer, Access};
use crate::error::ApiError;
use crate::state::AppState;

/// Paths that answer without a key and outside the concurrency limit and
/// deadline (the probes). The OpenAPI document follows the same rule.
pub fn is_open_path(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// Bearer-token auth: 401 without a key, 403 with a wrong one.
///
/// The console's pages (`/ui/…`) log in on their own; a request from a
/// logged-in console (its session cookie, and for anything but a read its
/// CSRF header) needs no bearer key.
pub async fn auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if state.0.keys.is_empty() || is_open_path(path) || deloop_console::is_console_path(path) {
        return next.run(req).await;
    }
    if !req.headers().contains_key(header::AUTHORIZATION)
        && state.console().admits_api(req.method(), req.headers())
    {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer);
    match state.0.keys.check(presented) {
        Access::Granted => next.run(req).await,
        Access::Missing => {
            let mut res = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "this server needs an API key: send `Authorization: Bearer <key>`",
            )
            .into_response();
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            res
        }
        Access::Denied => {
            ApiError::new(StatusCode::FORBIDDEN, "the API key is not accepted").into_response()
        }
    }
}

/// The concurrency limit (503 with `Retry-After` when every permit is
/// taken, instead of an unbounded queue), the body deadline (408 when the
/// body has not arrived whole within `server.connections.body_read_timeout_secs`,
/// so a body that trickles in cannot hold a permit longer) and the
/// whole-request deadline (408) up to the response head. A streamed body keeps its permit until it
/// ends; streams are governed by their own idle timeout.
///
/// The console's live feed is outside both: it is open as long as its
/// page, and its own limit bounds how many are open.
pub async fn limits(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if is_open_path(req.uri().path()) || req.uri().path() == "/ui/live/feed" {
        return next.run(req).await;
    }
    let Ok(permit) = state.0.permits.clone().try_acquire_owned() else {
        state.0.metrics.shed();
        return ApiError::unavailable(
            "the server is at its concurrency limit (server.concurrency_limit); retry shortly",
            state.0.settings.retry_after_secs,
        )
        .into_response();
    };
    let body_deadline = state.0.settings.connections.body_read_timeout();
    let (req, body) = deloop_http::limits::read_body_within(req, body_deadline);
    let deadline = state.0.settings.request_timeout();
    match tokio::time::timeout(deadline, next.run(req)).await {
        Ok(_) if body.passed() => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive whole within {} s \
                 (server.connections.body_read_timeout_secs); send it faster or raise the setting",
                body_deadline.as_secs()
            ),
        )
        .into_response(),
        Ok(res) => deloop_http::limits::hold_until_end(res, permit),
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request took longer than {} s (server.request_timeout_secs)",
                deadline.as_secs()
            ),
        )
        .into_response(),
    }
}

/// Counts requests and their latency to the response head, by route pattern.
pub async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    deloop_http::metrics::track(state.metrics(), &route, req, next).await
}
