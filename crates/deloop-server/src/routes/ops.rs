//! Operations: liveness, readiness, metrics and the OpenAPI document.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Extension;

use crate::error::ApiError;
use crate::openapi::Unavailable;
use crate::state::AppState;

/// `GET /healthz`: the process answers.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    summary = "Liveness: the process answers",
    description = "Always 200 while the process runs. Never needs a key.",
    responses((status = 200, description = "`ok`", body = String, content_type = "text/plain")),
)]
pub async fn healthz() -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        "ok\n",
    )
}

/// `GET /readyz`: 200 once the index is open and the session store
/// answers, 503 naming what is not ready.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Readiness: the index is open and the session store answers",
    description = "200 once the documentation index is open and the session store (Valkey/Redis \
when configured) answers; 503 with `Retry-After` and a JSON error naming what is not ready \
otherwise. Never needs a key. `/healthz` answers 200 whenever the process serves.",
    responses(
        (status = 200, description = "`ready`", body = String, content_type = "text/plain"),
        (status = 503, response = Unavailable),
    ),
)]
pub async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let mut not_ready = Vec::new();
    if let Err(e) = state.sessions().ready().await {
        not_ready.push(e.to_string());
    }
    if !state.is_ready() {
        not_ready.push(match state.oracle_waiting() {
            Some(why) => format!("the index cannot be reached yet (retrying): {why}"),
            None => "the index is still opening".to_string(),
        });
    }
    if !not_ready.is_empty() {
        return Err(ApiError::unavailable(not_ready.join("; "), 1));
    }
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        "ready\n",
    ))
}

/// `GET /metrics`: Prometheus text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    summary = "Prometheus metrics",
    description = "Requests and latency per route, loops cut and characters saved, tool-call \
verdicts by level and detector, sessions evicted and expired, load shed (OpenMetrics text).",
    responses((status = 200, description = "The metrics.", body = String, content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8")),
)]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics().render(),
    )
}

/// The OpenAPI document of a router, serialised once when the router is
/// built (an extension of every request).
#[derive(Debug, Clone)]
pub struct OpenApiJson(pub axum::body::Bytes);

/// `GET /openapi.json`: this server's OpenAPI 3.1 document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    summary = "This document",
    description = "The OpenAPI 3.1 document of this server, generated from its code: it lists \
exactly the routes this server serves (`/api/*` only when it has a documentation oracle).",
    responses((status = 200, description = "The OpenAPI document.", body = Object, content_type = "application/json")),
)]
pub async fn openapi(Extension(doc): Extension<OpenApiJson>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], doc.0)
}
