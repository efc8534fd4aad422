//! The streaming face of the engine: [`StreamWatcher`] feeds a stream to
//! the same detectors as the batch guards and reports where it must stop.

use serde::Serialize;

use super::engine::{report, tail, Engine, Mode};
use super::{ClampConfig, ClampReport, Detector};

/// Where a stream must stop, as found by [`StreamWatcher`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StreamCut {
    /// Byte offset in the whole stream where output must stop.
    pub keep_bytes: usize,
    /// Text to emit after the kept bytes (the marker; may be empty).
    pub replacement_tail: String,
    /// Byte offset in the stream at which the loop was recognised (the
    /// prefix on which the batch guard first fires).
    pub detected_at: usize,
    /// What fired (`removed_bytes` counts up to `detected_at`).
    pub report: ClampReport,
}

/// Watches a stream chunk by chunk and reports the first prefix on which
/// [`clamp`] would fire, with the cut [`clamp`] gives on that prefix.
///
/// Precisely, three invariants (property tests state each):
/// 1. **Mid-stream** ([`StreamWatcher::feed`]) the watcher cuts at the
///    first prefix on which the batch guard fires *as an unfinished
///    text*: [`clamp`] of that prefix with
///    `words.tail_last_copy_percent = 100`. The long-tail rule applies
///    only where a text ends, and mid-stream the watcher cannot know that
///    the text ends.
/// 2. **At the end** ([`StreamWatcher::finish`]), when nothing was cut
///    before, its verdict is [`clamp`] of the whole stream (the tail rule
///    included: a long loop stopped mid-copy by a token limit is cut
///    here, `detected_at` is then the stream's length).
/// 3. The [`StreamWatcher::settled`] prefix is never cut, at `finish()`
///    either: a tail cut keeps the text up to the end of the run's first
///    copy, which a run in progress already holds back.
///
/// It runs the batch guards' own incremental engine, so work is O(1)
/// amortised per character (O(P) for the fixed period bound P) and memory
/// is bounded by the configuration, not by the stream. Invalid UTF-8 bytes
/// count as U+FFFD (offsets stay in raw stream bytes).
///
/// ```
/// use deloop_core::repetition::{ClampConfig, StreamWatcher};
/// let mut w = StreamWatcher::new(ClampConfig::default());
/// let text = format!("Intro. {}", "over and over again we go ".repeat(30));
/// let mut cut = None;
/// for chunk in text.as_bytes().chunks(7) {
///     if let Some(c) = w.feed(chunk) { cut = Some(c); break; }
/// }
/// let cut = cut.expect("the loop is seen");
/// assert!(cut.keep_bytes < cut.detected_at);
/// ```
#[derive(Debug, Clone)]
pub struct StreamWatcher {
    config: ClampConfig,
    engine: Engine,
    pending: Vec<u8>,
    done: bool,
    /// The cut's kept length, once there is one.
    cut_keep: Option<usize>,
}

impl StreamWatcher {
    /// A watcher with this configuration.
    pub fn new(config: ClampConfig) -> Self {
        let engine = Engine::new(&config, Mode::Both, true);
        StreamWatcher {
            config,
            engine,
            pending: Vec::with_capacity(4),
            done: false,
            cut_keep: None,
        }
    }

    /// True once a cut was returned: further input is ignored.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The length of the stream's prefix that is final: whatever comes
    /// next, a cut will keep at least these bytes. A caller that must emit
    /// exactly the guarded text holds back the bytes after it (at most a
    /// few thousand in practice: the longest loop the guards look back
    /// for, or an exempt repetition still going on).
    ///
    /// ```
    /// use deloop_core::repetition::{ClampConfig, StreamWatcher};
    /// let mut w = StreamWatcher::new(ClampConfig::default());
    /// let intro: String = (0..300).map(|i| format!("word{i} ")).collect();
    /// let text = format!("{intro}{}", "over and over again we go ".repeat(30));
    /// let mut settled = 0;
    /// for chunk in text.as_bytes().chunks(64) {
    ///     if let Some(cut) = w.feed(chunk) {
    ///         assert!(settled <= cut.keep_bytes);
    ///         return;
    ///     }
    ///     settled = w.settled();
    ///     assert!(settled <= w.position());
    /// }
    /// unreachable!("the loop is seen");
    /// ```
    pub fn settled(&self) -> usize {
        match self.cut_keep {
            Some(keep) => keep,
            None => self.engine.settled(),
        }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.engine.pos + self.pending.len()
    }

    /// Feeds raw bytes as they arrive (chunks may split words and UTF-8
    /// sequences). Returns `Some(cut)` the first time the batch guard would
    /// fire on the prefix seen so far as an unfinished text (the tail rule
    /// waits for [`StreamWatcher::finish`]), and `None` otherwise (and
    /// always after the first cut).
    pub fn feed(&mut self, chunk: &[u8]) -> Option<StreamCut> {
        if self.done {
            return None;
        }
        let mut chunk = chunk;
        while !self.pending.is_empty() && !chunk.is_empty() {
            self.pending.push(chunk[0]);
            chunk = &chunk[1..];
            let pending = std::mem::take(&mut self.pending);
            match std::str::from_utf8(&pending) {
                Ok(s) => {
                    if self.engine.feed_str(s) {
                        return self.check();
                    }
                }
                Err(e) => match e.error_len() {
                    Some(n) => {
                        if let Some(cut) = self.bad(n) {
                            return Some(cut);
                        }
                        if let Some(cut) = self.process(&pending[n..]) {
                            return Some(cut);
                        }
                    }
                    None => self.pending = pending,
                },
            }
        }
        self.process(chunk)
    }

    /// Ends the stream: an incomplete UTF-8 sequence counts as U+FFFD and
    /// the last token becomes final. Then the long-tail rule applies
    /// (`words.tail_last_copy_percent`): a long loop that runs to the end
    /// with two copies and two thirds (by default) is cut, as [`clamp`]
    /// cuts the whole text. O(1) extra work: one run is looked at.
    ///
    /// ```
    /// use deloop_core::repetition::{clamp, ClampConfig, StreamWatcher};
    /// let unit = "The committee reviewed the proposal and decided that the budget \
    ///             should be approved after one more round of comments from the board.";
    /// let third: Vec<&str> = unit.split_whitespace().take(17).collect();
    /// let text = format!("Minutes. {unit} {unit} {}", third.join(" "));
    /// let mut w = StreamWatcher::new(ClampConfig::default());
    /// for chunk in text.as_bytes().chunks(16) {
    ///     assert!(w.feed(chunk).is_none()); // mid-stream: not yet
    /// }
    /// let cut = w.finish().expect("the text ends inside the third copy");
    /// let batch = clamp(&text, &ClampConfig::default());
    /// assert_eq!(format!("{}{}", &text[..cut.keep_bytes], cut.replacement_tail), batch.text);
    /// ```
    pub fn finish(&mut self) -> Option<StreamCut> {
        if self.done {
            return None;
        }
        if !self.pending.is_empty() {
            let n = self.pending.len();
            self.pending.clear();
            if let Some(cut) = self.bad(n) {
                return Some(cut);
            }
        }
        self.engine.finish();
        self.check()
    }

    fn process(&mut self, bytes: &[u8]) -> Option<StreamCut> {
        let mut rest = bytes;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    return if self.engine.feed_str(s) {
                        self.check()
                    } else {
                        None
                    };
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    let s = std::str::from_utf8(&rest[..valid]).unwrap_or_default();
                    if self.engine.feed_str(s) {
                        return self.check();
                    }
                    match e.error_len() {
                        Some(n) => {
                            if let Some(cut) = self.bad(n) {
                                return Some(cut);
                            }
                            rest = &rest[valid + n..];
                        }
                        None => {
                            self.pending.extend_from_slice(&rest[valid..]);
                            return None;
                        }
                    }
                }
            }
        }
    }

    /// An invalid sequence of `n` bytes: one U+FFFD.
    fn bad(&mut self, n: usize) -> Option<StreamCut> {
        self.engine.push_char('\u{FFFD}', n);
        self.check()
    }

    #[inline]
    fn check(&mut self) -> Option<StreamCut> {
        let cand = match self.engine.fired() {
            Some(c) => c,
            None => self.engine.verdict(true)?,
        };
        let marker = match cand.detector {
            Detector::Substring => &self.config.substring.marker,
            _ => &self.config.words.marker,
        };
        let cut = StreamCut {
            keep_bytes: cand.keep,
            replacement_tail: tail(marker, cand.keep == 0).to_string(),
            detected_at: self.engine.pos,
            report: report(cand, self.engine.pos),
        };
        self.done = true;
        self.cut_keep = Some(cut.keep_bytes);
        Some(cut)
    }
}
