//! The substring guard's byte pre-filter, and the driver that runs the
//! exact detector only where the filter says a loop may be.
//!
//! A substring loop of a unit of `L` characters (`B` bytes) repeated
//! `copies` times has `(copies - 1) * B` consecutive bytes equal to the byte
//! `B` places back: when every character equals the one `L` characters
//! back, the UTF-8 bytes are periodic with period `B`, and `B` lies between
//! `min_unit` and `4 * max_unit`. Call that many bytes `R(B)`.
//!
//! Any stretch of `R(d)` such bytes at distance `d` contains a whole 8-byte
//! block `[o, o + 8)` whose start `o` is a multiple of `G(d)`, the largest
//! power of two times 8 with `G(d) + 7 <= R(d)`; that block then equals the
//! 8 bytes `d` places back. The filter compares exactly those blocks: for
//! each block, the distances whose grid it lies on, about 0.7 comparisons
//! of 8 bytes per input byte with the default configuration. A block that
//! matches for some distance is *flagged*; no flag means no loop.
//!
//! Flagged blocks open a *region* that starts `margin` bytes before the
//! first flag and ends once `margin` bytes pass without a flag. Inside a
//! region the exact per-character detector runs, restarted at the region's
//! start. The margin (`copies * 4 * max_unit + 16` bytes) covers every run
//! that reaches its threshold in the region: such a run has a flagged block
//! within its first `R(B)` bytes, and starts at most `R(B) + B` bytes before
//! that block. A run that keeps going (an exempt one waiting for the 4 KiB
//! rule) keeps flagging blocks at most `G(d) + 8` bytes apart, so its
//! region stays open. The exact detector therefore reaches the same
//! verdict, at the same character, as if it had read the whole text; the
//! property tests in `engine/tests.rs` compare the two on texts with loops far
//! apart.

use crate::repetition::candidate::Candidate;
use crate::repetition::substring::Substring;
use crate::repetition::text::healthy::LineCtx;
use crate::repetition::words::Stop;
use crate::repetition::ClampConfig;

/// Largest grid exponent: blocks whose index has this many trailing zeros
/// are checked at every distance.
const MAX_EXP: usize = 7;

/// The byte filter: which distances to compare for a given block.
#[derive(Debug, Clone)]
struct Filter {
    dmin: usize,
    /// `lim[t]`: the largest distance compared for a block whose index
    /// (offset / 8) has `t` trailing zeros (`0` = none).
    lim: [usize; MAX_EXP + 1],
}

impl Filter {
    /// `None` when the configuration allows loops too short for the filter
    /// (`(copies - 1) * min_unit < 15`): the exact detector then reads
    /// everything.
    fn new(config: &ClampConfig) -> Option<Filter> {
        let s = &config.substring;
        let max_unit = s
            .max_unit
            .clamp(1, crate::repetition::substring::MAX_UNIT_LIMIT);
        let min_unit = s.min_unit.clamp(1, max_unit);
        let copies = s.min_copies.clamp(2, crate::repetition::bounds::MAX_COPIES);
        let dmin = min_unit;
        let dmax = 4 * max_unit;
        if (copies - 1) * dmin < 15 {
            return None;
        }
        let mut lim = [0usize; MAX_EXP + 1];
        for d in dmin..=dmax {
            let r = (copies - 1) * d;
            // Largest m <= MAX_EXP with 8 * 2^m + 7 <= r.
            let mut m = 0;
            while m < MAX_EXP && (8usize << (m + 1)) + 7 <= r {
                m += 1;
            }
            for l in lim.iter_mut().skip(m) {
                *l = d;
            }
        }
        Some(Filter { dmin, lim })
    }

    /// The first block from `buf[i..]` on (stream offset `o`, a multiple
    /// of 8, at index `i`) that is flagged, among the blocks that end by
    /// index `end`: its index, or `None`. Whole chunks of blocks are
    /// cleared first (see [`Filter::chunk_clean`]); a chunk that is not
    /// clear is searched block by block with [`Filter::flagged`].
    fn first_flag(&self, buf: &[u8], mut i: usize, end: usize, mut o: usize) -> Option<usize> {
        const CHUNK: usize = 256;
        let end = end.min(buf.len());
        let reach = self.lim[MAX_EXP];
        while i + 8 <= end {
            let blocks = ((end - i) / 8).min(CHUNK);
            if i >= reach && self.chunk_clean(buf, i, o, blocks) {
                i += 8 * blocks;
                o += 8 * blocks;
                continue;
            }
            for _ in 0..blocks {
                if self.flagged(buf, i, o) {
                    return Some(i);
                }
                i += 8;
                o += 8;
            }
        }
        None
    }

    /// True when none of the `blocks` blocks from `buf[i..]` (stream
    /// offset `o`, `i >= lim[MAX_EXP]`) is flagged. The same comparisons
    /// as [`Filter::flagged`] block by block, grouped by grid level and
    /// distance: level `t` compares every block whose index is a multiple
    /// of `2^t` at each distance in `(lim[t - 1], lim[t]]`, walking two
    /// strided streams of 8-byte chunks.
    fn chunk_clean(&self, buf: &[u8], i: usize, o: usize, blocks: usize) -> bool {
        let word = |c: &[u8]| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            u64::from_le_bytes(a)
        };
        let end = i + 8 * blocks;
        let mut lo = self.dmin;
        for t in 0..=MAX_EXP {
            let hi = self.lim[t];
            if hi < lo {
                continue;
            }
            let step = 1usize << t;
            let first = i + 8 * ((step - (o / 8) % step) % step);
            if first < end {
                for d in lo..hi + 1 {
                    let here = buf[first..end].chunks_exact(8).step_by(step);
                    let back = buf[first - d..end - d].chunks_exact(8).step_by(step);
                    let mut hit = false;
                    for (x, y) in here.zip(back) {
                        hit |= word(x) == word(y);
                    }
                    if hit {
                        return false;
                    }
                }
            }
            lo = hi + 1;
        }
        true
    }

    /// Is the block at `buf[i..i + 8]` (stream offset `o`, a multiple of
    /// 8) equal to the 8 bytes `d` places back, for a distance `d` whose
    /// grid holds `o`?
    #[inline]
    fn flagged(&self, buf: &[u8], i: usize, o: usize) -> bool {
        let t = ((o / 8).trailing_zeros() as usize).min(MAX_EXP);
        let hi = self.lim[t].min(i);
        let w = load(buf, i);
        let mut d = self.dmin;
        while d <= hi {
            if load(buf, i - d) == w {
                return true;
            }
            d += 1;
        }
        false
    }
}

#[inline(always)]
fn load(buf: &[u8], i: usize) -> u64 {
    match buf.get(i..i + 8).and_then(|s| <[u8; 8]>::try_from(s).ok()) {
        Some(s) => u64::from_le_bytes(s),
        None => 0,
    }
}

/// The substring detector behind the byte filter.
#[derive(Debug, Clone)]
pub(crate) struct SubScan {
    exact: Substring,
    filter: Option<Filter>,
    margin: usize,
    in_region: bool,
    /// Offset up to which the exact detector has read (in a region).
    exact_pos: usize,
    last_flag: usize,
    /// Offset of the next 8-byte block to check.
    next_block: usize,
    /// Offset up to which the input was read.
    done: usize,
}

impl SubScan {
    /// With `filter`, the byte filter decides where the exact detector
    /// runs; without, it reads every character.
    pub(crate) fn new(config: &ClampConfig, filter: bool) -> Self {
        let s = &config.substring;
        let max_unit = s
            .max_unit
            .clamp(1, crate::repetition::substring::MAX_UNIT_LIMIT);
        let copies = s.min_copies.clamp(2, crate::repetition::bounds::MAX_COPIES);
        let filter = if filter { Filter::new(config) } else { None };
        SubScan {
            exact: Substring::new(config),
            in_region: filter.is_none(),
            filter,
            margin: copies * 4 * max_unit + 16,
            exact_pos: 0,
            last_flag: 0,
            next_block: 0,
            done: 0,
        }
    }

    /// The leftmost loop found so far.
    pub(crate) fn best(&self) -> Option<&Candidate> {
        self.exact.best.as_ref()
    }

    /// Bytes of history [`SubScan::read`] may need before `done`.
    pub(crate) fn history(&self) -> usize {
        self.margin + 64
    }

    /// A byte offset no future cut of this detector can fall before.
    /// Behind the filter and outside a region, a run not yet flagged
    /// started less than the margin back, so the cut keeps at least the
    /// text up to the last non-whitespace character before that; `buf`
    /// (the stream from `base`, with the history) and `floor` (the end of
    /// the last non-whitespace character before `base`) find it. In a
    /// region, or with the filter off, the exact detector knows.
    pub(crate) fn settled(&self, buf: &str, base: usize, floor: usize) -> usize {
        if self.filter.is_none() || self.in_region {
            return self.exact.settled_keep().min(self.done);
        }
        let start = self.done.saturating_sub(self.margin).max(base);
        let mut at = start - base;
        while !buf.is_char_boundary(at) {
            at -= 1;
        }
        buf[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !c.is_whitespace())
            .map_or(floor, |(i, c)| base + i + c.len_utf8())
    }

    /// True when the filter is bypassed for good.
    pub(crate) fn is_exact(&self) -> bool {
        self.filter.is_none()
    }

    /// Bypasses the filter from now on (the stream held bytes that are not
    /// UTF-8, so byte periods no longer follow character periods). `buf`
    /// holds the stream from `base` to at least `done`; `nonws_floor` is the
    /// end of the last non-whitespace character before `base`.
    pub(crate) fn go_exact(
        &mut self,
        buf: &str,
        base: usize,
        nonws_floor: usize,
        lines: &mut LineCtx<'_>,
    ) {
        if self.filter.is_none() {
            return;
        }
        let done = self.done;
        if !self.in_region {
            self.enter(buf, base, done, nonws_floor);
        }
        self.feed_exact(buf, base, done, lines, Stop::Never);
        self.filter = None;
        self.in_region = true;
    }

    /// Feeds one character to the exact detector (filter bypassed).
    pub(crate) fn push_char(&mut self, c: char, pos: usize, len: usize, lines: &mut LineCtx<'_>) {
        debug_assert!(self.filter.is_none());
        self.exact.push(c, pos, len, lines);
        self.exact_pos = pos + len;
        self.done = pos + len;
    }

    /// Reads the input up to offset `end`. `buf` holds the stream from
    /// offset `base` (with [`SubScan::history`] bytes before `done` when
    /// there are that many) to at least `end`; `nonws_floor` is the end of
    /// the last non-whitespace character before `base`. With
    /// [`Stop::Verdict`], returns the offset of the first character after
    /// which a loop is known; with [`Stop::Settled`], returns once the
    /// leftmost loop is known.
    pub(crate) fn read(
        &mut self,
        buf: &str,
        base: usize,
        end: usize,
        nonws_floor: usize,
        lines: &mut LineCtx<'_>,
        stop: Stop,
    ) -> Option<usize> {
        let Some(filter) = &self.filter else {
            let r = self.feed_exact(buf, base, end, lines, stop);
            self.done = self.exact_pos;
            return r;
        };
        let bytes = buf.as_bytes();
        let filter = filter.clone();
        while self.next_block + 8 <= end {
            let settling = stop == Stop::Settled && self.exact.best.is_some();
            if !self.in_region && !settling {
                // Nothing happens on a block that is not flagged: jump to
                // the next flagged one.
                let i = self.next_block - base;
                match filter.first_flag(bytes, i, end - base, self.next_block) {
                    Some(at) => self.next_block = base + at,
                    None => {
                        self.next_block += (end - self.next_block) / 8 * 8;
                        break;
                    }
                }
            }
            let o = self.next_block;
            self.next_block = o + 8;
            if filter.flagged(bytes, o - base, o) {
                self.last_flag = o;
                if !self.in_region {
                    self.enter(buf, base, o, nonws_floor);
                }
            } else if self.in_region && o >= self.last_flag + self.margin {
                self.in_region = false;
            }
            if self.in_region {
                if let Some(at) = self.feed_exact(buf, base, o + 8, lines, stop) {
                    self.done = at;
                    return Some(at);
                }
            } else if stop == Stop::Settled && self.exact.best.is_some() {
                self.done = o + 8;
                return Some(o + 8);
            }
        }
        if self.in_region {
            if let Some(at) = self.feed_exact(buf, base, end, lines, stop) {
                self.done = at;
                return Some(at);
            }
        }
        self.done = end;
        None
    }

    /// Opens a region for the flag at `o`: the exact detector restarts
    /// `margin` bytes before it (at a character boundary), or goes on from
    /// where it stopped when that is later.
    fn enter(&mut self, buf: &str, base: usize, o: usize, nonws_floor: usize) {
        self.in_region = true;
        let mut r = o.saturating_sub(self.margin).max(base);
        if r <= self.exact_pos {
            // The last region read past this start: go on with its
            // detector (as if it had never closed), so the line tracker
            // never has to go back.
            return;
        }
        while !buf.is_char_boundary(r - base) {
            r += 1;
        }
        let before = &buf[..r - base];
        let last_nonws = before
            .char_indices()
            .rev()
            .find(|(_, c)| !c.is_whitespace())
            .map_or(nonws_floor, |(i, c)| base + i + c.len_utf8());
        self.exact.restart(last_nonws);
        self.exact_pos = r;
    }

    /// Feeds the exact detector every character from `exact_pos` up to
    /// `end` (a character that starts before `end` is read whole).
    fn feed_exact(
        &mut self,
        buf: &str,
        base: usize,
        end: usize,
        lines: &mut LineCtx<'_>,
        stop: Stop,
    ) -> Option<usize> {
        if self.exact_pos >= end {
            return None;
        }
        let had = self.exact.best.is_some();
        let from = self.exact_pos - base;
        let limit = end - base;
        let mut at = self.exact_pos;
        for (i, c) in buf[from..].char_indices() {
            if from + i >= limit {
                break;
            }
            let len = c.len_utf8();
            at = base + from + i + len;
            self.exact.push(c, base + from + i, len, lines);
            if stop == Stop::Verdict && !had && self.exact.best.is_some() {
                self.exact_pos = at;
                return Some(at);
            }
        }
        self.exact_pos = at;
        None
    }
}
