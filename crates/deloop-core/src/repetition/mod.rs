//! Text repetition guards: cut periodic walls of text out of LLM output.
//!
//! Six detectors, in three guards that [`clamp`] runs in this order, each
//! on the output of the one before (the [`Detector`] in each report says
//! which fired):
//! 1. the **word guard** ([`clamp_words`], seed `clampRepetition`,
//!    `words/`): [`Detector::WordPeriod`], whitespace tokens repeating
//!    with a period of 1–16 tokens, and [`Detector::LongPeriod`], longer
//!    periods found through shingles (on by default);
//! 2. the **substring guard** ([`clamp_substring`], seed
//!    `clampSubstringRepetition`, `substring/`): [`Detector::Substring`],
//!    a unit of 2–12 characters repeated at least 10 times back to back;
//! 3. the **near-duplicate guard** ([`clamp_near`], `near/`), one pass
//!    with several rules: [`Detector::NearDuplicate`] (counted list items,
//!    restarted lists, lines or codes going round a few values, sentences
//!    with a word or two changed, counters), [`Detector::LongUnit`] (a
//!    unit of 13–64 characters without white space repeated back to back)
//!    and [`Detector::CodeBlock`] (a block of lines repeated inside a code
//!    fence).
//!
//! Each detector has a pre-filter (a *sieve*) in its folder that proves
//! most healthy text loop-free, so the exact detector reads only regions
//! around possible loops. `engine/` composes the detectors: the batch
//! guards go through one function (the text goes down once, one
//! [`Clamped`] comes back), and [`StreamWatcher`] runs the same detectors
//! on a stream, chunk by chunk; [`GuardedStream`] wraps it with what a
//! caller forwarding the stream needs (what may be passed on now, exact
//! mode, the cut and what it saved). `text/` holds what every detector
//! reads the text with (case folding, list markers, fences and tables).
//! [`ClampConfig::default`] is deloop's guard with false-positive
//! protections; [`ClampConfig::seed_compat`] is the seed's exact
//! behaviour (no near-duplicate guard, no long periods).
//!
//! ```
//! use deloop_core::repetition::{clamp, ClampConfig};
//! let text = format!("Intro sentence here. {}", "the cat sat on the mat ".repeat(20));
//! let out = clamp(&text, &ClampConfig::default());
//! assert!(out.is_clamped());
//! assert!(out.text.len() < text.len());
//! ```

pub mod bounds;
mod candidate;
mod config;
mod engine;
mod guarded;
mod near;
mod settings;
mod stream;
mod substring;
#[cfg(test)]
mod test_cases;
mod text;
mod tool_args;
mod words;

pub use bounds::OutOfBounds;
pub use config::{
    ClampConfig, HealthyConfig, NearConfig, SubstringConfig, WordConfig, DEFAULT_CONNECTORS,
};
pub use guarded::{Forward, GuardedCut, GuardedStream, InvalidUtf8};
pub use settings::{settings, SettingsError};
pub use stream::{StreamCut, StreamWatcher};
pub use tool_args::{ArgsChannel, ArgsCut, ToolArgsWatcher, MAX_WATCHED_ARGS_BYTES};

use serde::Serialize;

use engine::Guards;

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
    engine::clamp(text, config, Guards::All)
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
    engine::clamp(text, config, Guards::Near)
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
    engine::clamp(text, config, Guards::Words)
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
    engine::clamp(text, config, Guards::Substring)
}
