//! A scripted fake LLM server on 127.0.0.1 for the client tests: it speaks
//! the real wire formats (JSON bodies, SSE streams) and records every
//! request it receives.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use deloop_llm::{
    CancellationToken, ClampConfig, GenerateRequest, Generation, LlmClient, LlmError,
};
use serde_json::Value;

/// One scripted reply.
#[derive(Clone)]
pub enum Reply {
    /// A JSON body with this status.
    Json(u16, Value),
    /// A JSON body with this status and one extra header.
    JsonHeader(u16, Value, &'static str, String),
    /// A raw text body with this status.
    Text(u16, String),
    /// An SSE stream: each string is one event's data.
    Sse(Vec<String>),
    /// An SSE stream that sends `prefix`, then `repeat` up to `max` times
    /// (1 ms apart), recording progress in the server's [`StreamProbe`].
    LoopSse {
        prefix: Vec<String>,
        repeat: String,
        max: usize,
    },
    /// An SSE stream that sends these events and then stalls (never ends).
    SseThenStall(Vec<String>),
    /// An SSE stream that sends these events and then breaks the
    /// connection (the body fails mid-stream).
    SseThenDrop(Vec<String>),
    /// Waits, then sends the reply.
    Slow(Duration, Box<Reply>),
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Value,
}

/// Progress of a looping stream.
#[derive(Default)]
pub struct StreamProbe {
    /// Events sent so far.
    pub sent: AtomicUsize,
    /// The body was dropped before it finished (the client went away).
    pub dropped_early: AtomicBool,
    /// The body ran to its end.
    pub completed: AtomicBool,
}

struct Script {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
    probe: Arc<StreamProbe>,
}

/// A running fake server; it stops when dropped (with the test runtime).
pub struct Fake {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    script: Arc<Script>,
}

impl Fake {
    /// Starts a server that answers requests with `replies`, in order. A
    /// request beyond the script gets HTTP 418 so tests fail loudly.
    pub async fn start(replies: Vec<Reply>) -> Fake {
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into()),
            seen: Mutex::new(Vec::new()),
            probe: Arc::new(StreamProbe::default()),
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

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.script.seen.lock().unwrap().clone()
    }

    /// Number of requests seen so far.
    pub fn hits(&self) -> usize {
        self.script.seen.lock().unwrap().len()
    }

    /// The looping stream's progress.
    pub fn probe(&self) -> Arc<StreamProbe> {
        self.script.probe.clone()
    }

    /// Scripted replies not yet used.
    pub fn unused(&self) -> usize {
        self.script.replies.lock().unwrap().len()
    }
}

async fn handle(State(script): State<Arc<Script>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let headers = req.headers().clone();
    let bytes = axum::body::to_bytes(req.into_body(), 16 << 20)
        .await
        .unwrap_or_default();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    script.seen.lock().unwrap().push(Seen {
        path,
        query,
        headers,
        body,
    });
    let next = script.replies.lock().unwrap().pop_front();
    match next {
        Some(reply) => respond(reply, script.probe.clone()).await,
        None => (StatusCode::IM_A_TEAPOT, "script exhausted").into_response(),
    }
}

fn sse_event(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\r\n\r\n"))
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

/// Marks the probe when the looping body is dropped before its end.
struct DropFlag(Arc<StreamProbe>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        if !self.0.completed.load(Ordering::SeqCst) {
            self.0.dropped_early.store(true, Ordering::SeqCst);
        }
    }
}

async fn respond(reply: Reply, probe: Arc<StreamProbe>) -> Response {
    match reply {
        Reply::Json(status, v) => {
            (StatusCode::from_u16(status).unwrap(), axum::Json(v)).into_response()
        }
        Reply::JsonHeader(status, v, name, value) => {
            let mut r = (StatusCode::from_u16(status).unwrap(), axum::Json(v)).into_response();
            r.headers_mut().insert(name, value.parse().unwrap());
            r
        }
        Reply::Text(status, t) => (StatusCode::from_u16(status).unwrap(), t).into_response(),
        Reply::Sse(events) => {
            let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
            sse_response(Body::from(body))
        }
        Reply::SseThenStall(events) => {
            // The probe sees the client go away while the stream stalls.
            let flag = DropFlag(probe.clone());
            let stream = futures_util::stream::unfold((0usize, flag), move |(i, flag)| {
                let events = events.clone();
                async move {
                    if i < events.len() {
                        flag.0.sent.fetch_add(1, Ordering::SeqCst);
                        Some((Ok::<_, Infallible>(sse_event(&events[i])), (i + 1, flag)))
                    } else {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        None
                    }
                }
            });
            sse_response(Body::from_stream(stream))
        }
        Reply::SseThenDrop(events) => {
            let stream = futures_util::stream::unfold(0usize, move |i| {
                let events = events.clone();
                async move {
                    if i < events.len() {
                        Some((Ok(sse_event(&events[i])), i + 1))
                    } else if i == events.len() {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        Some((Err(std::io::Error::other("connection dropped")), i + 1))
                    } else {
                        None
                    }
                }
            });
            sse_response(Body::from_stream(stream))
        }
        Reply::LoopSse {
            prefix,
            repeat,
            max,
        } => {
            let flag = DropFlag(probe.clone());
            let stream = futures_util::stream::unfold((0usize, flag), move |(i, flag)| {
                let prefix = prefix.clone();
                let repeat = repeat.clone();
                async move {
                    let total = prefix.len() + max;
                    if i >= total {
                        flag.0.completed.store(true, Ordering::SeqCst);
                        return None;
                    }
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    let data = if i < prefix.len() {
                        &prefix[i]
                    } else {
                        &repeat
                    };
                    flag.0.sent.fetch_add(1, Ordering::SeqCst);
                    Some((Ok::<_, Infallible>(sse_event(data)), (i + 1, flag)))
                }
            });
            sse_response(Body::from_stream(stream))
        }
        Reply::Slow(wait, inner) => {
            tokio::time::sleep(wait).await;
            Box::pin(respond(*inner, probe)).await
        }
    }
}

/// Waits (up to 20 s) until `cond` holds; returns whether it did.
pub async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..2000 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// `reply`, 30 s late: far beyond every test's timeout.
pub fn slow(reply: Reply) -> Reply {
    Reply::Slow(Duration::from_secs(30), Box::new(reply))
}

/// Runs `req` with a 300 ms timeout through `client`, whose server answers
/// [`slow`]ly: the call must end in [`LlmError::Timeout`] after one request.
pub async fn assert_times_out(client: &LlmClient, fake: &Fake, mut req: GenerateRequest) {
    req.timeout = Duration::from_millis(300);
    let err = client
        .generate(&req, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Timeout(_)), "{err:?}");
    assert_eq!(fake.hits(), 1);
}

/// Streams `req` through `client` under the default loop guard, never
/// cancelled; returns the generation and the deltas forwarded.
pub async fn stream_guarded(
    client: &LlmClient,
    req: &GenerateRequest,
) -> (Generation, Vec<String>) {
    let mut deltas = Vec::new();
    let g = client
        .generate_stream(
            req,
            &CancellationToken::new(),
            Some(ClampConfig::default()),
            |d| deltas.push(d.to_string()),
        )
        .await
        .unwrap();
    (g, deltas)
}

/// Asserts that the client went away in the middle of the server's looping
/// stream of `max` events (the request was dropped, not read to its end).
pub async fn assert_request_dropped(fake: &Fake, max: usize) {
    let probe = fake.probe();
    assert!(
        eventually(|| probe.dropped_early.load(Ordering::SeqCst)).await,
        "the server never saw the client go away"
    );
    let sent = probe.sent.load(Ordering::SeqCst);
    eprintln!("the server sent {sent} of {max} events before the client went away");
    assert!(
        sent < max,
        "the server sent all {sent} events: the request was not cancelled"
    );
    assert!(!probe.completed.load(Ordering::SeqCst));
}

/// Captures every `tracing` event (all levels) as `name=value` text, for
/// tests that check what the clients log. Install it on the test's thread
/// with `tracing::subscriber::set_default` (the default `#[tokio::test]`
/// runtime polls on that thread).
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<String>>);

impl LogCapture {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

struct FieldText<'a>(&'a mut String);

impl tracing::field::Visit for FieldText<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl tracing::Subscriber for LogCapture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = String::new();
        event.record(&mut FieldText(&mut line));
        line.push('\n');
        self.0.lock().unwrap().push_str(&line);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A retry policy with tiny delays for tests.
pub fn fast_retry(max_attempts: u32) -> deloop_llm::RetryPolicy {
    deloop_llm::RetryPolicy {
        max_attempts,
        base_delay_ms: 1,
        max_delay_ms: 5,
        max_server_delay_ms: 60_000,
    }
}

/// The seed's broken replies (001, synthesizeAnswer, PR #96): an unescaped
/// inner quote, and a raw newline plus garbage after the closing brace.
pub const BROKEN_INNER_QUOTE: &str =
    r#"{"answer": "**Auditoría Suprema** "la revisión final" y más texto"}"#;
pub const BROKEN_TRAILING_GARBAGE: &str = "{\"answer\": \"Respuesta válida\"}\nGARBAGE ```";
