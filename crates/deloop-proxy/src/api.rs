//! The two wire protocols the proxy speaks, and the errors it makes itself
//! in each one's own shape: OpenAI's `{"error": {...}}` and Anthropic's
//! `{"type": "error", "error": {...}}`, as bodies and as stream events.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;

/// Which API a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI chat completions, completions, and every other path.
    OpenAi,
    /// Anthropic Messages (`/v1/messages` and the paths under it).
    Anthropic,
}

impl Api {
    /// The API of a request path: Anthropic for `/v1/messages` and below,
    /// OpenAI otherwise.
    pub fn for_path(path: &str) -> Api {
        let p = path.trim_end_matches('/');
        if p == "/v1/messages" || p.starts_with("/v1/messages/") {
            Api::Anthropic
        } else {
            Api::OpenAi
        }
    }

    /// An error body in this API's shape.
    pub fn error_body(self, status: StatusCode, code: &str, message: &str) -> serde_json::Value {
        match self {
            Api::OpenAi => json!({
                "error": {
                    "message": message,
                    "type": openai_type(status),
                    "param": null,
                    "code": code,
                }
            }),
            Api::Anthropic => json!({
                "type": "error",
                "error": {"type": anthropic_type(status), "message": message},
            }),
        }
    }

    /// A stream event that ends a stream with an error, in this API's
    /// shape (the official SDKs raise it as an API error). An OpenAI stream
    /// also gets its closing `data: [DONE]`.
    pub fn error_event(self, code: &str, message: &str) -> Bytes {
        match self {
            Api::OpenAi => {
                let body = self.error_body(StatusCode::BAD_GATEWAY, code, message);
                Bytes::from(format!("data: {body}\n\ndata: [DONE]\n\n"))
            }
            Api::Anthropic => {
                let body = self.error_body(StatusCode::BAD_GATEWAY, code, message);
                Bytes::from(format!("event: error\ndata: {body}\n\n"))
            }
        }
    }
}

fn openai_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        408 | 504 => "timeout_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

fn anthropic_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// An error and its causes, joined (reqwest's own message often names
/// only the URL or "error decoding response body").
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}

/// An error the proxy answers itself.
#[derive(Debug, Clone)]
pub struct ProxyError {
    /// The API whose shape the body takes.
    pub api: Api,
    /// The status.
    pub status: StatusCode,
    /// A short machine-readable code (`upstream_unreachable`, …).
    pub code: &'static str,
    /// What happened and what to do.
    pub message: String,
    /// `Retry-After` seconds, for 503.
    pub retry_after: Option<u64>,
}

impl ProxyError {
    /// An error with this status, code and message.
    pub fn new(
        api: Api,
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        ProxyError {
            api,
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
}

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl IntoResponse for ProxyError {
    fn into_response(self) -> Response {
        let body = self.api.error_body(self.status, self.code, &self.message);
        let mut res = (self.status, body.to_string()).into_response();
        let h = res.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(s) = self.retry_after {
            h.insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_pick_the_api() {
        assert_eq!(Api::for_path("/v1/messages"), Api::Anthropic);
        assert_eq!(Api::for_path("/v1/messages/"), Api::Anthropic);
        assert_eq!(Api::for_path("/v1/messages/count_tokens"), Api::Anthropic);
        assert_eq!(Api::for_path("/v1/messagesx"), Api::OpenAi);
        assert_eq!(Api::for_path("/v1/chat/completions"), Api::OpenAi);
        assert_eq!(Api::for_path("/v1/models"), Api::OpenAi);
    }

    #[test]
    fn error_shapes() {
        let o = Api::OpenAi.error_body(StatusCode::BAD_GATEWAY, "upstream_unreachable", "down");
        assert_eq!(o["error"]["message"], "down");
        assert_eq!(o["error"]["code"], "upstream_unreachable");
        assert_eq!(o["error"]["type"], "server_error");
        let a = Api::Anthropic.error_body(StatusCode::BAD_GATEWAY, "x", "down");
        assert_eq!(a["type"], "error");
        assert_eq!(a["error"]["type"], "api_error");
        assert_eq!(a["error"]["message"], "down");
        let e = Api::Anthropic.error_event("x", "m");
        assert!(e.starts_with(b"event: error\ndata: {"));
        let e = Api::OpenAi.error_event("x", "m");
        assert!(e.ends_with(b"data: [DONE]\n\n"));
    }
}
