//! The guarded answer of a request: its stream or its whole reply through
//! the guard of its kind, with the tool-loop check.

use super::Route;
use crate::anthropic_stream::AnthropicStream;
use crate::api::{Api, ProxyError};
use crate::marks::LoopMarks;
use crate::openai_stream::{Kind, OpenAiStream};
use crate::relay::{pass_through_body, read_body, GuardedRelay, ReadError, StreamGuard};
use crate::request::RequestInfo;
use crate::state::ProxyState;
use crate::tool_args;
use crate::tool_loops::{log_found, History, LoopJudge};
use crate::tool_reply;
use crate::tool_stream::{ArgsWatch, Judging, ToolStream};
use crate::upstream::response_headers;
use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;

/// The tool-loop check of one request: the judge, the request's history,
/// and whether critical calls are blocked.
pub(super) struct Tools {
    pub(super) block: bool,
    pub(super) judge: LoopJudge,
    pub(super) history: History,
}

pub(super) fn end_reason(state: &ProxyState, api: Api) -> &str {
    match api {
        Api::OpenAi => &state.settings().finish_reason,
        Api::Anthropic => &state.settings().stop_reason,
    }
}

pub(super) fn guarded_stream(
    state: &ProxyState,
    route: Route,
    info: &RequestInfo,
    exact: bool,
    resp: reqwest::Response,
    tools: Option<Tools>,
) -> Response {
    let settings = state.stream_settings(info, exact, end_reason(state, route.api()));
    let guard = match route {
        Route::Chat => StreamGuard::OpenAi(Box::new(OpenAiStream::new(
            Kind::Chat,
            settings,
            info.n,
            info.include_usage,
        ))),
        Route::Completions => StreamGuard::OpenAi(Box::new(OpenAiStream::new(
            Kind::Completion,
            settings,
            info.n,
            info.include_usage,
        ))),
        Route::Messages => StreamGuard::Anthropic(Box::new(AnthropicStream::new(settings))),
    };
    let status = resp.status();
    let headers = response_headers(resp.headers(), true);
    let s = state.settings();
    let relay = GuardedRelay::new(
        resp.bytes_stream().boxed(),
        guard,
        s.max_event_bytes,
        s.idle_timeout(),
        Some(state.metrics().clone()),
    )
    .with_feed(state.feed(info.model.as_deref()));
    let judging = tools.map(|t| Judging {
        judge: t.judge,
        history: t.history,
        block: t.block,
    });
    let args = state.tool_args().map(|action| ArgsWatch {
        action,
        config: state.clamp().clone(),
        end_reason: end_reason(state, route.api()).to_string(),
    });
    let calls = matches!(route, Route::Chat | Route::Messages);
    let relay = if calls && (judging.is_some() || args.is_some()) {
        relay.with_tools(ToolStream::new(
            route.api(),
            judging,
            args,
            info.n,
            info.include_usage,
        ))
    } else {
        relay
    };
    let mut res = Response::new(relay.into_body());
    *res.status_mut() = status;
    *res.headers_mut() = headers;
    res
}

pub(super) async fn guarded_reply(
    state: &ProxyState,
    route: Route,
    info: &RequestInfo,
    exact: bool,
    resp: reqwest::Response,
    tools: Option<Tools>,
    mut marks: LoopMarks,
) -> Response {
    let api = route.api();
    let settings = state.stream_settings(info, exact, end_reason(state, api));
    let status = resp.status();
    let upstream_headers = resp.headers().clone();
    let s = state.settings();
    let body = match read_body(
        resp.bytes_stream().boxed(),
        s.max_reply_bytes,
        s.idle_timeout(),
    )
    .await
    {
        Ok(b) => b,
        Err(ReadError::TooLong(read, rest)) => {
            tracing::warn!(
                limit = s.max_reply_bytes,
                "reply over proxy.max_reply_bytes passed through unguarded"
            );
            let mut res = Response::new(pass_through_body(read, rest, s.idle_timeout()));
            *res.status_mut() = status;
            *res.headers_mut() = response_headers(&upstream_headers, false);
            return marks.apply(res);
        }
        Err(ReadError::Failed(msg)) => {
            return ProxyError::new(api, StatusCode::BAD_GATEWAY, "upstream_error", msg)
                .into_response()
        }
    };
    let guarded = match route {
        Route::Chat => crate::reply::guard_openai(Kind::Chat, &body, &settings),
        Route::Completions => crate::reply::guard_openai(Kind::Completion, &body, &settings),
        Route::Messages => crate::reply::guard_anthropic(&body, &settings),
    };
    for c in &guarded.cuts {
        let detector = serde_json::to_value(c.detector)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        tracing::info!(
            detector,
            start = c.start,
            saved_chars = c.saved_chars,
            "loop cut"
        );
        state
            .metrics()
            .loop_cut("proxy", &detector, c.saved_chars as u64);
    }
    let feed = state.feed(info.model.as_deref());
    if let Some(feed) = &feed {
        for c in &guarded.cuts {
            feed.cut(c);
        }
        if guarded
            .headers
            .iter()
            .any(|(k, v)| *k == "x-deloop-json" && v == "repaired")
        {
            feed.json_rescue("the reply was repaired into valid JSON");
        }
    }
    let mut rewritten = guarded.body.is_some();
    let mut body: Bytes = guarded.body.unwrap_or(body);
    if let Some(action) = state.tool_args() {
        let end = end_reason(state, api);
        let cut = match route {
            Route::Chat => tool_args::guard_openai(&body, action, state.clamp(), end),
            Route::Messages => tool_args::guard_anthropic(&body, action, state.clamp(), end),
            Route::Completions => Default::default(),
        };
        for c in &cut.cuts {
            crate::tool_args::log_cut(c, Some(state.metrics()));
        }
        if let Some(c) = cut.cuts.first() {
            for (name, value) in c.headers() {
                marks.header(name, &value);
            }
        }
        if let Some(b) = cut.body {
            body = b;
            rewritten = true;
        }
    }
    if let Some(t) = tools {
        let judged = match route {
            Route::Chat => tool_reply::guard_openai(&body, &t.judge, &t.history, t.block),
            Route::Messages => tool_reply::guard_anthropic(&body, &t.judge, &t.history, t.block),
            Route::Completions => Default::default(),
        };
        for f in &judged.found {
            log_found(
                "reply",
                &f.tool,
                &f.verdict,
                f.action,
                Some(state.metrics()),
            );
            if let Some(feed) = &feed {
                feed.tool_loop("reply", &f.tool, &f.verdict, f.action);
            }
            marks.action(f.action);
        }
        for (name, value) in judged.headers() {
            marks.header(name, &value);
        }
        if let Some(b) = judged.body {
            body = b;
            rewritten = true;
        }
    }
    let mut headers = response_headers(&upstream_headers, rewritten);
    for (name, value) in &guarded.headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(*name, v);
        }
    }
    if rewritten {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    let mut res = Response::new(Body::from(body));
    *res.status_mut() = status;
    *res.headers_mut() = headers;
    marks.apply(res)
}
