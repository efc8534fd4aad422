//! The seed's `POST /api/oracle`, `/api/help` and `/api/tutor`: one
//! question to the documentation oracle, answered as JSON (the object
//! `deloop ask --json` prints) or as server-sent events.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use deloop_oracle::{AskEvent, AskRequest, Mode, Oracle, Retrieval, Turn};
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use tokio::task::JoinHandle;

use crate::error::{ApiError, ApiJson};
use crate::openapi::{
    AskEventStream, BadRequest, OracleFailed, PayloadTooLarge, Unavailable, UnsupportedMediaType,
};
use crate::oracle::{api_error, oracle_of, record_cut, AskArgs, AskLang};
use crate::state::AppState;

/// The body of `/api/oracle`, `/api/help` and `/api/tutor`. Absent
/// options take the server's `[oracle]` defaults.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AskBody {
    /// The question (not empty).
    #[schema(min_length = 1)]
    pub question: String,
    /// `es`, `en` or `auto` (detect from the question).
    pub lang: Option<AskLang>,
    /// Passages to retrieve, 1 to `deloop_oracle::MAX_K` (100).
    #[schema(minimum = 1, maximum = 100)]
    pub k: Option<usize>,
    /// Retrieve with a HyDE passage written by the LLM.
    pub hyde: Option<bool>,
    /// `hybrid`, `lexical` or `vector`.
    pub retrieval: Option<Retrieval>,
    /// Earlier turns of the dialogue, oldest first (the tutor's).
    #[serde(default)]
    pub history: Vec<Turn>,
    /// Answer as server-sent events (also chosen by `Accept:
    /// text/event-stream`); `false` asks the LLM for one unstreamed reply.
    pub stream: Option<bool>,
}

impl AskBody {
    fn into_request(self, mode: Mode) -> AskRequest {
        let stream = self.stream;
        let mut req = AskArgs {
            question: self.question,
            mode: Some(mode),
            lang: self.lang,
            k: self.k,
            hyde: self.hyde,
            retrieval: self.retrieval,
            history: self.history,
        }
        .into_request();
        req.stream = stream;
        req
    }
}

/// What `/api/oracle`, `/api/help` and `/api/tutor` answer.
const ASK_DESCRIPTION: &str = "Asks the documentation oracle in the mode the path names \
(`oracle`: rich markdown with citations; `help`: short and plain; `tutor`: step by step, ending \
with open questions), as `deloop ask --mode MODE --json` does. Absent options take the server's \
`[oracle]` settings; unknown fields are a 400 that names them.\n\n\
JSON by default: the object `deloop ask --json` prints. Server-sent events when the request \
sends `Accept: text/event-stream` or `\"stream\": true` (events `meta`, `sources`, `delta`, \
`cut`, `done`, `error`). Upstream LLM faults are never errors: the answer is a 200 whose report \
has `degraded: true` and `llm_error` set. Until the index has opened the route answers 503 with \
`Retry-After`.";

/// One `/api/{mode}` handler and its documentation.
macro_rules! ask_route {
    ($(#[$doc:meta])* $name:ident, $path:literal, $mode:expr, $summary:literal) => {
        $(#[$doc])*
        #[utoipa::path(
            post,
            path = $path,
            tag = "oracle",
            summary = $summary,
            description = ASK_DESCRIPTION,
            request_body = AskBody,
            responses(
                (status = 200, description = "The answer report (`deloop ask --json`), or its events.", content(
                    (deloop_oracle::AskReport = "application/json"),
                    (AskEventStream = "text/event-stream"),
                )),
                (status = 400, response = BadRequest),
                (status = 413, response = PayloadTooLarge),
                (status = 415, response = UnsupportedMediaType),
                (status = 500, response = OracleFailed),
                (status = 503, response = Unavailable),
            ),
        )]
        pub async fn $name(
            State(state): State<AppState>,
            headers: HeaderMap,
            ApiJson(body): ApiJson<AskBody>,
        ) -> Result<Response, ApiError> {
            ask(state, $mode, &headers, body).await
        }
    };
}

ask_route!(
    /// `POST /api/oracle`.
    oracle, "/api/oracle", Mode::Oracle, "Ask the documentation oracle (rich markdown with citations)"
);
ask_route!(
    /// `POST /api/help`.
    help, "/api/help", Mode::Help, "Ask for help (short, plain answers)"
);
ask_route!(
    /// `POST /api/tutor`.
    tutor, "/api/tutor", Mode::Tutor, "Ask the tutor (step by step, with `history` for the dialogue)"
);

fn wants_events(headers: &HeaderMap, body: &AskBody) -> bool {
    body.stream == Some(true)
        || headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|m| m.trim().starts_with("text/event-stream"))
            })
}

async fn ask(
    state: AppState,
    mode: Mode,
    headers: &HeaderMap,
    body: AskBody,
) -> Result<Response, ApiError> {
    let oracle = oracle_of(&state)?;
    let sse = wants_events(headers, &body);
    let req = body.into_request(mode);
    if sse {
        // Bad requests are a 400 before the stream starts, as in JSON.
        oracle.check(&req).map_err(|e| api_error(&e))?;
        return Ok(events(state, oracle, req).into_response());
    }
    let outcome = oracle.ask(req).await.map_err(|e| api_error(&e))?;
    record_cut(&state, &outcome.report);
    Ok(ApiJson(outcome.report).into_response())
}

/// Aborts the ask when the response stream is dropped (the client went
/// away): dropping the ask's future closes the LLM connection, so the
/// upstream stops generating.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Events queued between the ask and a slow client before the ask waits
/// (deltas are merged while it waits, so the answer is never lost).
const EVENT_QUEUE: usize = 64;

fn events(
    state: AppState,
    oracle: Oracle,
    req: AskRequest,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(EVENT_QUEUE);
    let task = tokio::spawn(async move {
        // The error, if any, was sent as an `error` event.
        let _ = oracle.ask_with_events(req, tx).await;
    });
    let guard = AbortOnDrop(task);
    let idle = Duration::from_secs(state.settings().stream_idle_timeout_secs.max(1));
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    let timed = tokio_stream::StreamExt::timeout(stream, idle);
    let out = futures_util::stream::unfold(
        (Box::pin(timed), Some(guard), state),
        move |(mut s, guard, state)| async move {
            let guard = guard?;
            match s.next().await {
                None => None,
                Some(Ok(ev)) => {
                    if let AskEvent::Cut(cut) = &ev {
                        state
                            .metrics()
                            .loop_cut("oracle", &cut.detector, cut.saved_chars as u64);
                        crate::oracle::publish_cut(
                            &state,
                            &cut.detector,
                            cut.saved_chars as u64,
                            None,
                        );
                    }
                    let end = matches!(ev, AskEvent::Done(_) | AskEvent::Error(_));
                    let event = sse_event(&ev);
                    // After `done` or `error` the stream ends; the guard
                    // goes with it (the ask has finished by then).
                    Some((Ok(event), (s, (!end).then_some(guard), state)))
                }
                Some(Err(_elapsed)) => {
                    let ev = Event::default().event("error").data(
                        serde_json::json!({
                            "kind": "timeout",
                            "message": format!(
                                "no event for {} s (server.stream_idle_timeout_secs); the ask was cancelled",
                                idle.as_secs()
                            ),
                        })
                        .to_string(),
                    );
                    drop(guard);
                    Some((Ok(ev), (s, None, state)))
                }
            }
        },
    );
    Sse::new(out).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

fn sse_event(ev: &AskEvent) -> Event {
    Event::default()
        .event(ev.name())
        .data(ev.payload().to_string())
}
