//! The substring detector: a unit of `min_unit..=max_unit` characters
//! repeated `min_copies` times back to back, found incrementally.
//!
//! For every unit length `L` it keeps the length of the current run of
//! positions `k` with `c[k] == c[k - L]`. A run of `(min_copies - 1) * L`
//! such positions starting at `a` is exactly the lazy regex
//! `(.{L}?)\1{min_copies-1,}` matching at `a - L`. Each character costs
//! `max_unit - min_unit + 1` comparisons and nothing is re-scanned.

use super::healthy::{content_letters, Lines};
use super::{ClampConfig, Detector};

/// Ring size for the last characters (a power of two above `max_unit`).
const RING: usize = 64;
/// Largest unit the ring supports.
pub(crate) const MAX_UNIT_LIMIT: usize = 48;

/// A loop found by a detector (substring or words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub detector: Detector,
    pub period: usize,
    /// Byte offset where the loop starts.
    pub start: usize,
    /// Byte offset where the kept source text ends.
    pub keep: usize,
    /// Number of tokens kept (words only; used to re-join in seed mode).
    pub keep_tokens: u64,
    /// The unit as it last appeared (a preview).
    pub unit: String,
}

impl Candidate {
    #[inline]
    pub(crate) fn better_than(&self, other: &Candidate) -> bool {
        (self.start, self.period) < (other.start, other.period)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Run {
    len: usize,
    start: usize,
    keep: usize,
    accepted: bool,
}

/// Incremental substring detector.
#[derive(Debug, Clone)]
pub(crate) struct Substring {
    min_unit: usize,
    max_unit: usize,
    copies: usize,
    protect: bool,
    fences: bool,
    tables: bool,
    max_exempt: usize,
    min_letters: usize,
    keep_one: bool,
    chars: [char; RING],
    starts: [usize; RING],
    /// For char `k`: end byte of the last non-whitespace char before `k`.
    nonws_before: [usize; RING],
    last_nonws_end: usize,
    runs: Vec<Run>,
    k: usize,
    pub(crate) best: Option<Candidate>,
}

impl Substring {
    pub(crate) fn new(config: &ClampConfig) -> Self {
        let s = &config.substring;
        let max_unit = s.max_unit.clamp(1, MAX_UNIT_LIMIT);
        let min_unit = s.min_unit.clamp(1, max_unit);
        let h = &config.healthy;
        Substring {
            min_unit,
            max_unit,
            copies: s.min_copies.max(2),
            protect: h.enabled,
            fences: h.skip_code_fences,
            tables: h.skip_table_rows,
            max_exempt: h.max_exempt_run_bytes,
            min_letters: h.min_unit_letters,
            keep_one: s.keep_one_copy,
            chars: ['\0'; RING],
            starts: [0; RING],
            nonws_before: [0; RING],
            last_nonws_end: 0,
            runs: vec![Run::default(); max_unit + 1],
            k: 0,
            best: None,
        }
    }

    /// Feeds character `c` found at byte offset `pos`.
    #[inline]
    pub(crate) fn push(&mut self, c: char, pos: usize, len: usize, lines: &Lines) {
        let k = self.k;
        let slot = k & (RING - 1);
        self.chars[slot] = c;
        self.starts[slot] = pos;
        self.nonws_before[slot] = self.last_nonws_end;
        if !c.is_whitespace() {
            self.last_nonws_end = pos + len;
        }
        self.k = k + 1;
        let end = pos + len;
        for l in self.min_unit..=self.max_unit {
            if k < l {
                break;
            }
            let prev = self.chars[(k - l) & (RING - 1)];
            let run = &mut self.runs[l];
            if prev != c {
                run.len = 0;
                continue;
            }
            if run.len == 0 {
                let s = (k - l) & (RING - 1);
                run.start = self.starts[s];
                run.keep = if self.keep_one {
                    self.nonws_before[slot]
                } else {
                    self.nonws_before[s]
                };
                run.accepted = false;
            }
            run.len += 1;
            if run.len >= (self.copies - 1) * l && !run.accepted {
                self.consider(l, end, lines);
            }
        }
    }

    #[cold]
    fn consider(&mut self, l: usize, end: usize, lines: &Lines) {
        let run = self.runs[l];
        if self.protect && end - run.start < self.max_exempt {
            let mut unit = ['\0'; MAX_UNIT_LIMIT];
            for (i, u) in unit[..l].iter_mut().enumerate() {
                *u = self.chars[(self.k - l + i) & (RING - 1)];
            }
            if content_letters(&unit[..l]) < self.min_letters
                || lines.exempt(run.start, self.fences, self.tables)
            {
                return;
            }
        }
        self.runs[l].accepted = true;
        let unit: String = (0..l)
            .rev()
            .map(|i| self.chars[(self.k - 1 - i) & (RING - 1)])
            .collect();
        let cand = Candidate {
            detector: Detector::Substring,
            period: l,
            start: run.start,
            keep: run.keep,
            keep_tokens: 0,
            unit,
        };
        if self.best.as_ref().is_none_or(|b| cand.better_than(b)) {
            self.best = Some(cand);
        }
    }

    /// True when feeding more text could still produce a loop that starts
    /// before `start` (used by batch mode to stop early).
    pub(crate) fn could_improve(&self, start: usize) -> bool {
        // A new run starts at least `max_unit` characters back.
        let k = self.k;
        if k <= self.max_unit || self.starts[(k - self.max_unit) & (RING - 1)] < start {
            return true;
        }
        self.runs[self.min_unit..=self.max_unit]
            .iter()
            .any(|r| r.len > 0 && !r.accepted && r.start < start)
    }
}
