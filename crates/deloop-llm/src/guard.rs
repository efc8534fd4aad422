//! Streaming under the loop guard: reads a provider's SSE reply
//! ([`read_guarded`]), accumulates the streamed answer text, runs
//! deloop-core's `StreamWatcher` over it and cuts where the guard says.

use deloop_core::repetition::{ClampConfig, ClampReport, StreamCut, StreamWatcher};

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
    let mut text = GuardedText::new(guard);
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
            if text.len() > retry::MAX_BODY {
                return Err(LlmError::Decode(format!(
                    "streamed answer longer than {} bytes",
                    retry::MAX_BODY
                )));
            }
            if text.push(chunk.delta(), &mut on_delta) {
                break 'read;
            }
            last.merge(chunk);
        }
        if bytes.is_none() {
            break;
        }
    }
    drop(resp);
    text.finish();
    let cut = text.is_cut();
    let (answer, report, saved_chars) = text.into_parts();
    if cut {
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

/// Accumulated answer text of one streamed call.
pub(crate) struct GuardedText {
    text: String,
    watcher: Option<StreamWatcher>,
    cut: Option<(ClampReport, usize)>,
}

impl GuardedText {
    pub fn new(config: Option<ClampConfig>) -> Self {
        GuardedText {
            text: String::new(),
            watcher: config.map(StreamWatcher::new),
            cut: None,
        }
    }

    /// Appends a delta and forwards to `on_delta` the part of it that lies
    /// before any cut. Returns true when the guard fired: stop reading.
    pub fn push(&mut self, delta: &str, on_delta: &mut impl FnMut(&str)) -> bool {
        if self.cut.is_some() || delta.is_empty() {
            return self.cut.is_some();
        }
        let start = self.text.len();
        self.text.push_str(delta);
        let fired = self.watcher.as_mut().and_then(|w| w.feed(delta.as_bytes()));
        match fired {
            None => {
                on_delta(delta);
                false
            }
            Some(cut) => {
                let keep = self.apply(cut);
                if keep > start {
                    on_delta(&self.text[start..keep]);
                }
                true
            }
        }
    }

    /// Ends the stream. The watcher may still fire on its flushed tail; the
    /// deltas were already forwarded then, and the final (cut) text is the
    /// authoritative one.
    pub fn finish(&mut self) {
        if self.cut.is_some() {
            return;
        }
        if let Some(cut) = self.watcher.as_mut().and_then(|w| w.finish()) {
            self.apply(cut);
        }
    }

    /// Cuts the text at the guard's `keep_bytes`; returns the kept length.
    fn apply(&mut self, cut: StreamCut) -> usize {
        let mut keep = cut.keep_bytes.min(self.text.len());
        while !self.text.is_char_boundary(keep) {
            keep -= 1;
        }
        let discarded = self.text[keep..].chars().count();
        self.cut = Some((cut.report, discarded));
        self.text.truncate(keep);
        self.text.push_str(&cut.replacement_tail);
        keep
    }

    /// The answer text, the guard's report and the discarded character count.
    pub fn into_parts(self) -> (String, Option<ClampReport>, usize) {
        match self.cut {
            Some((report, saved)) => (self.text, Some(report), saved),
            None => (self.text, None, 0),
        }
    }

    /// Bytes of answer text accumulated so far.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// True once the guard has fired.
    pub fn is_cut(&self) -> bool {
        self.cut.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_guard_everything_passes() {
        let mut g = GuardedText::new(None);
        let mut seen = String::new();
        assert!(!g.push("hello ", &mut |d: &str| seen.push_str(d)));
        assert!(!g.push("world", &mut |d: &str| seen.push_str(d)));
        g.finish();
        assert_eq!(g.into_parts(), ("hello world".to_string(), None, 0));
        assert_eq!(seen, "hello world");
    }

    #[test]
    fn looping_deltas_are_cut_and_discarded_chars_counted() {
        let text = format!(
            "La auditoría suprema es la revisión final. {}",
            "y la revisión vuelve a empezar otra vez ".repeat(40)
        );
        let chars: Vec<char> = text.chars().collect();
        let mut g = GuardedText::new(Some(ClampConfig::default()));
        let mut forwarded = String::new();
        let mut received = String::new();
        let mut stopped = false;
        // Three characters per delta: deltas split words and accents' bytes
        // never reach the watcher half-done.
        for piece in chars.chunks(3) {
            let delta: String = piece.iter().collect();
            received.push_str(&delta);
            if g.push(&delta, &mut |d: &str| forwarded.push_str(d)) {
                stopped = true;
                break;
            }
        }
        assert!(stopped, "the guard never fired");
        assert!(
            received.len() < text.len(),
            "the guard fired before the end"
        );
        g.finish();
        let (answer, report, saved) = g.into_parts();
        let report = report.unwrap();
        let kept = &received[..report.keep_bytes];
        assert!(answer.starts_with(kept));
        assert_eq!(saved, received[report.keep_bytes..].chars().count());
        assert!(saved > 0);
        assert!(forwarded.starts_with(kept) || kept.starts_with(&forwarded));
        // Nothing is forwarded after the guard fired.
        assert!(!g_push_after_cut_forwards());
    }

    fn g_push_after_cut_forwards() -> bool {
        let mut g = GuardedText::new(Some(ClampConfig::default()));
        let looping = "ab".repeat(2000);
        let mut fired = false;
        for c in looping.as_bytes().chunks(7) {
            if g.push(std::str::from_utf8(c).unwrap(), &mut |_: &str| {}) {
                fired = true;
                break;
            }
        }
        assert!(fired);
        let mut called = false;
        assert!(g.push("more", &mut |_: &str| called = true));
        called
    }
}
