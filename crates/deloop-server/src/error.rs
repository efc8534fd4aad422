//! Errors as HTTP answers: `application/problem+json` (RFC 9457) with a
//! status, a short title and a detail that names the problem and what to do.

use axum::extract::rejection::{BytesRejection, JsonRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person and a program to read.
    pub detail: String,
    /// Extra headers (for example `Retry-After`).
    pub retry_after: Option<u64>,
}

/// The body of every error answer: an RFC 9457 problem
/// (`application/problem+json`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Problem<'a> {
    /// Always `about:blank`: the status says what kind of problem it is.
    #[serde(rename = "type")]
    #[schema(example = "about:blank")]
    pub kind: &'static str,
    /// The status's reason phrase (`Bad Request`, …).
    pub title: &'a str,
    /// The HTTP status.
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    /// What went wrong, for a person and a program to read: names the
    /// field, the limit or the key setting.
    pub detail: &'a str,
}

impl ApiError {
    /// A body that could not be read (`what` names it, e.g. `the
    /// transcript`): a 413 over `server.max_body_bytes`, else `status`.
    pub(crate) fn unreadable_body(r: &BytesRejection, what: &str, status: StatusCode) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("{what} is larger than the server's limit (server.max_body_bytes)"),
            )
        } else {
            Self::new(status, format!("cannot read {what}: {}", r.body_text()))
        }
    }

    /// An error with this status and detail.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    /// 404: no such thing.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    /// 422: well-formed but nothing can be done with it.
    pub fn unprocessable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    /// 500: a fault of the server (never for bad input).
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, detail)
    }

    /// 503 with `Retry-After`.
    pub fn unavailable(detail: impl Into<String>, retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, detail)
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.detail)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Problem {
            kind: "about:blank",
            title: self.status.canonical_reason().unwrap_or("error"),
            status: self.status.as_u16(),
            detail: &self.detail,
        };
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        let mut res = (self.status, bytes).into_response();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(s) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        res
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        match r {
            JsonRejection::MissingJsonContentType(_) => Self::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "expected a JSON body with `Content-Type: application/json`",
            ),
            JsonRejection::BytesRejection(b) => {
                Self::unreadable_body(&b, "the request body", b.status())
            }
            // Syntax and data errors are the client's: 400, naming the field.
            JsonRejection::JsonDataError(e) => Self::bad_request(format!(
                "invalid JSON body: {}",
                e.body_text().trim_start_matches(
                    "Failed to deserialize the JSON body into the target type: "
                )
            )),
            JsonRejection::JsonSyntaxError(e) => Self::bad_request(format!(
                "malformed JSON body: {}",
                e.body_text()
                    .trim_start_matches("Failed to parse the request body as JSON: ")
            )),
            other => Self::new(other.status(), other.body_text()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        Self::bad_request(format!(
            "invalid query string: {}",
            r.body_text()
                .trim_start_matches("Failed to deserialize query string: ")
        ))
    }
}

/// `axum::Json` whose rejections are [`ApiError`]s (problem+json, 400 for
/// malformed bodies and missing fields, 413, 415).
#[derive(Debug, Clone, Copy, Default, axum::extract::FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

impl<T: Serialize> IntoResponse for ApiJson<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `axum::extract::Query` whose rejections are [`ApiError`]s.
#[derive(Debug, Clone, Copy, Default, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);
