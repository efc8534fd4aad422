//! The batch guards: the detectors run over a whole text in their fixed
//! order, and the guarded text each verdict gives. [`clamp`] is the one
//! way in: the public `clamp`, `clamp_words`, `clamp_substring` and
//! `clamp_near` each call it once and get one [`Clamped`] back.
//!
//! The order ([`Guards::All`]), and why each pass reads what it reads:
//! 1. The word detector (word-period and long-period, `words/`) and the
//!    substring detector (`substring/`) share one pass over the text
//!    ([`scan_pair`]); the word verdict wins, and the substring verdict
//!    is computed only when there is none.
//! 2. After a word cut, and only then, the substring guard reads the word
//!    guard's output: the kept prefix and the marker, a different text
//!    from the input (the seed runs the two guards one after the other,
//!    and the output is kept byte for byte), at most as long as the kept
//!    prefix.
//! 3. The near-duplicate detector (near-duplicate, long-unit and
//!    code-block, `near/`) reads the output of the first two: the input
//!    itself when they cut nothing.

use crate::repetition::candidate::Candidate;
use crate::repetition::substring::prefilter::SubScan;
use crate::repetition::text::healthy::{LineCtx, Lines, Src};
use crate::repetition::words::Stop;
use crate::repetition::{ClampConfig, ClampReport, Clamped};

use super::{has_chars, Mode};

/// Which guards a batch run composes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guards {
    /// Words, then substring, then near-duplicates (the public `clamp`).
    All,
    /// The word guard alone.
    Words,
    /// The substring guard alone.
    Substring,
    /// The near-duplicate guard alone.
    Near,
}

/// Runs `guards` over `text`: each guard reads the output of the one
/// before it, and the reports come back in the order the guards ran.
pub(crate) fn clamp(text: &str, config: &ClampConfig, guards: Guards) -> Clamped {
    match guards {
        Guards::Words => match scan(text, config, Mode::Words) {
            Some(cand) => words_output(text, &cand, config),
            None => unchanged(text),
        },
        Guards::Substring => substring_guard(text, config),
        Guards::Near => match scan_near(text, config) {
            Some(cand) => near_output(text, &cand, config),
            None => unchanged(text),
        },
        Guards::All => {
            let mut out = match scan_pair(text, config, Mode::Both) {
                (None, None) => unchanged(text),
                (None, Some(sub)) => substring_output(text, &sub, config),
                (Some(w), _) => {
                    let words = words_output(text, &w, config);
                    let sub = substring_guard(&words.text, config);
                    let mut reports = words.reports;
                    reports.extend(sub.reports);
                    Clamped {
                        text: sub.text,
                        reports,
                    }
                }
            };
            if let Some(cand) = scan_near(&out.text, config) {
                let near = near_output(&out.text, &cand, config);
                out.text = near.text;
                out.reports.extend(near.reports);
            }
            out
        }
    }
}

fn substring_guard(text: &str, config: &ClampConfig) -> Clamped {
    match scan(text, config, Mode::Substring) {
        Some(cand) => substring_output(text, &cand, config),
        None => unchanged(text),
    }
}

/// Runs the near-duplicate detector over `text`: the first loop it
/// completes (behind its pre-filter, [`crate::repetition::near::sieve`]).
pub(crate) fn scan_near(text: &str, config: &ClampConfig) -> Option<Candidate> {
    crate::repetition::near::sieve::scan(text, config)
}

/// Runs one batch detector over `text`: the leftmost loop of the whole
/// text (the seed's semantics).
pub(crate) fn scan(text: &str, config: &ClampConfig, mode: Mode) -> Option<Candidate> {
    let (w, s) = scan_pair(text, config, mode);
    match mode {
        Mode::Words => w,
        Mode::Substring => s,
        Mode::Both => w.or(s),
    }
}

/// Runs the detectors of `mode`. The word verdict is exact; the substring
/// verdict is computed only when there is no word verdict (the substring
/// guard then runs on the word guard's output instead).
pub(crate) fn scan_pair(
    text: &str,
    config: &ClampConfig,
    mode: Mode,
) -> (Option<Candidate>, Option<Candidate>) {
    let src = Src {
        bytes: text.as_bytes(),
        base: 0,
    };
    let mut words = None;
    if mode != Mode::Substring && config.words.enabled && has_chars(text, config.words.min_chars) {
        let mut lines = Lines::default();
        let mut lx = LineCtx {
            lines: &mut lines,
            src,
        };
        words = crate::repetition::words::sieve::scan_words(text, config, &mut lx);
    }
    if mode == Mode::Words || words.is_some() {
        return (words, None);
    }
    let mut sub = None;
    if config.substring.enabled && has_chars(text, config.substring.min_chars) {
        let mut s = SubScan::new(config, true);
        let mut lines = Lines::default();
        let mut lx = LineCtx {
            lines: &mut lines,
            src,
        };
        s.read(text, 0, text.len(), 0, &mut lx, Stop::Settled);
        sub = s.best().cloned();
    }
    (None, sub)
}

/// The near-duplicate guard's output for the loop `cand` in `text`.
fn near_output(text: &str, cand: &Candidate, config: &ClampConfig) -> Clamped {
    let kept = &text[..cand.keep];
    Clamped {
        text: format!("{kept}{}", tail(&config.words.marker, kept.is_empty())),
        reports: vec![report(cand, text.len())],
    }
}

/// The word guard's output: the kept prefix (its tokens joined by one
/// space with `rejoin_tokens`) and the marker.
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

/// The substring guard's output: the text before the loop (trimmed at the
/// start with `trim_start`) and its marker.
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

/// The report of the loop `cand` in an input of `total` bytes.
pub(crate) fn report(cand: &Candidate, total: usize) -> ClampReport {
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
pub(crate) fn tail(marker: &str, kept_empty: bool) -> &str {
    if kept_empty {
        marker.trim_start()
    } else {
        marker
    }
}
