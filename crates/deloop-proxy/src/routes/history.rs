//! A chat request's history, read and replayed off the async threads, and
//! looped assistant text in it found and clamped, passed or refused.

use crate::api::{Api, ProxyError};
use crate::marks::LoopMarks;
use crate::state::ProxyState;
use crate::tool_loops::{
    append_message, note_message, warning_note, History, LoopJudge, ToolLoopAction,
};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

/// Looped assistant text in a request's history (`proxy.history_loops`):
/// found on a blocking thread (bodies within `proxy.max_history_bytes`),
/// reported in `x-deloop-history-loops` (`clamped`, `passed`) and
/// `x-deloop-history-loops-at` (the fields), and clamped, passed or
/// refused. `Ok(Some(body))`: forward this body instead.
pub(super) async fn looped_history(
    state: &ProxyState,
    api: Api,
    bytes: &Bytes,
    marks: &mut LoopMarks,
) -> Result<Option<Bytes>, Box<Response>> {
    use crate::history_text::{scan, HistoryLoopAction};
    let s = state.settings();
    let action = HistoryLoopAction::parse(&s.history_loops).unwrap_or(HistoryLoopAction::Clamp);
    if bytes.len() > s.max_history_bytes {
        return Ok(None);
    }
    let config = state.0.clamp.clone();
    let body = bytes.clone();
    let rewrite = action == HistoryLoopAction::Clamp;
    let scanned = tokio::task::spawn_blocking(move || scan(api, &body, &config, rewrite))
        .await
        .unwrap_or_default();
    if scanned.found.is_empty() {
        return Ok(None);
    }
    let at: Vec<String> = scanned.found.iter().map(|f| f.describe()).collect();
    tracing::info!(found = %at.join("; "), action = %s.history_loops, "looped text in the request's history");
    if action == HistoryLoopAction::Reject {
        return Err(Box::new(
            ProxyError::new(
                api,
                StatusCode::BAD_REQUEST,
                "history_loop",
                format!(
                    "the request's history holds looped assistant text: {}; send it without \
                     the repeats, or let the proxy clamp them (proxy.history_loops = \"clamp\")",
                    at.join("; ")
                ),
            )
            .into_response(),
        ));
    }
    let fields: Vec<String> = scanned
        .found
        .iter()
        .map(|f| format!("messages[{}].{}", f.message, f.field))
        .collect();
    marks.header("x-deloop-history-loops-at", &fields.join(", "));
    marks.header(
        "x-deloop-history-loops",
        if rewrite { "clamped" } else { "passed" },
    );
    Ok(scanned.body.map(Bytes::from))
}

/// A request's history, replayed: the history, the verdict on its latest
/// round, and the request with the warning note appended (when one is).
pub(super) struct Replayed {
    pub(super) history: History,
    pub(super) round: Option<crate::tool_loops::RoundVerdict>,
    pub(super) noted: Option<Bytes>,
}

/// Reads and replays a chat request's history on a blocking thread (the
/// parse and the replay are CPU work that must not stall the async threads
/// that answer every other request), at most `replay_permits` at once, and
/// only for a body within `proxy.max_history_bytes` (parsed JSON takes
/// many times its size): a larger one is refused with 413.
pub(super) async fn replay_history(
    state: &ProxyState,
    api: Api,
    action: ToolLoopAction,
    judge: &LoopJudge,
    bytes: &Bytes,
) -> Result<Replayed, Box<Response>> {
    let cap = state.settings().max_history_bytes;
    if bytes.len() > cap {
        return Err(Box::new(
            ProxyError::new(
                api,
                StatusCode::PAYLOAD_TOO_LARGE,
                "history_too_large",
                format!(
                    "the request is {} bytes, over the {cap} bytes of history the tool-loop \
                     check replays (proxy.max_history_bytes): shorten the history, raise the \
                     setting, or turn the check off with proxy.tool_loops = \"off\"",
                    bytes.len()
                ),
            )
            .into_response(),
        ));
    }
    // The semaphore is never closed.
    let _permit = state.0.replays.clone().acquire_owned().await.ok();
    let judge = judge.clone();
    let body = bytes.clone();
    let work = tokio::task::spawn_blocking(move || {
        let history = serde_json::from_slice::<serde_json::Value>(&body)
            .map(|v| History::from_body(api, &v))
            .unwrap_or_default();
        let round = judge.history(&history);
        let noted = match &round {
            Some(round) if action >= ToolLoopAction::Warn && !history.ends_with_assistant => {
                let note = note_message(api, &warning_note(round));
                append_message(&body, &note).map(Bytes::from)
            }
            _ => None,
        };
        Replayed {
            history,
            round,
            noted,
        }
    });
    work.await.map_err(|e| {
        Box::new(
            ProxyError::new(
                api,
                StatusCode::INTERNAL_SERVER_ERROR,
                "history_replay_failed",
                format!("the tool-loop check of the request's history failed: {e}"),
            )
            .into_response(),
        )
    })
}
