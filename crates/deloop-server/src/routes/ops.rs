//! Operations: liveness, readiness and metrics.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;

use crate::error::ApiError;
use crate::state::AppState;

/// `GET /healthz`: the process answers.
pub async fn healthz() -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        "ok\n",
    )
}

/// `GET /readyz`: 200 once the index is open, 503 before.
pub async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    if state.is_ready() {
        Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain")],
            "ready\n",
        ))
    } else {
        Err(ApiError::unavailable("the index is still opening", 1))
    }
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics().render(),
    )
}
