//! Text repetition guards: cut periodic walls of text out of LLM output.
//!
//! Two detectors, run in this order by [`clamp`]:
//! * the word-period guard ([`clamp_words`], seed `clampRepetition`):
//!   whitespace tokens repeating with a period of 1–16 tokens (and, by
//!   default, long periods found through shingles);
//! * the substring guard ([`clamp_substring`], seed
//!   `clampSubstringRepetition`): a unit of 2–12 characters repeated at
//!   least 10 times back to back.
//!
//! [`StreamWatcher`] runs the same engines on a stream, chunk by chunk;
//! [`GuardedStream`] wraps it with what a caller forwarding the stream
//! needs (what may be passed on now, exact mode, the cut and what it saved).
//! [`ClampConfig::default`] is deloop's guard with false-positive
//! protections; [`ClampConfig::seed_compat`] is the seed's exact behaviour.
//!
//! ```
//! use deloop_core::repetition::{clamp, ClampConfig};
//! let text = format!("Intro sentence here. {}", "the cat sat on the mat ".repeat(20));
//! let out = clamp(&text, &ClampConfig::default());
//! assert!(out.is_clamped());
//! assert!(out.text.len() < text.len());
//! ```

pub mod bounds;
mod config;
mod engine;
mod guarded;
mod near;
mod substring;
#[cfg(test)]
mod test_cases;
mod text;
mod words;

pub use bounds::OutOfBounds;
pub use config::{
    ClampConfig, HealthyConfig, NearConfig, SubstringConfig, WordConfig, DEFAULT_CONNECTORS,
};
pub use guarded::{Forward, GuardedCut, GuardedStream, InvalidUtf8};

use serde::Serialize;

use engine::{Engine, Mode};
use substring::Candidate;

/// Which detector fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = ClampDetector))]
pub enum Detector {
    /// Whitespace tokens repeating with a period of at most `max_period`.
    WordPeriod,
    /// Whitespace tokens repeating with a long period (found by shingles).
    LongPeriod,
    /// A short unit of characters repeated back to back.
    Substring,
    /// Copies that differ by a counter or a word or two (list items,
    /// sentences, counters); the period is in items, segments or tokens.
    NearDuplicate,
    /// A unit of 13–64 characters without white space repeated back to
    /// back; the period is in characters.
    LongUnit,
    /// A block of lines repeated inside a code fence; the period is in
    /// lines.
    CodeBlock,
}

/// What a guard found and what it removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClampReport {
    /// The detector that fired.
    pub detector: Detector,
    /// The period: tokens for word detectors, characters for substring.
    pub period: usize,
    /// One copy of the repeated unit, as it appears in the source.
    pub unit: String,
    /// Byte offset (in the guard's input) where the loop starts.
    pub start: usize,
    /// Byte offset (in the guard's input) where the kept source text ends.
    pub keep_bytes: usize,
    /// Bytes of the input that were removed (`input.len() - keep_bytes`).
    pub removed_bytes: usize,
}

/// A guard's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Clamped {
    /// The guarded text (the input itself when nothing fired).
    pub text: String,
    /// One report per guard that fired, in the order they ran.
    pub reports: Vec<ClampReport>,
}

impl Clamped {
    /// True when some guard cut the text.
    pub fn is_clamped(&self) -> bool {
        !self.reports.is_empty()
    }

    /// The first report, if any guard fired.
    pub fn report(&self) -> Option<&ClampReport> {
        self.reports.first()
    }
}

/// Runs the word guard, then the substring guard on its output, then the
/// near-duplicate guard ([`clamp_near`]) on theirs.
///
/// The first two detectors share one pass over the text; a second,
/// substring-only pass runs on the word guard's output only when the word
/// guard cut.
pub fn clamp(text: &str, config: &ClampConfig) -> Clamped {
    let mut out = clamp_repeats(text, config);
    if let Some(cand) = engine::scan_near(&out.text, config) {
        let near = near_output(&out.text, &cand, config);
        out.text = near.text;
        out.reports.extend(near.reports);
    }
    out
}

/// The near-duplicate guard alone: list items under a counter, lines
/// going round a few values, sentences
/// coming back with a word or two changed, counters, units of 13–64
/// characters without white space, blocks of lines repeated in a code
/// fence (docs/repetition.md). Keeps the text up to the end of the
/// loop's first copy and appends the word guard's marker.
///
/// ```
/// use deloop_core::repetition::{clamp_near, ClampConfig, Detector};
/// let items: String = (51..70).map(|i| format!("{i}. Anise\n")).collect();
/// let text = format!("Spices:\n{items}");
/// let out = clamp_near(&text, &ClampConfig::default());
/// assert_eq!(out.report().unwrap().detector, Detector::NearDuplicate);
/// assert_eq!(out.text, "Spices:\n51. Anise […]");
/// ```
pub fn clamp_near(text: &str, config: &ClampConfig) -> Clamped {
    match engine::scan_near(text, config) {
        Some(cand) => near_output(text, &cand, config),
        None => unchanged(text),
    }
}

/// The near-duplicate guard's output for the loop `cand` in `text`.
fn near_output(text: &str, cand: &Candidate, config: &ClampConfig) -> Clamped {
    let kept = &text[..cand.keep];
    Clamped {
        text: format!("{kept}{}", tail(&config.words.marker, kept.is_empty())),
        reports: vec![report(cand, text.len())],
    }
}

fn clamp_repeats(text: &str, config: &ClampConfig) -> Clamped {
    match engine::scan_pair(text, config, Mode::Both) {
        (None, None) => unchanged(text),
        (None, Some(sub)) => substring_output(text, &sub, config),
        (Some(w), _) => {
            let words = words_output(text, &w, config);
            let sub = clamp_substring(&words.text, config);
            let mut reports = words.reports;
            reports.extend(sub.reports);
            Clamped {
                text: sub.text,
                reports,
            }
        }
    }
}

fn report(cand: &Candidate, total: usize) -> ClampReport {
    ClampReport {
        detector: cand.detector,
        period: cand.period,
        unit: cand.unit.clone(),
        start: cand.start,
        keep_bytes: cand.keep,
        removed_bytes: total - cand.keep,
    }
}

/// The marker to append after `kept` (without its leading space when
/// nothing is kept).
fn tail(marker: &str, kept_empty: bool) -> &str {
    if kept_empty {
        marker.trim_start()
    } else {
        marker
    }
}

/// The word-period guard alone (seed `clampRepetition`): keeps the healthy
/// prefix and one copy of the repeated unit, trims dangling connectors and
/// appends the marker.
///
/// ```
/// use deloop_core::repetition::{clamp_words, ClampConfig, Detector};
/// let text = format!("Hola. {}", "la continuación de un proceso de automatización automático o la de ".repeat(40));
/// let out = clamp_words(&text, &ClampConfig::default());
/// assert_eq!(out.report().unwrap().detector, Detector::WordPeriod);
/// assert!(out.text.ends_with("automático […]"), "{}", out.text);
/// ```
pub fn clamp_words(text: &str, config: &ClampConfig) -> Clamped {
    match engine::scan(text, config, Mode::Words) {
        Some(cand) => words_output(text, &cand, config),
        None => unchanged(text),
    }
}

fn words_output(text: &str, cand: &Candidate, config: &ClampConfig) -> Clamped {
    let marker = &config.words.marker;
    let out = if config.words.rejoin_tokens {
        let kept: Vec<&str> = text
            .split_whitespace()
            .take(cand.keep_tokens as usize)
            .collect();
        let kept = kept.join(" ");
        let t = tail(marker, kept.is_empty());
        kept + t
    } else {
        let kept = &text[..cand.keep];
        format!("{kept}{}", tail(marker, kept.is_empty()))
    };
    Clamped {
        text: out,
        reports: vec![report(cand, text.len())],
    }
}

/// The substring guard alone (seed `clampSubstringRepetition`): cuts just
/// before the loop, trims, and appends the configured marker.
///
/// ```
/// use deloop_core::repetition::{clamp_substring, ClampConfig};
/// let text = format!("La respuesta es {}", "resak-".repeat(50));
/// let out = clamp_substring(&text, &ClampConfig::seed_compat());
/// assert_eq!(out.text, "La respuesta es");
/// ```
pub fn clamp_substring(text: &str, config: &ClampConfig) -> Clamped {
    match engine::scan(text, config, Mode::Substring) {
        Some(cand) => substring_output(text, &cand, config),
        None => unchanged(text),
    }
}

fn substring_output(text: &str, cand: &Candidate, config: &ClampConfig) -> Clamped {
    let mut kept = &text[..cand.keep];
    if config.substring.trim_start {
        kept = kept.trim_start();
    }
    let out = format!("{kept}{}", tail(&config.substring.marker, kept.is_empty()));
    Clamped {
        text: out,
        reports: vec![report(cand, text.len())],
    }
}

fn unchanged(text: &str) -> Clamped {
    Clamped {
        text: text.to_string(),
        reports: Vec::new(),
    }
}

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
