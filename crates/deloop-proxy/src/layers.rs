//! The proxy's middleware: deloop's own auth (`x-deloop-key`, since
//! `Authorization` belongs to the upstream), the concurrency limit, and
//! request metrics. Errors come in the API's own shape.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use deloop_http::auth::Access;

use crate::api::{Api, ProxyError};
use crate::state::ProxyState;

/// The header carrying deloop's own key.
pub const KEY_HEADER: &str = "x-deloop-key";

fn is_open_path(path: &str) -> bool {
    path == "/deloop/healthz"
}

/// The header LiteLLM's generic guardrail sends its configured `api_key`
/// in. Accepted as deloop's key on the guardrail route only: nothing from
/// that route goes upstream, so the header belongs to no one else there.
pub const GUARDRAIL_KEY_HEADER: &str = "x-api-key";

/// deloop's auth: when keys are configured, `x-deloop-key` must carry one
/// (401 without, 403 with a wrong one). On LiteLLM's guardrail route
/// (`POST /beta/litellm_basic_guardrail_api`) `x-api-key` is read when
/// `x-deloop-key` is absent.
pub async fn auth(State(state): State<ProxyState>, req: Request, next: Next) -> Response {
    if state.0.keys.is_empty() || is_open_path(req.uri().path()) {
        return next.run(req).await;
    }
    let api = Api::for_path(req.uri().path());
    let guardrail = req.uri().path() == crate::litellm::PATH;
    let access = {
        let headers = req.headers();
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let presented = header(KEY_HEADER)
            .or_else(|| guardrail.then(|| header(GUARDRAIL_KEY_HEADER)).flatten());
        state.0.keys.check(presented)
    };
    match access {
        Access::Granted => next.run(req).await,
        Access::Missing if guardrail => ProxyError::new(
            api,
            StatusCode::UNAUTHORIZED,
            "deloop_key_missing",
            "this deloop proxy needs deloop's API key: send it in the `x-deloop-key` or the \
             `x-api-key` header (LiteLLM's guardrail `api_key` setting sends `x-api-key`)",
        )
        .into_response(),
        Access::Missing => ProxyError::new(
            api,
            StatusCode::UNAUTHORIZED,
            "deloop_key_missing",
            "this deloop proxy needs deloop's API key: send it in the `x-deloop-key` header \
             (Authorization goes to the upstream)",
        )
        .into_response(),
        Access::Denied => ProxyError::new(
            api,
            StatusCode::FORBIDDEN,
            "deloop_key_denied",
            "the key sent as deloop's key is not accepted",
        )
        .into_response(),
    }
}

/// The concurrency limit: 503 with `Retry-After` when every permit is
/// taken. A streamed body keeps its permit until it ends. A request body
/// must arrive whole within `proxy.connections.body_read_timeout_secs`
/// (408 past it), so a body that trickles in cannot hold a permit longer.
pub async fn limits(State(state): State<ProxyState>, req: Request, next: Next) -> Response {
    if is_open_path(req.uri().path()) {
        return next.run(req).await;
    }
    let api = Api::for_path(req.uri().path());
    let Ok(permit) = state.0.permits.clone().try_acquire_owned() else {
        state.0.metrics.shed();
        let mut e = ProxyError::new(
            api,
            StatusCode::SERVICE_UNAVAILABLE,
            "deloop_overloaded",
            "the deloop proxy is at its concurrency limit (proxy.concurrency_limit); retry shortly",
        );
        e.retry_after = Some(1);
        return e.into_response();
    };
    let deadline = state.settings().connections.body_read_timeout();
    let (req, body) = deloop_http::limits::read_body_within(req, deadline);
    let res = next.run(req).await;
    if body.passed() {
        return ProxyError::new(
            api,
            StatusCode::REQUEST_TIMEOUT,
            "request_body_timeout",
            format!(
                "the request body did not arrive whole within {} s \
                 (proxy.connections.body_read_timeout_secs); send it faster or raise the setting",
                deadline.as_secs()
            ),
        )
        .into_response();
    }
    deloop_http::limits::hold_until_end(res, permit)
}

/// The route label of a path: the guarded routes by name, everything else
/// `proxied` (never the raw path, which would grow the label set without
/// bound).
pub fn route_label(path: &str) -> &'static str {
    match path {
        "/v1/chat/completions" => "/v1/chat/completions",
        "/v1/completions" => "/v1/completions",
        "/v1/messages" => "/v1/messages",
        "/deloop/healthz" => "/deloop/healthz",
        "/deloop/metrics" => "/deloop/metrics",
        crate::litellm::PATH => crate::litellm::PATH,
        _ => "proxied",
    }
}

/// Counts requests and their latency to the response head.
pub async fn track(State(state): State<ProxyState>, req: Request, next: Next) -> Response {
    let route = route_label(req.uri().path());
    deloop_http::metrics::track(state.metrics(), route, req, next).await
}

/// Why a request path is refused, if it is: a path is joined to the
/// upstream's base path as received, so a segment that an upstream (or
/// the URL parser on the way) would resolve as `.` or `..`, once
/// percent-decoded, would leave the base path; so would an encoded slash
/// or a backslash, which some servers treat as `/`. A NUL byte is never a
/// file or route name.
pub fn path_problem(path: &str) -> Option<&'static str> {
    if path.contains('\\') {
        return Some("a backslash");
    }
    for segment in path.split('/') {
        let decoded: Vec<u8> = percent_encoding::percent_decode_str(segment).collect();
        if decoded == b"." || decoded == b".." {
            return Some("a `.` or `..` segment (plain or percent-encoded)");
        }
        if decoded.iter().any(|b| matches!(b, b'/' | b'\\' | 0)) {
            return Some("an encoded slash, backslash or NUL byte");
        }
    }
    None
}

/// Refuses what the proxy must not forward, before auth and metrics:
/// `CONNECT` (405: the proxy is not a tunnel), an asterisk-form target
/// such as `OPTIONS *` (400: it asks about the server as a whole, which
/// the upstream behind a base path is not), and a path that would leave
/// the upstream's base path (400, see [`path_problem`]).
pub async fn request_target(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let api = Api::for_path(path);
    if req.method() == Method::CONNECT {
        let mut res = ProxyError::new(
            api,
            StatusCode::METHOD_NOT_ALLOWED,
            "deloop_method_not_allowed",
            "the deloop proxy is not a tunnel: CONNECT is not supported; send each request to \
             the proxy's own URL",
        )
        .into_response();
        res.headers_mut().insert(
            header::ALLOW,
            HeaderValue::from_static("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
        );
        return res;
    }
    if path == "*" || !path.starts_with('/') {
        return ProxyError::new(
            api,
            StatusCode::BAD_REQUEST,
            "deloop_invalid_path",
            format!(
                "`{} {path}` asks about the server as a whole (OPTIONS *); the deloop proxy \
                 answers requests for a path such as /v1/models",
                req.method()
            ),
        )
        .into_response();
    }
    if let Some(problem) = path_problem(path) {
        return ProxyError::new(
            api,
            StatusCode::BAD_REQUEST,
            "deloop_invalid_path",
            format!(
                "the request path has {problem}, which could leave the upstream's base path; \
                 send the path in its plain form"
            ),
        )
        .into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_base_are_named() {
        for bad in [
            "/../admin",
            "/v1/..",
            "/v1/%2e%2e/x",
            "/v1/%2E./x",
            "/v1/.%2E/x",
            "/v1/./x",
            "/v1/%2e/x",
            "/v1/a%2fb",
            "/v1/a%2Fb",
            "/v1/a%5cb",
            "/v1/a\\b",
            "/v1/a%00",
        ] {
            assert!(path_problem(bad).is_some(), "{bad}");
        }
        for good in [
            "/",
            "/v1/models",
            "/v1/models/llama-3.1.gguf",
            "/v1/files/a%20b",
            "/v1/...",
            "/v1/..a",
            "/v1//models",
            "/v1/%zz",
        ] {
            assert_eq!(path_problem(good), None, "{good}");
        }
    }
}
