//! `/v1/sessions/{session}/…`: the live-agent API. Call before a tool
//! runs; record its result after; record compactions; forget the session.
//! `/v1/sessions` lists the live sessions page by page (the console's
//! Sessions page runs the same [`list_sessions`]).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use deloop_events::{EventKind, GuardEvent};

use serde::Deserialize;

use crate::error::{ApiError, ApiJson, ApiQuery};
use crate::openapi::{
    BadRequest, Conflict, NotFound, PayloadTooLarge, Unavailable, UnsupportedMediaType,
};
use crate::sessions::{
    CallInput, ResultInput, ResultOut, ScopeInput, SessionError, SessionPage, VerdictOut,
};
use crate::state::AppState;

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::BadEvent(m) => ApiError::new(StatusCode::CONFLICT, m),
            SessionError::Invalid(m) => ApiError::bad_request(m),
            SessionError::Store(m) => ApiError::unavailable(format!("session store: {m}"), 1),
        }
    }
}

/// `POST /v1/sessions/{session}/calls`: judges a call before it runs.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session}/calls",
    operation_id = "session_call",
    tag = "sessions",
    summary = "Judge a tool call before it runs",
    description = "Records the call in the session (created on first use) and answers its \
verdict, exactly as `deloop check` judges the same call in a transcript. `critical`: do not run \
the call; `terminate_run`: end the run now.",
    params(("session" = String, Path, description = "The session: one agent conversation (1 to 256 bytes).", min_length = 1, max_length = 256)),
    request_body = CallInput,
    responses(
        (status = 200, description = "The verdict.", body = VerdictOut),
        (status = 400, response = BadRequest),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 503, response = Unavailable),
    ),
)]
pub async fn call(
    State(state): State<AppState>,
    Path(session): Path<String>,
    ApiJson(body): ApiJson<CallInput>,
) -> Result<ApiJson<VerdictOut>, ApiError> {
    let tool = body.tool.clone();
    let args = serde_json::to_string(&body.args).unwrap_or_default();
    let v = state.sessions().call(&session, body).await?;
    let mut ev = GuardEvent::new(EventKind::SessionCall, "sessions");
    ev.session = Some(session);
    ev.tool = Some(tool);
    ev.args = Some(args);
    ev.level = Some(v.level.clone());
    ev.detector = v.detector.clone();
    ev.message = Some(v.message.clone()).filter(|m| !m.is_empty());
    ev.index = Some(v.index);
    ev.call_id = Some(v.id.clone());
    state.events().publish(ev);
    Ok(ApiJson(v))
}

/// `POST /v1/sessions/{session}/results`: attaches a result to its call.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session}/results",
    operation_id = "session_result",
    tag = "sessions",
    summary = "Record a tool call's result",
    description = "Attaches `result` (or `error`; exactly one of them) to its call: by `id`, or \
without one by `tool` and `args` (the oldest call with those arguments still waiting). \
`verdict` is set when the result replaced the call's verdict.",
    params(("session" = String, Path, description = "The session (1 to 256 bytes).", min_length = 1, max_length = 256)),
    request_body = ResultInput,
    responses(
        (status = 200, description = "Where the result attached.", body = ResultOut),
        (status = 400, response = BadRequest),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 503, response = Unavailable),
    ),
)]
pub async fn result(
    State(state): State<AppState>,
    Path(session): Path<String>,
    ApiJson(body): ApiJson<ResultInput>,
) -> Result<ApiJson<ResultOut>, ApiError> {
    // The store checks the body (one of `result` and `error`, a way to
    // find the call, field caps) before anything is stored: a 400.
    let status = if body.error.is_some() { "error" } else { "ok" };
    let call_id = body.id.clone();
    let out = state.sessions().result(&session, body).await?;
    let mut ev = GuardEvent::new(EventKind::SessionResult, "sessions");
    ev.session = Some(session);
    ev.status = Some(status.to_string());
    ev.index = out.index;
    ev.call_id = out.verdict.as_ref().map(|v| v.id.clone()).or(call_id);
    if let Some(v) = &out.verdict {
        ev.level = Some(v.level.clone());
        ev.detector = v.detector.clone();
    }
    state.events().publish(ev);
    Ok(ApiJson(out))
}

/// `POST /v1/sessions/{session}/compaction`: records a context compaction.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session}/compaction",
    operation_id = "session_compaction",
    tag = "sessions",
    summary = "Record a context compaction",
    description = "Arms the post-compaction guard for the agent and run. The body is optional \
(none: the main agent, no run).",
    params(("session" = String, Path, description = "The session (1 to 256 bytes).", min_length = 1, max_length = 256)),
    request_body(content = Option<ScopeInput>, content_type = "application/json", description = "Where the compaction happened; optional."),
    responses(
        (status = 204, description = "Recorded."),
        (status = 400, response = BadRequest),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ),
)]
pub async fn compaction(
    State(state): State<AppState>,
    Path(session): Path<String>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<StatusCode, ApiError> {
    // Over `max_body_bytes` is a problem+json 413 like every other body.
    let body = body
        .map_err(|r| ApiError::unreadable_body(&r, "the request body", StatusCode::BAD_REQUEST))?;
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
#[utoipa::path(
    delete,
    path = "/v1/sessions/{session}",
    operation_id = "session_forget",
    tag = "sessions",
    summary = "Forget a session",
    params(("session" = String, Path, description = "The session (1 to 256 bytes).", min_length = 1, max_length = 256)),
    responses(
        (status = 204, description = "Forgotten."),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 503, response = Unavailable),
    ),
)]
pub async fn forget(
    State(state): State<AppState>,
    Path(session): Path<String>,
) -> Result<Response, ApiError> {
    if state.sessions().forget(&session).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found(format!("no session {session:?}")))
    }
}

/// Sessions a listing page holds when the request does not say.
pub const DEFAULT_LIST_LIMIT: usize = 50;

/// `GET /v1/sessions` query (and the console's Sessions page's).
#[derive(Debug, Default, Clone, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// The `next` of the page before; absent for the first page.
    #[param(max_length = 600)]
    pub cursor: Option<String>,
    /// Sessions per page (default 50, at most 500).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<usize>,
}

/// One page of the live sessions from the session store: the flow of
/// `GET /v1/sessions` and of the console's Sessions page.
pub async fn list_sessions(state: &AppState, q: &ListQuery) -> Result<SessionPage, ApiError> {
    let limit = q.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    if !(1..=deloop_sessions::MAX_LIST_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "`limit`: {limit} is not between 1 and {}",
            deloop_sessions::MAX_LIST_LIMIT
        )));
    }
    let cursor = q.cursor.as_deref().filter(|c| !c.is_empty());
    Ok(state.sessions().list(cursor, limit).await?)
}

/// `GET /v1/sessions`: one page of the live sessions.
#[utoipa::path(
    get,
    path = "/v1/sessions",
    operation_id = "session_list",
    tag = "sessions",
    summary = "List the live sessions",
    description = "One page of the sessions the session store holds (every replica's, with a \
shared store), each with its event count and idle time. Pass `next` as `cursor` until it is \
null; a page may hold fewer sessions than `limit`, even none, before the end. A page costs the \
store at most `limit` sessions of memory, never a scan of every session into memory.",
    params(ListQuery),
    responses(
        (status = 200, description = "One page.", body = SessionPage),
        (status = 400, response = BadRequest),
        (status = 503, response = Unavailable),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<ApiJson<SessionPage>, ApiError> {
    Ok(ApiJson(list_sessions(&state, &q).await?))
}
