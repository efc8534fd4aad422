//! The substring detector: a unit of `min_unit..=max_unit` characters
//! repeated `min_copies` times back to back, found incrementally.
//!
//! For every unit length `L` it keeps the length of the current run of
//! positions `k` with `c[k] == c[k - L]`. A run of `(min_copies - 1) * L`
//! such positions starting at `a` is exactly the lazy regex
//! `(.{L}?)\1{min_copies-1,}` matching at `a - L`. The sixteen lengths are
//! updated together, branch-free, on a window of the last sixteen
//! characters, so each character costs a few vector operations and
//! nothing is ever re-scanned.

pub(crate) mod prefilter;

use crate::repetition::candidate::Candidate;
use crate::repetition::text::healthy::{content_letters, is_layout, LineCtx};
use crate::repetition::{ClampConfig, Detector};

/// Unit lengths tracked (lane `i` is length `i + 1`).
const W: usize = 16;
/// Largest unit supported.
pub(crate) const MAX_UNIT_LIMIT: usize = W;
/// A character value no `char` has: the window starts empty.
const EMPTY: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, Default)]
struct RunInfo {
    start: usize,
    keep: usize,
    /// The loop starts inside a data token (base64, hex).
    data: bool,
    accepted: bool,
}

/// Characters looked back at to call a run's start part of a data token.
const DATA_LOOKBACK: u32 = 16;

/// Incremental state for [`Substring`]'s data-token test: a run that
/// starts right after 16 base64/hex characters (with a digit and a
/// letter, or both cases of letters, among them), or within 14 characters of a `0x` that starts a
/// hexadecimal token, repeats inside encoded data (`AAAA…` in base64,
/// `0x0000…`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DataScan {
    /// Consecutive base64url/hex characters ending here (capped).
    b64: u32,
    /// Characters since the last ASCII digit / letter (capped).
    since_digit: u32,
    since_upper: u32,
    since_lower: u32,
    /// Characters since the `0` of a `0x` that starts a hexadecimal token
    /// still going on (`u32::MAX`: none).
    since_hex: u32,
    /// The previous character, for token starts (`None` after a restart).
    prev: Option<char>,
}

impl DataScan {
    pub(crate) const NONE: DataScan = DataScan {
        b64: 0,
        since_digit: u32::MAX,
        since_upper: u32::MAX,
        since_lower: u32::MAX,
        since_hex: u32::MAX,
        prev: None,
    };

    /// Whether a loop starting at the next character starts inside data.
    #[inline]
    pub(crate) fn data_here(&self) -> bool {
        let digit = self.since_digit < DATA_LOOKBACK;
        let upper = self.since_upper < DATA_LOOKBACK;
        let lower = self.since_lower < DATA_LOOKBACK;
        (self.b64 >= DATA_LOOKBACK && ((digit && (upper || lower)) || (upper && lower)))
            || self.since_hex <= 14
    }

    /// The state at the start of a run of non-white-space.
    pub(crate) fn after_space() -> Self {
        DataScan {
            prev: Some(' '),
            ..DataScan::NONE
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, c: char) {
        let b64 = c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_');
        self.b64 = if b64 { (self.b64 + 1).min(64) } else { 0 };
        self.since_digit = if c.is_ascii_digit() {
            0
        } else {
            self.since_digit.saturating_add(1)
        };
        self.since_upper = if c.is_ascii_uppercase() {
            0
        } else {
            self.since_upper.saturating_add(1)
        };
        self.since_lower = if c.is_ascii_lowercase() {
            0
        } else {
            self.since_lower.saturating_add(1)
        };
        self.since_hex = if self.since_hex != u32::MAX {
            if c.is_ascii_hexdigit() || (self.since_hex == 0 && matches!(c, 'x' | 'X')) {
                self.since_hex.saturating_add(1)
            } else {
                u32::MAX
            }
        } else if c == '0' && self.prev.is_some_and(|p| !p.is_alphanumeric() && p != '_') {
            0
        } else {
            u32::MAX
        };
        // `0` then anything but `x`: not a hex token.
        if self.since_hex == 1 && !matches!(c, 'x' | 'X') {
            self.since_hex = u32::MAX;
        }
        self.prev = Some(c);
    }
}

/// Whether a repeated unit (its characters, as scalar values) can be a
/// repeat inside encoded data. Data repeats whole bytes: hexadecimal
/// digits come two per byte and base64 four characters per three bytes,
/// so their repeats have even units, and a run of one value repeats a
/// unit of one or two characters (`AAAA…`, `000…`). A unit whose own
/// smallest period is odd and at least 5 characters (`python/` in
/// `/Desktop/Python/python/python/…`) is text, even right after 16
/// base64-looking characters such as a path.
pub(crate) fn data_unit(unit: &[u32]) -> bool {
    let l = unit.len();
    let q = (1..=l)
        .find(|&q| l.is_multiple_of(q) && (q..l).all(|i| unit[i] == unit[i - q]))
        .unwrap_or(l);
    q < 5 || q % 2 == 0
}

/// Incremental substring detector.
#[derive(Debug, Clone)]
pub(crate) struct Substring {
    protect: bool,
    fences: bool,
    tables: bool,
    max_exempt: usize,
    min_letters: usize,
    flood: usize,
    max_layout: usize,
    keep_one: bool,
    data: DataScan,
    /// For char `k`: a loop starting there starts inside data.
    data_before: Vec<bool>,
    /// The last `W` characters, written twice (at `k % W` and `k % W + W`)
    /// so that before char `k` is written, `buf[k % W..][..W]` is the
    /// window, oldest first: element `j` is the character `W - j` places
    /// back.
    buf: [u32; 2 * W],
    /// Element `j`: current run of matches at distance `W - j`.
    run: [i32; W],
    /// Element `j`: matches needed at distance `W - j` (`i32::MAX` for
    /// lengths not tracked).
    thr: [i32; W],
    info: [RunInfo; W],
    /// Byte offset of char `k` (ring).
    starts: Vec<usize>,
    /// For char `k`: end byte of the last non-whitespace char before it.
    nonws_before: Vec<usize>,
    mask: usize,
    /// Characters back that a run below its threshold can start.
    span: usize,
    /// End of the last non-whitespace character before the restart.
    restart_nonws: usize,
    last_nonws_end: usize,
    k: usize,
    pub(crate) best: Option<Candidate>,
}

impl Substring {
    pub(crate) fn new(config: &ClampConfig) -> Self {
        let s = &config.substring;
        let max_unit = s.max_unit.clamp(1, MAX_UNIT_LIMIT);
        let min_unit = s.min_unit.clamp(1, max_unit);
        let copies = s.min_copies.clamp(2, crate::repetition::bounds::MAX_COPIES);
        let mut thr = [i32::MAX; W];
        for (j, t) in thr.iter_mut().enumerate() {
            let l = W - j;
            if (min_unit..=max_unit).contains(&l) {
                *t = ((copies - 1) * l) as i32;
            }
        }
        let cap = (copies * max_unit + 2).next_power_of_two();
        let h = &config.healthy;
        Substring {
            protect: h.enabled,
            fences: h.skip_code_fences,
            tables: h.skip_table_rows,
            max_exempt: h.max_exempt_run_bytes,
            min_letters: h.min_unit_letters,
            flood: h.flood_chars,
            max_layout: h.max_layout_chars,
            keep_one: s.keep_one_copy,
            data: DataScan::NONE,
            data_before: vec![false; cap],
            buf: [EMPTY; 2 * W],
            run: [0; W],
            thr,
            info: [RunInfo::default(); W],
            starts: vec![0; cap],
            nonws_before: vec![0; cap],
            mask: cap - 1,
            span: copies * max_unit + 1,
            restart_nonws: 0,
            last_nonws_end: 0,
            k: 0,
            best: None,
        }
    }

    /// Forgets every character seen (a new region starts at the next one),
    /// keeping `best`. `last_nonws_end` is the end byte of the last
    /// non-whitespace character before the region.
    pub(crate) fn restart(&mut self, last_nonws_end: usize) {
        self.restart_nonws = last_nonws_end;
        self.buf = [EMPTY; 2 * W];
        self.run = [0; W];
        self.info = [RunInfo::default(); W];
        self.last_nonws_end = last_nonws_end;
        self.data = DataScan::NONE;
        self.k = 0;
    }

    /// A byte offset no cut found from now on can fall before. Runs going
    /// on now start at most `span` characters back, unless they already
    /// reached their threshold unaccepted (exempt; their cut is known),
    /// and a cut keeps the text up to the last non-whitespace character
    /// before the loop (or before its second copy), which only moves
    /// forward.
    pub(crate) fn settled_keep(&self) -> usize {
        let k = self.k;
        let mut bound = if k <= self.span {
            self.restart_nonws
        } else {
            self.nonws_before[(k - self.span) & self.mask]
        };
        for l in 1..=W {
            let i = W - l;
            if self.run[i] >= self.thr[i] && !self.info[l - 1].accepted {
                bound = bound.min(self.info[l - 1].keep);
            }
        }
        bound
    }

    /// Feeds character `c` (of `len` bytes) found at byte offset `pos`.
    #[inline(always)]
    pub(crate) fn push(&mut self, c: char, pos: usize, len: usize, lines: &mut LineCtx<'_>) {
        let k = self.k;
        let slot = k & self.mask;
        self.starts[slot] = pos;
        self.nonws_before[slot] = self.last_nonws_end;
        if self.protect {
            self.data_before[slot] = self.data.data_here();
            self.data.push(c);
        }
        if !c.is_whitespace() {
            self.last_nonws_end = pos + len;
        }
        self.k = k + 1;
        let cu = c as u32;
        let p = k % W;
        let win: &[u32; W] = self.buf[p..p + W].try_into().expect("window");
        let mut hit = 0i32;
        for ((run, &w), &thr) in self.run.iter_mut().zip(win).zip(&self.thr) {
            let m = -i32::from(w == cu);
            let r = (*run + 1) & m;
            *run = r;
            hit |= i32::from(r >= thr);
        }
        self.buf[p] = cu;
        self.buf[p + W] = cu;
        if hit != 0 {
            self.cold(pos + len, lines);
        }
    }

    /// Some run reached its threshold: record where it starts (the first
    /// time) and apply the protections.
    #[cold]
    #[inline(never)]
    fn cold(&mut self, end: usize, lines: &mut LineCtx<'_>) {
        let k = self.k - 1;
        for l in 1..=W {
            let i = W - l;
            let r = self.run[i];
            if r < self.thr[i] {
                continue;
            }
            if r > self.thr[i] + (1 << 24) {
                // Keep counters bounded on endless runs (above threshold,
                // never equal to it again while the run lasts).
                self.run[i] = self.thr[i] + 1;
            }
            if r == self.thr[i] {
                // First match at a = k - r + 1; the loop starts at a - l.
                let a = k + 1 - r as usize;
                if a < l {
                    continue;
                }
                let s = a - l;
                self.info[l - 1] = RunInfo {
                    start: self.starts[s & self.mask],
                    keep: if self.keep_one {
                        self.nonws_before[a & self.mask]
                    } else {
                        self.nonws_before[s & self.mask]
                    },
                    data: self.data_before[s & self.mask],
                    accepted: false,
                };
            }
            if !self.info[l - 1].accepted {
                self.consider(l, end, lines);
            }
        }
    }

    fn consider(&mut self, l: usize, end: usize, lines: &mut LineCtx<'_>) {
        let info = self.info[l - 1];
        // The last `l` characters, oldest first (the current one is
        // already in the window).
        let mut unit = ['\0'; W];
        let p = self.k % W;
        for (i, u) in unit[..l].iter_mut().enumerate() {
            *u = char::from_u32(self.buf[p + W - l + i]).unwrap_or('\u{FFFD}');
        }
        if self.protect && end - info.start < self.max_exempt {
            let unit = &unit[..l];
            let covered = self.run[W - l].max(0) as usize + l;
            if (info.data && data_unit(&unit.iter().map(|&c| c as u32).collect::<Vec<_>>()))
                || lines.exempt_at(end, info.start, self.fences, false)
            {
                // Data or code: only absurd length.
                return;
            }
            if lines.exempt_at(end, info.start, false, self.tables) {
                // A table row: padding and rules are layout up to absurd
                // length (a padded cell can hold 1,200 spaces), but empty
                // cells (`| | | …`) are a flood at `max_layout`.
                let cells = unit.contains(&'|') && content_letters(unit) < self.min_letters;
                if !cells || covered < self.max_layout {
                    return;
                }
            } else if content_letters(unit) < self.min_letters {
                // Symbols, emoji, digits, escapes: a flood once the run
                // covers `flood` characters (dividers, rules, dot leaders
                // and white space, made of layout symbols: `max_layout`).
                if covered < self.flood {
                    return;
                }
                if covered < self.max_layout
                    && unit.iter().all(|&c| c.is_whitespace() || is_layout(c))
                {
                    return;
                }
            }
        }
        self.info[l - 1].accepted = true;
        let cand = Candidate {
            detector: Detector::Substring,
            period: l,
            start: info.start,
            keep: info.keep,
            keep_tokens: 0,
            unit: unit[..l].iter().collect(),
        };
        if self.best.as_ref().is_none_or(|b| cand.better_than(b)) {
            self.best = Some(cand);
        }
    }
}
