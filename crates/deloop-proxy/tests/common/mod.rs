//! A scripted fake upstream on 127.0.0.1 speaking the real OpenAI and
//! Anthropic wire formats (JSON bodies, SSE streams, split anywhere), and
//! a proxy started in front of it. The fake records every request and
//! notices when a stream's client (the proxy) goes away.
#![allow(dead_code)]

pub mod histories;
pub mod litellm;
pub mod sdk;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use deloop_config::ProxySettings;
use deloop_http::auth::ApiKeys;
use deloop_http::metrics::Metrics;
use deloop_proxy::ProxyState;
use serde_json::{json, Value};

/// One scripted reply.
#[derive(Clone)]
pub enum Reply {
    /// A body with this status and these headers.
    Raw {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    },
    /// An SSE body sent in these pieces (any split), `gap` apart, then
    /// ended, stalled, or broken.
    Pieces {
        pieces: Vec<Vec<u8>>,
        gap: Duration,
        then: Then,
    },
    /// An SSE stream: `prefix` events, then `repeat` up to `max` times
    /// (`gap` apart), then `suffix`; progress in the fake's [`Probe`].
    Loop {
        prefix: Vec<String>,
        repeat: Vec<String>,
        max: usize,
        suffix: Vec<String>,
        gap: Duration,
    },
    /// Waits, then answers.
    Slow(Duration, Box<Reply>),
    /// An SSE stream that sends these events at once, then holds the
    /// connection open without an end until its client drops it; progress
    /// in the fake's [`Probe`]. A test then knows the exact event at which
    /// the upstream saw the close: the last one, whatever the speed.
    Held(Vec<String>),
}

/// What a [`Reply::Pieces`] stream does after its last piece.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Then {
    End,
    Stall,
    Drop,
}

/// What the fake saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// Progress of the looping streams.
#[derive(Default)]
pub struct Probe {
    /// Events sent so far (all streams).
    pub sent: AtomicUsize,
    /// Streams whose body was dropped before its end (the client left).
    pub dropped_early: AtomicUsize,
    /// Streams that ran to their end.
    pub completed: AtomicUsize,
}

struct Script {
    replies: Mutex<VecDeque<Reply>>,
    /// Used when the script is exhausted (for load tests).
    default: Mutex<Option<Reply>>,
    seen: Mutex<Vec<Seen>>,
    probe: Arc<Probe>,
    /// Only requests whose path ends with this take a reply of the script;
    /// others are answered 404 (a caller's own probes, such as LiteLLM's
    /// `GET /v1/models`).
    only: Option<&'static str>,
}

/// A running fake upstream.
pub struct Fake {
    pub url: String,
    script: Arc<Script>,
}

impl Fake {
    pub async fn start(replies: Vec<Reply>) -> Fake {
        Fake::start_only(None, replies).await
    }

    /// A fake whose script answers only paths ending with `only`.
    pub async fn start_only(only: Option<&'static str>, replies: Vec<Reply>) -> Fake {
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into()),
            default: Mutex::new(None),
            seen: Mutex::new(Vec::new()),
            probe: Arc::new(Probe::default()),
            only,
        });
        let app = Router::new().fallback(handle).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Fake {
            url: format!("http://{addr}"),
            script,
        }
    }

    /// Answers every request beyond the script with `reply`.
    pub fn always(&self, reply: Reply) {
        *self.script.default.lock().unwrap() = Some(reply);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.script.seen.lock().unwrap().clone()
    }

    pub fn last(&self) -> Seen {
        self.seen().pop().expect("the fake saw a request")
    }

    pub fn probe(&self) -> Arc<Probe> {
        self.script.probe.clone()
    }
}

async fn handle(State(script): State<Arc<Script>>, req: Request) -> Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    if script.only.is_some_and(|only| !path.ends_with(only)) {
        return (StatusCode::NOT_FOUND, "not scripted").into_response();
    }
    let query = req.uri().query().map(str::to_string);
    let headers = req.headers().clone();
    let body = axum::body::to_bytes(req.into_body(), 64 << 20)
        .await
        .unwrap_or_default();
    script.seen.lock().unwrap().push(Seen {
        method,
        path,
        query,
        headers,
        body,
    });
    let next = script.replies.lock().unwrap().pop_front();
    let next = next.or_else(|| script.default.lock().unwrap().clone());
    match next {
        Some(reply) => respond(reply, script.probe.clone()).await,
        None => (StatusCode::IM_A_TEAPOT, "script exhausted").into_response(),
    }
}

fn sse(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("x-request-id", "upstream-req-1")
        .body(body)
        .unwrap()
}

/// Counts a looping body dropped before its end.
struct DropFlag {
    probe: Arc<Probe>,
    done: bool,
}

impl Drop for DropFlag {
    fn drop(&mut self) {
        if self.done {
            self.probe.completed.fetch_add(1, Ordering::SeqCst);
        } else {
            self.probe.dropped_early.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn respond(reply: Reply, probe: Arc<Probe>) -> Response {
    match reply {
        Reply::Raw {
            status,
            headers,
            body,
        } => {
            let mut r = Response::builder().status(status);
            for (k, v) in headers {
                r = r.header(k, v);
            }
            r.body(Body::from(body)).unwrap()
        }
        Reply::Pieces { pieces, gap, then } => {
            let stream = futures_util::stream::unfold(0usize, move |i| {
                let pieces = pieces.clone();
                async move {
                    if i > 0 && i <= pieces.len() && !gap.is_zero() {
                        tokio::time::sleep(gap).await;
                    }
                    if i < pieces.len() {
                        return Some((Ok(Bytes::from(pieces[i].clone())), i + 1));
                    }
                    match then {
                        Then::End => None,
                        Then::Stall => {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            None
                        }
                        Then::Drop if i == pieces.len() => {
                            Some((Err(std::io::Error::other("connection dropped")), i + 1))
                        }
                        Then::Drop => None,
                    }
                }
            });
            sse(Body::from_stream(stream))
        }
        Reply::Loop {
            prefix,
            repeat,
            max,
            suffix,
            gap,
        } => {
            let flag = DropFlag { probe, done: false };
            let total = prefix.len() + max + suffix.len();
            let stream = futures_util::stream::unfold((0usize, flag), move |(i, mut flag)| {
                let (prefix, repeat, suffix) = (prefix.clone(), repeat.clone(), suffix.clone());
                async move {
                    if i >= total {
                        flag.done = true;
                        drop(flag);
                        return None;
                    }
                    if i > 0 && !gap.is_zero() {
                        tokio::time::sleep(gap).await;
                    }
                    let data = if i < prefix.len() {
                        prefix[i].clone()
                    } else if i < prefix.len() + max {
                        repeat[(i - prefix.len()) % repeat.len()].clone()
                    } else {
                        suffix[i - prefix.len() - max].clone()
                    };
                    flag.probe.sent.fetch_add(1, Ordering::SeqCst);
                    Some((Ok::<_, Infallible>(Bytes::from(data)), (i + 1, flag)))
                }
            });
            sse(Body::from_stream(stream))
        }
        Reply::Held(events) => {
            let flag = DropFlag { probe, done: false };
            let stream = futures_util::stream::unfold((0usize, flag), move |(i, flag)| {
                let data = events.get(i).cloned();
                async move {
                    let Some(data) = data else {
                        // Held open: only the client can end it.
                        std::future::pending::<()>().await;
                        return None;
                    };
                    flag.probe.sent.fetch_add(1, Ordering::SeqCst);
                    Some((Ok::<_, Infallible>(Bytes::from(data)), (i + 1, flag)))
                }
            });
            sse(Body::from_stream(stream))
        }
        Reply::Slow(wait, inner) => {
            tokio::time::sleep(wait).await;
            Box::pin(respond(*inner, probe)).await
        }
    }
}

/// A JSON reply.
pub fn json_reply(status: u16, v: Value) -> Reply {
    Reply::Raw {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: v.to_string().into_bytes(),
    }
}

/// An SSE reply of whole events, sent at once.
pub fn sse_reply(events: &[String]) -> Reply {
    Reply::Pieces {
        pieces: vec![events.concat().into_bytes()],
        gap: Duration::ZERO,
        then: Then::End,
    }
}

// --- OpenAI wire format -------------------------------------------------

pub const CHAT_ID: &str = "chatcmpl-fake1";
pub const MODEL: &str = "fake-model";
pub const CREATED: u64 = 1_700_000_000;

/// One chat chunk event with this delta for choice `index`.
pub fn chat_delta(index: usize, delta: Value, finish: Option<&str>) -> String {
    let v = json!({
        "id": CHAT_ID, "object": "chat.completion.chunk", "created": CREATED,
        "model": MODEL, "system_fingerprint": "fp_fake",
        "choices": [{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    format!("data: {v}\n\n")
}

pub fn chat_text(index: usize, text: &str) -> String {
    chat_delta(index, json!({"content": text}), None)
}

pub fn chat_role(index: usize) -> String {
    chat_delta(index, json!({"role": "assistant", "content": ""}), None)
}

pub fn chat_finish(index: usize, reason: &str) -> String {
    chat_delta(index, json!({}), Some(reason))
}

pub fn chat_usage(prompt: u64, completion: u64) -> String {
    let v = json!({
        "id": CHAT_ID, "object": "chat.completion.chunk", "created": CREATED,
        "model": MODEL, "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    });
    format!("data: {v}\n\n")
}

pub const DONE: &str = "data: [DONE]\n\n";

/// A whole healthy chat stream of these text pieces.
pub fn chat_stream(pieces: &[&str]) -> Vec<String> {
    let mut ev = vec![chat_role(0)];
    ev.extend(pieces.iter().map(|p| chat_text(0, p)));
    ev.push(chat_finish(0, "stop"));
    ev.push(DONE.to_string());
    ev
}

/// A non-streamed chat completion.
pub fn chat_completion(contents: &[&str]) -> Value {
    let choices: Vec<Value> = contents
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"index": i, "message": {"role": "assistant", "content": c},
                   "logprobs": null, "finish_reason": "length"})
        })
        .collect();
    json!({
        "id": CHAT_ID, "object": "chat.completion", "created": CREATED, "model": MODEL,
        "choices": choices,
        "usage": {"prompt_tokens": 5, "completion_tokens": 100, "total_tokens": 105},
    })
}

// --- Anthropic wire format ----------------------------------------------

pub fn anthropic_event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

pub fn message_start() -> String {
    anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_fake1", "type": "message", "role": "assistant", "content": [],
            "model": MODEL, "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 1}}}),
    )
}

pub fn block_start(index: usize, kind: &str) -> String {
    let block = match kind {
        "thinking" => json!({"type": "thinking", "thinking": ""}),
        _ => json!({"type": "text", "text": ""}),
    };
    anthropic_event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

pub fn text_delta(index: usize, text: &str) -> String {
    anthropic_event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "text_delta", "text": text}}),
    )
}

pub fn thinking_delta(index: usize, text: &str) -> String {
    anthropic_event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "thinking_delta", "thinking": text}}),
    )
}

pub fn block_stop(index: usize) -> String {
    anthropic_event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

pub fn message_end(stop_reason: &str, output_tokens: u64) -> Vec<String> {
    vec![
        anthropic_event(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": output_tokens}}),
        ),
        anthropic_event("message_stop", json!({"type": "message_stop"})),
    ]
}

/// A whole healthy Messages stream of these text pieces.
pub fn messages_stream(pieces: &[&str]) -> Vec<String> {
    let mut ev = vec![message_start(), block_start(0, "text")];
    ev.push(anthropic_event("ping", json!({"type": "ping"})));
    ev.extend(pieces.iter().map(|p| text_delta(0, p)));
    ev.push(block_stop(0));
    ev.extend(message_end("end_turn", 20));
    ev
}

// --- Text --------------------------------------------------------------

/// Healthy prose, long enough to matter.
pub fn healthy_text() -> String {
    "Rust's ownership model gives memory safety without a garbage collector. \
     Each value has one owner; borrowing lets code use a value without taking it. \
     The compiler checks lifetimes so that references never outlive their data. \
     Traits describe shared behaviour, and generics let functions work over many types. \
     Cargo builds the project, runs its tests and fetches its dependencies. "
        .to_string()
}

/// The unit of a looping stream.
pub const LOOP_UNIT: &str = "and then the model says the same thing again ";

/// Splits `s` into pieces of about `n` bytes on character boundaries.
pub fn pieces(s: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        cur.push(c);
        if cur.len() >= n {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

// --- The proxy ----------------------------------------------------------

/// A running proxy.
pub struct Proxy {
    pub url: String,
    pub state: ProxyState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

pub fn settings(upstream: &str) -> ProxySettings {
    ProxySettings {
        upstream: upstream.to_string(),
        ..ProxySettings::default()
    }
}

pub async fn start_proxy_with(
    settings: ProxySettings,
    upstream_key: Option<&str>,
    keys: ApiKeys,
) -> Proxy {
    let state = ProxyState::new(
        settings,
        Default::default(),
        upstream_key,
        keys,
        Arc::new(Metrics::new()),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(deloop_proxy::serve(
        listener,
        state.clone(),
        async move {
            let _ = rx.await;
        },
        Duration::from_secs(1),
    ));
    Proxy {
        url,
        state,
        stop: Some(tx),
    }
}

pub async fn start_proxy(upstream: &str) -> Proxy {
    start_proxy_with(settings(upstream), None, ApiKeys::default()).await
}

pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Raw bytes: no decoding of compressed bodies on the test's side.
    reqwest::Client::builder()
        .no_proxy()
        .no_gzip()
        .no_deflate()
        .build()
        .unwrap()
}

/// The events of an SSE body: (event name, data).
pub fn events(body: &str) -> Vec<(Option<String>, String)> {
    let mut r = deloop_proxy::sse::SseReader::new(1 << 24);
    let mut out = Vec::new();
    r.push(body.as_bytes(), &mut out).unwrap();
    out.extend(r.finish());
    out.into_iter()
        .filter_map(|e| e.data.map(|d| (e.event, d)))
        .collect()
}

/// The chat content of choice `index` in an SSE body, concatenated.
pub fn chat_content(body: &str, index: u64, field: &str) -> String {
    events(body)
        .iter()
        .filter(|(_, d)| d != "[DONE]")
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .flat_map(|v| v["choices"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["index"].as_u64() == Some(index))
        .filter_map(|c| c["delta"][field].as_str().map(String::from))
        .collect()
}

/// Waits (up to 20 s) until `cond` holds.
pub async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..2000 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}
