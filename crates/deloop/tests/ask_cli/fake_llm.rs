//! A scripted fake Gemini / OpenAI-compatible server on 127.0.0.1 and the
//! replies it sends.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---------------------------------------------------------------- fake server

#[derive(Clone)]
pub(crate) enum Reply {
    Json(u16, Value),
    Sse(Vec<String>),
    /// `prefix` events, then `repeat` up to `max` times, 2 ms apart.
    LoopSse {
        prefix: Vec<String>,
        repeat: String,
        max: usize,
    },
    Slow(Duration, Box<Reply>),
}

#[derive(Default)]
pub(crate) struct Probe {
    pub(crate) sent: AtomicUsize,
    pub(crate) finished: AtomicBool,
}

pub(crate) struct Script {
    pub(crate) replies: Mutex<VecDeque<Reply>>,
    pub(crate) seen: Mutex<Vec<(String, Value)>>,
    pub(crate) probe: Arc<Probe>,
}

pub(crate) struct Fake {
    pub(crate) url: String,
    pub(crate) script: Arc<Script>,
    pub(crate) _rt: tokio::runtime::Runtime,
}

impl Fake {
    pub(crate) fn start(replies: Vec<Reply>) -> Fake {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into()),
            seen: Mutex::new(Vec::new()),
            probe: Arc::new(Probe::default()),
        });
        let app = Router::new().fallback(handle).with_state(script.clone());
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Fake {
            url: format!("http://{addr}"),
            script,
            _rt: rt,
        }
    }

    pub(crate) fn hits(&self) -> usize {
        self.script.seen.lock().unwrap().len()
    }

    pub(crate) fn seen(&self) -> Vec<(String, Value)> {
        self.script.seen.lock().unwrap().clone()
    }
}

pub(crate) async fn handle(State(script): State<Arc<Script>>, req: Request) -> Response {
    let path = match req.uri().query() {
        Some(q) => format!("{}?{q}", req.uri().path()),
        None => req.uri().path().to_string(),
    };
    let bytes = axum::body::to_bytes(req.into_body(), 16 << 20)
        .await
        .unwrap_or_default();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    script.seen.lock().unwrap().push((path, body));
    let next = script.replies.lock().unwrap().pop_front();
    match next {
        Some(r) => respond(r, script.probe.clone()).await,
        None => (StatusCode::IM_A_TEAPOT, "script exhausted").into_response(),
    }
}

pub(crate) fn sse(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

pub(crate) async fn respond(reply: Reply, probe: Arc<Probe>) -> Response {
    match reply {
        Reply::Json(status, v) => {
            (StatusCode::from_u16(status).unwrap(), axum::Json(v)).into_response()
        }
        Reply::Sse(events) => sse(Body::from(
            events
                .iter()
                .map(|e| format!("data: {e}\n\n"))
                .collect::<String>(),
        )),
        Reply::LoopSse {
            prefix,
            repeat,
            max,
        } => {
            let stream = futures_util::stream::unfold(0usize, move |i| {
                let (prefix, repeat, probe) = (prefix.clone(), repeat.clone(), probe.clone());
                async move {
                    if i >= prefix.len() + max {
                        probe.finished.store(true, Ordering::SeqCst);
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let data = prefix.get(i).unwrap_or(&repeat);
                    probe.sent.fetch_add(1, Ordering::SeqCst);
                    Some((
                        Ok::<_, Infallible>(Bytes::from(format!("data: {data}\n\n"))),
                        i + 1,
                    ))
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

// ------------------------------------------------------------- wire formats

pub(crate) fn gemini(text: &str, finish: &str) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": finish, "index": 0}],
           "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}})
}

pub(crate) fn gemini_chunk(text: &str) -> String {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}]})
        .to_string()
}

pub(crate) fn gemini_last(text: &str) -> String {
    gemini(text, "STOP").to_string()
}

pub(crate) fn openai(text: &str) -> Value {
    json!({"id": "c1", "object": "chat.completion", "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop"}]})
}

pub(crate) fn openai_chunk(text: &str) -> String {
    json!({"id": "c1", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    .to_string()
}
