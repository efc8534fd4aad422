//! Moving bytes: an upstream body to the client, guarded or not, with the
//! idle timeout, and the upstream dropped (so that it stops generating) as
//! soon as the guard ends the stream or the client goes away.
//!
//! A relayed body is a stream polled by the client's connection: when the
//! client disconnects, the server drops it, and with it the upstream
//! response, which closes (HTTP/1.1) or resets (HTTP/2) the upstream
//! request. Nothing is spawned, so nothing outlives the client.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use deloop_http::metrics::Metrics;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;

use crate::anthropic_stream::AnthropicStream;
use crate::guard::CutRecord;
use crate::openai_stream::OpenAiStream;
use crate::sse::{SseEvent, SseReader};
use crate::tool_stream::ToolStream;
use crate::Flow;

/// Either API's stream guard.
#[derive(Debug)]
pub enum StreamGuard {
    /// `/v1/chat/completions`, `/v1/completions`.
    OpenAi(Box<OpenAiStream>),
    /// `/v1/messages`.
    Anthropic(Box<AnthropicStream>),
}

impl StreamGuard {
    /// Reads one event.
    pub fn on_event(&mut self, ev: &SseEvent, out: &mut Vec<Bytes>) -> Flow {
        match self {
            StreamGuard::OpenAi(g) => g.on_event(ev, out),
            StreamGuard::Anthropic(g) => g.on_event(ev, out),
        }
    }

    /// The upstream ended, cleanly (`None`) or not.
    pub fn on_end(&mut self, error: Option<&str>, out: &mut Vec<Bytes>) {
        match self {
            StreamGuard::OpenAi(g) => g.on_end(error, out),
            StreamGuard::Anthropic(g) => g.on_end(error, out),
        }
    }

    /// The cuts made so far, taken.
    pub fn take_cuts(&mut self) -> Vec<CutRecord> {
        match self {
            StreamGuard::OpenAi(g) => g.take_cuts(),
            StreamGuard::Anthropic(g) => g.take_cuts(),
        }
    }
}

/// The upstream's body as a stream of pieces.
pub type Upstream = BoxStream<'static, Result<Bytes, reqwest::Error>>;

/// One guarded stream in flight.
pub struct GuardedRelay {
    upstream: Option<Upstream>,
    reader: SseReader,
    guard: StreamGuard,
    idle: Duration,
    metrics: Option<Arc<Metrics>>,
    events: Vec<SseEvent>,
    out: Vec<Bytes>,
    done: bool,
    tools: Option<ToolStream>,
    passed: Vec<SseEvent>,
    feed: Option<crate::feed::Feed>,
}

impl GuardedRelay {
    /// A relay of `upstream` through `guard`: events up to `max_event`
    /// bytes, at most `idle` between two upstream pieces; cuts are counted
    /// in `metrics`.
    pub fn new(
        upstream: Upstream,
        guard: StreamGuard,
        max_event: usize,
        idle: Duration,
        metrics: Option<Arc<Metrics>>,
    ) -> Self {
        GuardedRelay {
            upstream: Some(upstream),
            reader: SseReader::new(max_event),
            guard,
            idle,
            metrics,
            events: Vec::new(),
            out: Vec::new(),
            done: false,
            tools: None,
            passed: Vec::new(),
            feed: None,
        }
    }

    /// Publishes the relay's cuts and tool-call loops on `feed`.
    pub fn with_feed(mut self, feed: Option<crate::feed::Feed>) -> Self {
        self.feed = feed;
        self
    }

    /// Judges the reply's tool calls with this layer before the text
    /// guard sees the events ([`ToolStream`]).
    pub fn with_tools(mut self, tools: ToolStream) -> Self {
        self.tools = Some(tools);
        self
    }

    /// The next bytes for the client, or `None` at the end.
    pub async fn next(&mut self) -> Option<Bytes> {
        loop {
            if !self.out.is_empty() {
                return Some(self.drain_out());
            }
            if self.done {
                return None;
            }
            let up = self.upstream.as_mut()?;
            match tokio::time::timeout(self.idle, up.next()).await {
                Err(_) => {
                    let msg = format!(
                        "the upstream sent nothing for {} s (proxy.idle_timeout_secs)",
                        self.idle.as_secs()
                    );
                    self.end(Some(&msg));
                }
                Ok(None) => {
                    self.upstream = None;
                    if let Some(ev) = self.reader.finish() {
                        self.events.push(ev);
                    }
                    if !self.feed_events() {
                        self.end(None);
                    }
                }
                Ok(Some(Err(e))) => {
                    let msg = format!(
                        "the upstream connection failed mid-stream: {}",
                        crate::api::causes(&e)
                    );
                    self.end(Some(&msg));
                }
                Ok(Some(Ok(piece))) => {
                    if let Err(e) = self.reader.push(&piece, &mut self.events) {
                        // Events complete before the oversized one still go.
                        self.feed_events();
                        self.end(Some(&e.to_string()));
                    } else {
                        self.feed_events();
                    }
                }
            }
            self.count_cuts();
        }
    }

    /// Feeds the events read; true when the guard ended the stream (the
    /// upstream is then dropped).
    fn feed_events(&mut self) -> bool {
        let events: Vec<SseEvent> = match &mut self.tools {
            None => std::mem::take(&mut self.events),
            Some(tools) => {
                for ev in self.events.drain(..) {
                    tools.on_event(ev, &mut self.passed);
                }
                std::mem::take(&mut self.passed)
            }
        };
        self.guard_events(events)
    }

    fn guard_events(&mut self, events: Vec<SseEvent>) -> bool {
        for ev in events {
            if self.guard.on_event(&ev, &mut self.out) == Flow::Stop {
                self.upstream = None;
                self.done = true;
                return true;
            }
        }
        false
    }

    fn end(&mut self, error: Option<&str>) {
        self.upstream = None;
        if let Some(tools) = &mut self.tools {
            let mut rest = Vec::new();
            tools.on_end(error.is_none(), &mut rest);
            if !self.done && self.guard_events(rest) {
                return;
            }
        }
        if !self.done {
            self.guard.on_end(error, &mut self.out);
            self.done = true;
        }
    }

    fn count_cuts(&mut self) {
        if let Some(tools) = &mut self.tools {
            for c in tools.take_cuts() {
                crate::tool_args::log_cut(&c, self.metrics.as_deref());
            }
            for f in tools.take_found() {
                crate::tool_loops::log_found(
                    "reply",
                    &f.tool,
                    &f.verdict,
                    f.action,
                    self.metrics.as_deref(),
                );
                if let Some(feed) = &self.feed {
                    feed.tool_loop("reply", &f.tool, &f.verdict, f.action);
                }
            }
        }
        let cuts = self.guard.take_cuts();
        for c in cuts {
            tracing::info!(
                detector = ?c.detector,
                start = c.start,
                saved_chars = c.saved_chars,
                channel = ?c.channel,
                "loop cut"
            );
            if let Some(m) = &self.metrics {
                let detector = serde_json::to_value(c.detector)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                m.loop_cut("proxy", &detector, c.saved_chars as u64);
            }
            if let Some(feed) = &self.feed {
                feed.cut(&c);
            }
        }
    }

    fn drain_out(&mut self) -> Bytes {
        if self.out.len() == 1 {
            return self.out.pop().unwrap_or_default();
        }
        let mut b = BytesMut::with_capacity(self.out.iter().map(Bytes::len).sum());
        for piece in self.out.drain(..) {
            b.extend_from_slice(&piece);
        }
        b.freeze()
    }

    /// The relay as a response body.
    pub fn into_body(self) -> Body {
        let stream = futures_util::stream::unfold(self, |mut relay| async move {
            relay
                .next()
                .await
                .map(|b| (Ok::<_, std::convert::Infallible>(b), relay))
        });
        Body::from_stream(stream)
    }
}

/// An upstream body passed through unchanged, with the idle timeout (past
/// it, the body fails, which the client sees as a broken transfer).
/// `first` is sent before the rest (bytes already read).
pub fn pass_through_body(first: VecDeque<Bytes>, upstream: Upstream, idle: Duration) -> Body {
    struct St {
        first: VecDeque<Bytes>,
        up: Option<Upstream>,
        idle: Duration,
    }
    let st = St {
        first,
        up: Some(upstream),
        idle,
    };
    let stream = futures_util::stream::unfold(st, |mut st| async move {
        if let Some(b) = st.first.pop_front() {
            return Some((Ok(b), st));
        }
        let up = st.up.as_mut()?;
        match tokio::time::timeout(st.idle, up.next()).await {
            Ok(Some(Ok(b))) => Some((Ok(b), st)),
            Ok(None) => None,
            Ok(Some(Err(e))) => {
                st.up = None;
                Some((Err(std::io::Error::other(e)), st))
            }
            Err(_) => {
                st.up = None;
                Some((
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the upstream sent nothing for longer than proxy.idle_timeout_secs",
                    )),
                    st,
                ))
            }
        }
    });
    Body::from_stream(stream)
}

/// Reads a whole upstream body of at most `limit` bytes. `Err` with the
/// pieces read and the rest of the stream when it is longer (the caller
/// then passes it through unguarded), or with an error message when the
/// upstream failed or went idle.
pub async fn read_body(
    mut upstream: Upstream,
    limit: usize,
    idle: Duration,
) -> Result<Bytes, ReadError> {
    let mut pieces = VecDeque::new();
    let mut len = 0;
    loop {
        match tokio::time::timeout(idle, upstream.next()).await {
            Ok(Some(Ok(b))) => {
                len += b.len();
                pieces.push_back(b);
                if len > limit {
                    return Err(ReadError::TooLong(pieces, upstream));
                }
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(ReadError::Failed(format!(
                    "the upstream connection failed while sending its reply: {}",
                    crate::api::causes(&e)
                )))
            }
            Err(_) => {
                return Err(ReadError::Failed(format!(
                    "the upstream sent nothing for {} s (proxy.idle_timeout_secs) while sending its reply",
                    idle.as_secs()
                )))
            }
        }
    }
    let mut all = BytesMut::with_capacity(len);
    for p in pieces {
        all.extend_from_slice(&p);
    }
    Ok(all.freeze())
}

/// Why [`read_body`] did not return a body.
pub enum ReadError {
    /// Longer than the limit: what was read, and the rest.
    TooLong(VecDeque<Bytes>, Upstream),
    /// The upstream failed.
    Failed(String),
}
