//! `/v1/sessions/{session}/…`: the live-agent API. Call before a tool
//! runs; record its result after; record compactions; forget the session.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ApiJson};
use crate::sessions::{CallInput, ResultInput, ResultOut, ScopeInput, SessionError, VerdictOut};
use crate::state::AppState;

/// Longest accepted session name.
const MAX_SESSION_LEN: usize = 256;

fn check_name(session: &str) -> Result<(), ApiError> {
    if session.is_empty() || session.len() > MAX_SESSION_LEN {
        return Err(ApiError::bad_request(format!(
            "session names are 1 to {MAX_SESSION_LEN} bytes long"
        )));
    }
    Ok(())
}

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::BadEvent(m) => ApiError::new(StatusCode::CONFLICT, m),
            SessionError::Store(m) => ApiError::unavailable(format!("session store: {m}"), 1),
        }
    }
}

/// `POST /v1/sessions/{session}/calls`: judges a call before it runs.
pub async fn call(
    State(state): State<AppState>,
    Path(session): Path<String>,
    ApiJson(body): ApiJson<CallInput>,
) -> Result<ApiJson<VerdictOut>, ApiError> {
    check_name(&session)?;
    if body.tool.trim().is_empty() {
        return Err(ApiError::bad_request("field `tool` is empty"));
    }
    Ok(ApiJson(state.sessions().call(&session, body).await?))
}

/// `POST /v1/sessions/{session}/results`: attaches a result to its call.
pub async fn result(
    State(state): State<AppState>,
    Path(session): Path<String>,
    ApiJson(body): ApiJson<ResultInput>,
) -> Result<ApiJson<ResultOut>, ApiError> {
    check_name(&session)?;
    match (&body.result, &body.error) {
        (None, None) => return Err(ApiError::bad_request("missing field `result` (or `error`)")),
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "send one of `result` and `error`, not both",
            ))
        }
        _ => {}
    }
    if body.id.is_none() && (body.tool.is_none() || body.args.is_none()) {
        return Err(ApiError::bad_request(
            "a result without `id` needs fields `tool` and `args` to find its call",
        ));
    }
    Ok(ApiJson(state.sessions().result(&session, body).await?))
}

/// `POST /v1/sessions/{session}/compaction`: records a context compaction.
pub async fn compaction(
    State(state): State<AppState>,
    Path(session): Path<String>,
    body: axum::body::Bytes,
) -> Result<StatusCode, ApiError> {
    check_name(&session)?;
    // The body is optional: no body means the main agent, no run.
    let scope: ScopeInput = if body.iter().all(u8::is_ascii_whitespace) {
        ScopeInput::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?
    };
    state.sessions().compaction(&session, scope).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/sessions/{session}`: forgets the session.
pub async fn forget(
    State(state): State<AppState>,
    Path(session): Path<String>,
) -> Result<Response, ApiError> {
    check_name(&session)?;
    if state.sessions().forget(&session).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found(format!("no session {session:?}")))
    }
}
