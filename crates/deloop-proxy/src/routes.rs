//! The handlers, kept thin: read the request, send it upstream, and hand
//! the reply to the guard of its kind ([`crate::openai_stream`],
//! [`crate::anthropic_stream`], [`crate::reply`]) or pass it through.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use crate::api::{causes, Api, ProxyError};
use crate::marks::LoopMarks;
use crate::relay::pass_through_body;
use crate::request;
use crate::state::ProxyState;
use crate::tool_loops::{log_found, ToolLoopAction};
use crate::upstream::response_headers;

mod history;
mod replies;

use history::{looped_history, replay_history};
use replies::{guarded_reply, guarded_stream, Tools};

/// The header that turns exact mode on for one request.
pub const EXACT_HEADER: &str = "x-deloop-exact";

/// A guarded route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/completions`.
    Completions,
    /// `POST /v1/messages`.
    Messages,
}

impl Route {
    fn api(self) -> Api {
        match self {
            Route::Messages => Api::Anthropic,
            _ => Api::OpenAi,
        }
    }
}

/// `/v1/chat/completions`: guarded when `POST`, passed through otherwise.
pub async fn chat(State(state): State<ProxyState>, req: Request) -> Response {
    guarded(state, Route::Chat, req).await
}

/// `/v1/completions`: guarded when `POST`, passed through otherwise.
pub async fn completions(State(state): State<ProxyState>, req: Request) -> Response {
    guarded(state, Route::Completions, req).await
}

/// `/v1/messages`: guarded when `POST`, passed through otherwise.
pub async fn messages(State(state): State<ProxyState>, req: Request) -> Response {
    guarded(state, Route::Messages, req).await
}

/// Every other path and method: passed through untouched.
pub async fn proxied(State(state): State<ProxyState>, req: Request) -> Response {
    pass_through(state, req).await
}

/// `POST /beta/litellm_basic_guardrail_api`: LiteLLM's Generic Guardrail
/// API ([`crate::litellm`]).
pub async fn litellm_guardrail(State(state): State<ProxyState>, req: Request) -> Response {
    let full_check = req
        .headers()
        .get(crate::litellm::FULL_CHECK_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1");
    let limit = state.settings().max_body_bytes;
    let bytes = match axum::body::to_bytes(req.into_body(), limit).await {
        Ok(b) => b,
        Err(_) => return too_large(Api::OpenAi, limit),
    };
    let bad = |msg: String| {
        ProxyError::new(
            Api::OpenAi,
            StatusCode::BAD_REQUEST,
            "invalid_guardrail_request",
            msg,
        )
        .into_response()
    };
    let cap = state.settings().max_history_bytes;
    if bytes.len() > cap {
        return ProxyError::new(
            Api::OpenAi,
            StatusCode::PAYLOAD_TOO_LARGE,
            "history_too_large",
            format!(
                "the guardrail request is {} bytes, over the {cap} bytes the checks replay \
                 (proxy.max_history_bytes): raise the setting or send a shorter request",
                bytes.len()
            ),
        )
        .into_response();
    }
    // Parsing and replaying are CPU work: on a blocking thread, a few at
    // once (see `replay_history`). The semaphore is never closed.
    let _permit = state.0.replays.clone().acquire_owned().await.ok();
    let worker = state.clone();
    let judged = tokio::task::spawn_blocking(move || {
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the guardrail request is not JSON: {e}"))?;
        let model = v.get("model").and_then(|m| m.as_str()).map(str::to_owned);
        let recall = crate::litellm::Recall {
            histories: &worker.0.recent,
            cost: bytes.len(),
            streams: (!full_check).then_some(&*worker.0.streams),
        };
        crate::litellm::guardrail_recalling(&v, &worker.0.clamp, worker.tool_loops(), &recall)
            .map(|a| (a, model))
            .map_err(|msg| format!("bad guardrail request: {msg}"))
    })
    .await;
    let judged = match judged {
        Ok(j) => j,
        Err(e) => {
            return ProxyError::new(
                Api::OpenAi,
                StatusCode::INTERNAL_SERVER_ERROR,
                "guardrail_failed",
                format!("the guardrail check failed: {e}"),
            )
            .into_response()
        }
    };
    match judged {
        Ok((answer, model)) => {
            let crate::litellm::Answer {
                value: out,
                findings: found,
                text_bytes,
                judged_bytes,
                cuts,
            } = answer;
            let metrics = state.metrics();
            metrics.guardrail_texts(text_bytes as u64, judged_bytes as u64);
            for (detector, saved) in cuts {
                let detector = serde_json::to_value(detector)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                metrics.loop_cut("litellm", &detector, saved as u64);
            }
            for (source, tool, verdict, done) in found {
                log_found(source, &tool, &verdict, done, Some(state.metrics()));
                if let Some(feed) = state.feed(model.as_deref()) {
                    feed.tool_loop(source, &tool, &verdict, done);
                }
            }
            axum::Json(out).into_response()
        }
        Err(msg) => bad(msg),
    }
}

/// `GET /deloop/healthz`.
pub async fn healthz() -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        "ok\n",
    )
}

/// `GET /deloop/metrics`: Prometheus text.
pub async fn metrics(State(state): State<ProxyState>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics().render(),
    )
}

fn flag(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
}

fn path_and_query(req: &axum::http::request::Parts) -> String {
    req.uri
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.as_str().to_string())
}

/// Sends a request upstream; the response head must come within `idle`.
async fn send(
    state: &ProxyState,
    rb: reqwest::RequestBuilder,
    api: Api,
) -> Result<reqwest::Response, ProxyError> {
    let s = state.settings();
    let base = state.upstream_url();
    let idle = s.idle_timeout();
    match tokio::time::timeout(idle, rb.send()).await {
        Ok(Ok(r)) => Ok(r),
        Err(_) => Err(ProxyError::new(
            api,
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            format!(
                "the upstream at {base} sent no response within {} s (proxy.idle_timeout_secs)",
                idle.as_secs()
            ),
        )),
        Ok(Err(e)) if e.is_connect() && e.is_timeout() => Err(ProxyError::new(
            api,
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            format!(
                "could not connect to the upstream at {base} within {} s (proxy.connect_timeout_secs)",
                s.connect_timeout_secs
            ),
        )),
        Ok(Err(e)) if e.is_connect() => Err(ProxyError::new(
            api,
            StatusCode::BAD_GATEWAY,
            "upstream_unreachable",
            format!(
                "cannot reach the upstream at {base} ({}); is it running, and is --upstream right?",
                causes(&e)
            ),
        )),
        Ok(Err(e)) => Err(ProxyError::new(
            api,
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            format!("the request to the upstream at {base} failed: {}", causes(&e)),
        )),
    }
}

/// The upstream's response, status, headers and body, unchanged.
fn untouched(state: &ProxyState, resp: reqwest::Response) -> Response {
    let status = resp.status();
    let headers = response_headers(resp.headers(), false);
    let body = pass_through_body(
        Default::default(),
        resp.bytes_stream().boxed(),
        state.settings().idle_timeout(),
    );
    let mut res = Response::new(body);
    *res.status_mut() = status;
    *res.headers_mut() = headers;
    res
}

fn too_large(api: Api, limit: usize) -> Response {
    ProxyError::new(
        api,
        StatusCode::PAYLOAD_TOO_LARGE,
        "request_too_large",
        format!("the request body is over {limit} bytes (proxy.max_body_bytes)"),
    )
    .into_response()
}

async fn pass_through(state: ProxyState, req: Request) -> Response {
    let api = Api::for_path(req.uri().path());
    let (parts, body) = req.into_parts();
    let limit = state.settings().max_body_bytes;
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(api, limit);
    }
    let has_body =
        declared.is_some_and(|n| n > 0) || parts.headers.contains_key(header::TRANSFER_ENCODING);
    let over = Arc::new(AtomicBool::new(false));
    let body = has_body.then(|| {
        let over = over.clone();
        let mut seen = 0usize;
        reqwest::Body::wrap_stream(body.into_data_stream().map(move |chunk| {
            let chunk = chunk.map_err(std::io::Error::other)?;
            seen += chunk.len();
            if seen > limit {
                over.store(true, Ordering::Relaxed);
                return Err(std::io::Error::other(
                    "request body over proxy.max_body_bytes",
                ));
            }
            Ok(chunk)
        }))
    });
    let rb = state.0.upstream.request(
        false,
        parts.method.clone(),
        &path_and_query(&parts),
        &parts.headers,
        body,
    );
    match send(&state, rb, api).await {
        Ok(resp) => untouched(&state, resp),
        Err(_) if over.load(Ordering::Relaxed) => too_large(api, limit),
        Err(e) => e.into_response(),
    }
}

async fn guarded(state: ProxyState, route: Route, req: Request) -> Response {
    if req.method() != Method::POST {
        return pass_through(state, req).await;
    }
    let api = route.api();
    let (parts, body) = req.into_parts();
    let s = state.settings();
    let bytes = match axum::body::to_bytes(body, s.max_body_bytes).await {
        Ok(b) => b,
        Err(e) => {
            let over = std::error::Error::source(&e)
                .is_some_and(|c| c.is::<http_body_util::LengthLimitError>());
            if over {
                return too_large(api, s.max_body_bytes);
            }
            return ProxyError::new(
                api,
                StatusCode::BAD_REQUEST,
                "request_unreadable",
                format!("the request body could not be read: {}", causes(&e)),
            )
            .into_response();
        }
    };
    let info = request::read(&bytes);
    let exact = flag(&parts.headers, EXACT_HEADER);
    let mut bytes = bytes;
    let mut marks = LoopMarks::default();
    if matches!(route, Route::Chat | Route::Messages) && info.is_some() {
        match looped_history(&state, api, &bytes, &mut marks).await {
            Ok(Some(clamped)) => bytes = clamped,
            Ok(None) => {}
            Err(res) => return *res,
        }
    }
    let tools = match (route, state.tool_loops(), &info) {
        (Route::Chat | Route::Messages, Some((action, judge)), Some(_)) => {
            let replayed = match replay_history(&state, api, action, judge, &bytes).await {
                Ok(r) => r,
                Err(res) => return *res,
            };
            if let Some(round) = &replayed.round {
                let done = if replayed.noted.is_some() {
                    "warned"
                } else {
                    "observed"
                };
                log_found(
                    "history",
                    &round.tool,
                    &round.verdict,
                    done,
                    Some(state.metrics()),
                );
                if let Some(feed) = state.feed(info.as_ref().and_then(|i| i.model.as_deref())) {
                    feed.tool_loop("history", &round.tool, &round.verdict, done);
                }
                marks.header("x-deloop-history-loop", round.verdict.level.as_str());
                if let Some(d) = round.verdict.detector {
                    marks.header("x-deloop-history-loop-detector", d.as_str());
                }
                marks.action(done);
            }
            if let Some(b) = replayed.noted {
                bytes = b;
            }
            Some(Tools {
                block: action == ToolLoopAction::Block,
                judge: judge.clone(),
                history: replayed.history,
            })
        }
        _ => None,
    };
    let rb = state.0.upstream.request(
        true,
        parts.method.clone(),
        &path_and_query(&parts),
        &parts.headers,
        Some(reqwest::Body::from(bytes)),
    );
    let resp = match send(&state, rb, api).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    // Errors, and requests the proxy could not read, pass untouched.
    let Some(info) = info.filter(|_| resp.status().is_success()) else {
        return marks.apply(untouched(&state, resp));
    };
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let is_sse = content_type.starts_with("text/event-stream");
    let is_json = content_type.contains("json");
    if !is_sse && !is_json {
        return marks.apply(untouched(&state, resp));
    }
    if let Some(enc) = resp
        .headers()
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .filter(|e| !e.eq_ignore_ascii_case("identity"))
    {
        return ProxyError::new(
            api,
            StatusCode::BAD_GATEWAY,
            "upstream_encoding",
            format!(
                "the upstream answered with Content-Encoding: {enc} although the proxy asked \
                 for identity; the proxy decodes only gzip and deflate"
            ),
        )
        .into_response();
    }
    if is_sse {
        marks.apply(guarded_stream(&state, route, &info, exact, resp, tools))
    } else {
        guarded_reply(&state, route, &info, exact, resp, tools, marks).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn exact_flag_values() {
        let mut h = HeaderMap::new();
        assert!(!flag(&h, EXACT_HEADER));
        h.insert(EXACT_HEADER, HeaderValue::from_static("1"));
        assert!(flag(&h, EXACT_HEADER));
        h.insert(EXACT_HEADER, HeaderValue::from_static("0"));
        assert!(!flag(&h, EXACT_HEADER));
    }
}
