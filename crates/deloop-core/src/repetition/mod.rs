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
//! [`StreamWatcher`] runs the same engines on a stream, chunk by chunk.
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

mod config;

pub use config::{ClampConfig, HealthyConfig, SubstringConfig, WordConfig, DEFAULT_CONNECTORS};

use serde::Serialize;

/// Which detector fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Detector {
    /// Whitespace tokens repeating with a period of at most `max_period`.
    WordPeriod,
    /// Whitespace tokens repeating with a long period (found by shingles).
    LongPeriod,
    /// A short unit of characters repeated back to back.
    Substring,
}

/// What a guard found and what it removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

/// Runs the word guard, then the substring guard on its output.
pub fn clamp(text: &str, config: &ClampConfig) -> Clamped {
    let words = clamp_words(text, config);
    let sub = clamp_substring(&words.text, config);
    let mut reports = words.reports;
    reports.extend(sub.reports);
    Clamped {
        text: sub.text,
        reports,
    }
}

/// The word-period guard alone (work in progress: returns the input).
pub fn clamp_words(text: &str, config: &ClampConfig) -> Clamped {
    let _ = config;
    Clamped {
        text: text.to_string(),
        reports: Vec::new(),
    }
}

/// The substring guard alone (work in progress: returns the input).
pub fn clamp_substring(text: &str, config: &ClampConfig) -> Clamped {
    let _ = config;
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
    /// What fired.
    pub report: ClampReport,
}

/// Watches a stream chunk by chunk and reports the first prefix on which
/// [`clamp`] would fire.
#[derive(Debug, Clone)]
pub struct StreamWatcher {
    config: ClampConfig,
    fired: Option<StreamCut>,
}

impl StreamWatcher {
    /// A watcher with this configuration.
    pub fn new(config: ClampConfig) -> Self {
        StreamWatcher {
            config,
            fired: None,
        }
    }

    /// Feeds raw bytes as they arrive (chunks may split words and UTF-8
    /// sequences). Returns `Some(cut)` the first time the batch guard would
    /// fire on the prefix seen so far, and `None` afterwards.
    pub fn feed(&mut self, chunk: &[u8]) -> Option<StreamCut> {
        let _ = (chunk, &self.config, &self.fired);
        None
    }

    /// Ends the stream (flushes an incomplete UTF-8 sequence).
    pub fn finish(&mut self) -> Option<StreamCut> {
        None
    }
}
