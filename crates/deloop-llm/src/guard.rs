//! Streaming under the loop guard: reads a provider's SSE reply
//! ([`read_guarded`]), passes the streamed answer text through
//! deloop-core's `GuardedStream` (the one guarded stream type, shared with
//! `deloop clamp --stream` and the server) and cuts where the guard says.

use deloop_core::repetition::{ClampConfig, ClampReport, GuardedStream};

use crate::retry::{self, CallCtx};
use crate::sse::SseParser;
use crate::types::{FinishReason, Generation, Usage};
use crate::LlmError;

/// One parsed stream event of a provider (Gemini's `GenerateContentResponse`
/// chunk, OpenAI's `chat.completion.chunk`).
pub(crate) trait StreamChunk: Default {
    /// The answer text this event adds.
    fn delta(&self) -> &str;
    /// The provider's refusal reason, if this event refuses.
    fn refusal(&self) -> Option<String>;
    /// Folds a later event's metadata (finish reason, usage...) into this
    /// one; the text is accumulated apart.
    fn merge(&mut self, later: Self);
    /// The token counts seen so far.
    fn usage(&self) -> Usage;
    /// Sets the whole answer text, once the stream has ended.
    fn set_text(&mut self, text: String);
}

/// How a guarded stream ended.
pub(crate) enum Streamed<C> {
    /// The loop guard cut the answer.
    Cut(LoopCut),
    /// The stream ended: every event's metadata merged, with the whole
    /// answer text.
    Ended(C),
}

/// A streamed answer the loop guard cut.
pub(crate) struct LoopCut {
    text: String,
    report: Option<ClampReport>,
    saved_chars: usize,
    usage: Usage,
}

impl LoopCut {
    /// The generation `model` made in `attempts` HTTP attempts.
    pub fn into_generation(self, model: String, attempts: u32) -> Generation {
        Generation {
            text: self.text,
            finish: FinishReason::LoopCut,
            truncated: true,
            model,
            loop_cut: self.report,
            saved_chars: self.saved_chars,
            attempts,
            usage: self.usage,
        }
    }
}

/// Reads the SSE reply `resp` under the loop guard (`guard: None` turns it
/// off) until it ends, `parse` returns `None` (an end marker such as
/// `[DONE]`) or the guard fires. `parse` turns one event's data into a
/// chunk; answer text goes to `on_delta` up to any cut. A refusing event
/// and an answer longer than [`retry::MAX_BODY`] are errors. The response
/// is dropped as soon as reading stops: the connection closes, so a looping
/// generation stops costing tokens there.
pub(crate) async fn read_guarded<C: StreamChunk>(
    ctx: &CallCtx<'_>,
    mut resp: reqwest::Response,
    guard: Option<ClampConfig>,
    mut on_delta: impl FnMut(&str),
    mut parse: impl FnMut(&str) -> Result<Option<C>, LlmError>,
) -> Result<Streamed<C>, LlmError> {
    let mut stream = match guard {
        Some(config) => GuardedStream::new(config),
        None => GuardedStream::unguarded(),
    };
    // The answer text forwarded so far (the whole answer once it ends).
    let mut answer = String::new();
    let mut parser = SseParser::default();
    let mut last = C::default();
    'read: loop {
        let bytes = ctx
            .guard(resp.chunk())
            .await?
            .map_err(crate::error::transport)?;
        let events = match bytes {
            Some(ref b) => parser.feed(b)?,
            None => parser.finish()?.into_iter().collect(),
        };
        for data in events {
            let Some(chunk) = parse(&data)? else {
                break 'read;
            };
            if let Some(reason) = chunk.refusal() {
                return Err(LlmError::Refused { reason });
            }
            if stream.received() > retry::MAX_BODY {
                return Err(LlmError::Decode(format!(
                    "streamed answer longer than {} bytes",
                    retry::MAX_BODY
                )));
            }
            let step = stream.push(chunk.delta());
            let text = step.text();
            if !text.is_empty() {
                on_delta(&text);
                answer.push_str(&text);
            }
            if step.cut.is_some() {
                break 'read;
            }
            last.merge(chunk);
        }
        if bytes.is_none() {
            break;
        }
    }
    drop(resp);
    // The watcher may still fire on its flushed tail; the deltas were
    // already forwarded then, and the final (cut) text is the
    // authoritative one.
    if let Ok(step) = stream.finish() {
        answer.push_str(&step.text());
    }
    let (report, saved_chars) = match stream.cut() {
        Some(cut) => {
            cut.apply_to(&mut answer);
            (Some(cut.report().clone()), cut.saved_chars)
        }
        None => (None, 0),
    };
    if report.is_some() {
        return Ok(Streamed::Cut(LoopCut {
            text: answer,
            report,
            saved_chars,
            usage: last.usage(),
        }));
    }
    last.set_text(answer);
    Ok(Streamed::Ended(last))
}

/// One stream event's data as JSON.
pub(crate) fn event_json(data: &str) -> Result<serde_json::Value, LlmError> {
    serde_json::from_str(data).map_err(|e| {
        LlmError::Decode(format!(
            "stream event is not JSON ({e}): {}",
            retry::excerpt(data.as_bytes())
        ))
    })
}
