//! The near-duplicate detector: loops whose copies are not equal, or whose
//! unit the word and substring guards cannot see.
//!
//! It reads the text once, character by character, and splits it into
//! tokens (white space; each CJK character is a token) and *segments*
//! (lines, sentences ending in `. ! ? 。 ！ ？`, and the JSON escape `\n`
//! written as backslash-n). Eight rules, each with its own thresholds
//! ([`crate::repetition::NearConfig`]); the first that completes fires:
//!
//! * **counted list items**: list items (`51.`, `9)`) whose bodies are
//!   equal once the counter is set aside — `list_items` items in a row
//!   (period 1 to 8 items, `3p + 1` items for period `p`, so two items
//!   alternating and weekdays cycling count), or `empty_items` empty
//!   markers (`76.`, `77.`, …);
//! * **restarted lists**: the last `d` items of a list (1 ≤ `d` ≤ 256)
//!   said again whole, marker and body, right after themselves, at least
//!   `list_copy_items` of them (`… 20. 20 / 2. 2 / 3. 3 … 20. 20`);
//! * **codes going round a few values**: `token_window` tokens in a row,
//!   each with a digit and a letter, holding at most
//!   `token_window_values` different ones, each twice, one with a letter
//!   that is not a hex digit, and no fixed period (`802.11a, 802.11b,
//!   802.11g, 802.11a, …`);
//! * **lines going round a few values**: `line_window` lines in a row
//!   outside fences and tables holding at most `line_window_values`
//!   different lines (a list marker set aside), each at least twice, one
//!   of `line_window_min_tokens` tokens or more with a word — loops with
//!   no fixed period;
//! * **near-duplicate sentences**: segments of at least
//!   `sentence_min_tokens` tokens, each within `sentence_max_edits` token
//!   edits of the segment one or two back,
//!   `sentence_copies` segments in a row;
//! * **counters**: tokens with every digit run masked (`28:00` =
//!   `29:00`, `assistant57` = `assistant58`) repeating with a period of
//!   1–8 tokens for `max(masked_min_run, masked_run_per_period·p)` tokens,
//!   the unit holding a word and a number, and exactly one token of the
//!   unit differing from its previous copy at most (one counter) while
//!   another token stays the same (a run of ids `item1 item2 …` passes);
//! * **long units without white space**: a unit of `chain_min_unit` to
//!   `chain_max_unit` characters repeated `chain_copies` times back to
//!   back inside one run of non-white-space (`/api/v1/users/api/v1/…`),
//!   unless it starts inside a data token (base64, hex) with a unit that
//!   can be encoded data (`crate::repetition::substring::data_unit`);
//! * **code blocks**: inside a fenced block, a block of 2–16 lines (two
//!   different lines at least, one holding a word) repeated
//!   `code_block_copies` times.
//!
//! The first four and the last skip code fences and table rows
//! respectively as the other guards do: lists, lines, sentences and counters
//! are not checked inside fences or table rows; code blocks only inside
//! fences. A segment counts once it is complete (the last, unfinished one
//! never does), so a stream and a batch run on the same prefix agree.
//! Work is O(1) per character plus a banded edit distance per segment
//! (at most `SEG_TOKENS · 5` steps); memory is fixed.
//!
//! # The fast path, and why it reaches the same verdicts
//!
//! [`Near::push`] (one character at a time) is the reference.
//! [`Near::feed`] takes two kinds of bytes without the per-character
//! step: ASCII white space other than a newline (the same code as the
//! step's white-space branch), and runs of *plain* bytes ([`Near::plain_run`]:
//! ASCII, not white space, not a digit, not a backslash) inside a line and
//! a segment already open, in a token whose marker shape is already
//! "anything else" (or that starts with this run), while the run of
//! non-white-space stays under [`CHAIN_START`] characters. On such bytes
//! the step can change only: the token's keys ([`Key`] packs case-folded
//! ASCII bytes eight to a word, so a word and its bytes one by one give
//! the same key; the masked key equals the raw one until the first digit,
//! and plain bytes hold none), its letter count and whether a letter is
//! not a hex digit, marker shape and last
//! character, the line's preview, and the run of non-white-space, which
//! below [`CHAIN_START`] characters only stores its characters. Those are
//! written to the ring lazily ([`Near::materialize`]: before any
//! per-character step, and at the end of every `feed`, so a stream split
//! anywhere sees the same ring); white space drops them unread. No rule
//! completes on a plain byte, so the verdict, where it fires and
//! [`Near::settled`] are the reference's: the property test
//! `fast_path_equals_the_reference` checks all three on long random texts
//! in random chunkings.

pub(crate) mod sieve;

use crate::repetition::substring::Candidate;
use crate::repetition::text::healthy::{is_cjk, Lines, Src};
use crate::repetition::text::swar;
use crate::repetition::{ClampConfig, Detector};

/// Tokens of a segment kept for the edit distance (longer segments are
/// compared on their first `SEG_TOKENS` tokens and their length).
const SEG_TOKENS: usize = 64;
/// Characters of the current non-white-space run kept for long units.
const CHAIN_RING: usize = 512;
/// Shingles of a run of non-white-space are looked up from its 16th
/// character on (a long unit repeated 4 times is at least 52).
pub(super) const CHAIN_START: usize = 16;
/// Slots of the 8-character shingle table for long units.
const CHAIN_TABLE: usize = 256;
/// Shingle length for long units.
const CHAIN_SHINGLE: usize = 8;
/// Token periods of the counter rule.
const MASK_W: usize = 8;
/// Tokens kept for the counter rule.
const TOK_RING: usize = 512;
/// Line periods of the code-block rule.
const LINE_W: usize = 16;
/// List items kept: periods up to [`ITEM_W`] items and the window of
/// the few-values rule (at most `ITEM_RING`).
const ITEM_RING: usize = 16;
/// Item periods of the counted-list rule.
const ITEM_W: usize = 8;
/// Lines kept for the code-block rule.
const LINE_RING: usize = 128;
/// The longest window of the few-codes rule, in tokens.
pub(super) const TOKEN_WINDOW: usize = 16;
/// Items of a list the restarted-list rule looks back over: a copy of
/// items further back than this is not seen.
const LIST_BACK: usize = 256;
/// Slots of the restarted-list rule's table (twice [`LIST_BACK`]).
const LIST_TABLE: usize = 2 * LIST_BACK;
/// Bytes of a segment kept for the report's preview.
const PREVIEW: usize = 64;

/// The eight bytes of `bytes` from `i` as a little-endian word; bytes past
/// the end read as spaces (which end a token).
#[inline(always)]
fn load8(bytes: &[u8], i: usize) -> u64 {
    match bytes.get(i..i + 8) {
        Some(w) => u64::from_le_bytes(w.try_into().unwrap_or([b' '; 8])),
        None => {
            let mut w = [b' '; 8];
            let tail = bytes.get(i..).unwrap_or_default();
            w[..tail.len()].copy_from_slice(tail);
            u64::from_le_bytes(w)
        }
    }
}

#[inline]
fn mix(h: u64, x: u64) -> u64 {
    (h.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// A token's key under construction: the case-folded characters, ASCII
/// ones packed eight to a 64-bit word, any other character mixed on its
/// own. Pushing a run of ASCII bytes one at a time or as one word gives
/// the same key (a unit test checks it), so the per-character path and
/// the word-at-a-time path of [`Near::feed`] agree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Key {
    h: u64,
    buf: u64,
    n: u32,
}

impl Key {
    /// A case-folded character (its code point).
    #[inline]
    pub(super) fn push(&mut self, l: u32) {
        if l < 0x80 {
            self.push_word(u64::from(l), 1);
        } else {
            let tagged = self.buf | (0x80 | u64::from(self.n)) << 56;
            self.h = mix(mix(self.h, tagged), u64::from(l));
            self.buf = 0;
            self.n = 0;
        }
    }

    /// `k` (1..=8) ASCII bytes in the low bytes of `w`, the rest zero.
    #[inline]
    pub(super) fn push_word(&mut self, w: u64, k: u32) {
        let n = self.n;
        let all = self.buf | w << (8 * n);
        if n + k >= 8 {
            self.h = mix(self.h, all);
            self.buf = if n == 0 { 0 } else { w >> (8 * (8 - n)) };
            self.n = n + k - 8;
        } else {
            self.buf = all;
            self.n = n + k;
        }
    }

    #[inline]
    pub(super) fn value(&self) -> u64 {
        mix(self.h, self.buf | (0x40 | u64::from(self.n)) << 56)
    }
}

/// A finished token.
#[derive(Debug, Clone, Copy, Default)]
struct Tok {
    raw: u64,
    masked: u64,
    start: usize,
    end: usize,
    word: bool,
    digits: bool,
    /// Holds a letter.
    letter: bool,
    /// Holds a letter other than a hex digit (`a`–`f`) or the `x` of
    /// `0x`.
    non_hex: bool,
}

/// The token being read.
#[derive(Debug, Clone, Copy, Default)]
struct Build {
    active: bool,
    start: usize,
    raw: Key,
    /// The key with every digit run masked; equal to `raw` until the
    /// first digit (`digits`), and updated only from then on.
    masked: Key,
    in_digits: bool,
    letters: u32,
    digits: bool,
    /// List-marker shape so far: 0 digits only, 1 digits then `.`/`)`,
    /// 2 anything else.
    marker: u8,
    ndigits: u32,
    /// A letter other than `a`–`f` and `x` (case-folded) was read.
    non_hex: bool,
    /// Last character was `. ! ?`.
    last_stop: bool,
}

/// A sentence-like segment: its tokens' masked keys.
#[derive(Debug, Clone, Default)]
struct Seg {
    start: usize,
    end: usize,
    keys: Vec<u64>,
    n: usize,
}

/// A line (or a JSON `\n`-separated piece of one).
#[derive(Debug, Clone, Default)]
struct Line {
    start: usize,
    end: usize,
    n: usize,
    /// Hash of the raw tokens after the list marker.
    body: u64,
    body_len: usize,
    marker: bool,
    /// The list marker's raw key (`7.`), when `marker`.
    marker_key: u64,
    word: bool,
    /// Hash of every raw token (code lines).
    whole: u64,
    /// Inside a fence / a table row (at its start).
    fence: bool,
    table: bool,
    preview: String,
}

/// A run of matches at one period, with where its loop starts and what
/// a cut keeps.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    len: usize,
    start: usize,
    keep: usize,
}

/// Incremental near-duplicate detector.
#[derive(Debug, Clone)]
pub(crate) struct Near {
    cfg: crate::repetition::NearConfig,
    lines: Lines,
    build: Build,
    seg: Seg,
    seg_active: bool,
    line: Line,
    line_active: bool,
    /// Byte offset of a backslash waiting for its next character.
    pending_bs: Option<usize>,
    /// White space since the last token character (for the preview).
    space: bool,
    // Counted list items: the last items (body, body length, start, end).
    items: [(u64, usize, usize, usize); ITEM_RING],
    nitems: usize,
    item_runs: [Run; ITEM_W],
    // A restarted list: the whole keys (marker and body) of the last
    // `LIST_BACK` items of the list going on, a table from whole key to
    // the item's index (+1; 0 is empty), and the copy being read: its
    // distance in items, items copied in a row, start and keep.
    list_keys: Vec<u64>,
    list_table: Vec<(u64, u32, u32)>,
    copy_d: usize,
    copy: Run,
    /// The table holds entries of this generation (`list_gen`); a new
    /// list starts a new generation instead of clearing the table.
    list_used: bool,
    list_gen: u32,
    /// Entries of this generation.
    list_count: usize,
    // Lines going round a few values: the last lines in a row outside
    // fences and tables (key, tokens, start, end).
    line_ring: [(u64, usize, usize, usize, bool); ITEM_RING],
    nlines: usize,
    // Near-duplicate segments: the last two (raw keys, length, start, end).
    prev: [Seg; 2],
    nprev: usize,
    sent_runs: [Run; 2],
    // Counters: ring of tokens outside fences and tables.
    toks: Vec<Tok>,
    ntok: usize,
    mask_runs: [usize; MASK_W],
    /// Periods (bit p - 1) whose run is going on (`mask_runs` > 0).
    mask_active: u32,
    /// The low bytes of the last eight masked keys, the latest lowest.
    mask_tags: u64,
    last_word_tok: Option<usize>,
    last_digit_tok: Option<usize>,
    /// Tokens going round a few values: tokens in a row (counter tokens)
    /// that hold a digit and a letter.
    code_run: usize,
    // Long units: the current non-white-space run.
    chain_chars: Vec<(u32, usize)>,
    chain_len: usize,
    /// Characters `lazy_k..chain_len` of the run, at byte offsets from
    /// `lazy_from` on, were counted but not yet written to `chain_chars`
    /// (see [`Near::materialize`]).
    lazy: bool,
    lazy_from: usize,
    lazy_k: usize,
    chain_roll: u64,
    chain_pow: u64,
    /// Shingle tag and the run-independent index of its last occurrence
    /// (`chain_base` plus the index in its run); entries of earlier runs
    /// are ignored, so a run's verdict depends on its characters alone.
    chain_table: Vec<(u32, u64)>,
    /// Characters of all earlier runs of non-white-space.
    chain_base: u64,
    chain_d: usize,
    chain_run: usize,
    // Code blocks: ring of lines inside fences (key, start, end, word).
    code: Vec<(u64, usize, usize, bool)>,
    ncode: usize,
    code_runs: [usize; LINE_W + 1],
    pub(crate) best: Option<Candidate>,
}

impl Near {
    pub(crate) fn new(config: &ClampConfig) -> Self {
        let mut pow = 1u64;
        for _ in 0..CHAIN_SHINGLE {
            pow = pow.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        Near {
            cfg: config.near.clone(),
            lines: Lines::default(),
            build: Build::default(),
            seg: Seg::default(),
            seg_active: false,
            line: Line::default(),
            line_active: false,
            pending_bs: None,
            space: false,
            items: [(0, 0, 0, 0); ITEM_RING],
            nitems: 0,
            item_runs: [Run::default(); ITEM_W],
            list_keys: vec![0; LIST_BACK],
            list_table: vec![(0, 0, 0); LIST_TABLE],
            copy_d: 0,
            copy: Run::default(),
            list_used: false,
            list_gen: 1,
            list_count: 0,
            line_ring: [(0, 0, 0, 0, false); ITEM_RING],
            nlines: 0,
            prev: [Seg::default(), Seg::default()],
            nprev: 0,
            sent_runs: [Run::default(); 2],
            toks: vec![Tok::default(); TOK_RING],
            ntok: 0,
            mask_runs: [0; MASK_W],
            mask_active: 0,
            mask_tags: 0,
            last_word_tok: None,
            last_digit_tok: None,
            code_run: 0,
            chain_chars: vec![(0, 0); CHAIN_RING],
            chain_len: 0,
            lazy: false,
            lazy_from: 0,
            lazy_k: 0,
            chain_roll: 0,
            chain_pow: pow,
            chain_table: vec![(0, u64::MAX); CHAIN_TABLE],
            chain_base: 0,
            chain_d: 0,
            chain_run: 0,
            code: vec![(0, 0, 0, false); LINE_RING],
            ncode: 0,
            code_runs: [0; LINE_W + 1],
            best: None,
        }
    }

    /// Starts reading afresh at byte `pos`, a line start (the text's
    /// start, or just after a newline) where the fenced block `open_fence`
    /// (see [`Lines`]) is open: every rule's state is emptied except the
    /// code-block rule's lines, which only lines inside fences change.
    /// Used by the pre-filter ([`crate::repetition::near::sieve`]) to start a region.
    pub(crate) fn restart(&mut self, pos: usize, open_fence: Option<(u8, usize)>) {
        self.lines = Lines::at_line_start(pos, open_fence);
        self.build = Build::default();
        self.seg.keys.clear();
        self.seg.n = 0;
        self.seg_active = false;
        self.line.preview.clear();
        self.line_active = false;
        self.pending_bs = None;
        self.space = false;
        self.end_list();
        self.nlines = 0;
        self.nprev = 0;
        self.sent_runs = [Run::default(); 2];
        self.ntok = 0;
        self.mask_runs = [0; MASK_W];
        self.mask_active = 0;
        self.mask_tags = 0;
        self.last_word_tok = None;
        self.last_digit_tok = None;
        self.code_run = 0;
        self.chain_reset();
        self.best = None;
    }

    /// The part of [`Near::settled`] that the code-block rule's lines
    /// give (`usize::MAX` when no line inside a fence was read): the only
    /// state [`Near::restart`] keeps.
    pub(crate) fn code_bound(&self) -> usize {
        let back = self.code_runs.iter().enumerate().map(|(p, &r)| r + p);
        let back = back.max().unwrap_or(0).max(LINE_W);
        if self.ncode == 0 {
            return usize::MAX;
        }
        let first = self.ncode.saturating_sub(back.min(LINE_RING - 1));
        self.code[first % LINE_RING].1
    }

    /// Feeds valid text whose first byte is at `base`; stops after the
    /// first character that gives a verdict and returns the offset in
    /// `s` just after it.
    pub(crate) fn feed(&mut self, s: &str, base: usize) -> Option<usize> {
        if self.best.is_some() {
            return Some(0);
        }
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if self.pending_bs.is_none() && b < 0x80 {
                if matches!(b, b' ' | b'\t' | 0x0b | 0x0c | b'\r') {
                    // `step` for white space other than a newline.
                    self.space = true;
                    self.chain_reset();
                    self.space_char(base + i);
                    i += 1;
                    if self.best.is_some() {
                        return Some(i);
                    }
                    continue;
                }
                let m = self.plain_run(bytes, i);
                if m > 0 {
                    self.plain_bytes(bytes, base, i, m);
                    i += m;
                    continue;
                }
            }
            self.materialize(bytes, base);
            let c = s[i..].chars().next().unwrap_or('\u{FFFD}');
            let len = c.len_utf8();
            self.step(c, base + i, len, Src { bytes, base });
            if self.best.is_some() {
                return Some(i + len);
            }
            i += len;
        }
        self.materialize(bytes, base);
        self.lines.advance(bytes, base, base + bytes.len());
        None
    }

    /// How many bytes from `i` the word-at-a-time path may take: plain
    /// token bytes (ASCII, not white space, not a digit, not a
    /// backslash) inside a line and a segment already open, in a token
    /// that is not a list marker in the making, while the run of
    /// non-white-space stays shorter than [`CHAIN_START`] characters.
    #[inline]
    fn plain_run(&self, bytes: &[u8], i: usize) -> usize {
        if !self.line_active || !self.seg_active {
            return 0;
        }
        if self.build.active && self.build.marker != 2 {
            return 0;
        }
        let max = (CHAIN_START - 1).saturating_sub(self.chain_len);
        let mut m = 0;
        while m < max {
            let x = load8(bytes, i + m);
            let special = swar::stop(x) | swar::digit(x) | swar::zero(x ^ swar::rep(b'\\'));
            if special != 0 {
                m += (special.trailing_zeros() / 8) as usize;
                break;
            }
            m += 8;
        }
        m.min(max)
    }

    /// [`Near::step`] for `m` plain bytes at `i` (see [`Near::plain_run`]):
    /// the token's keys take them eight at a time; its letter count,
    /// marker shape and last character, the line's preview and the run
    /// of non-white-space change as they would one character at a time.
    fn plain_bytes(&mut self, bytes: &[u8], base: usize, i: usize, m: usize) {
        let pos = base + i;
        let space = std::mem::replace(&mut self.space, false);
        let b = &mut self.build;
        if !b.active {
            *b = Build {
                active: true,
                start: pos,
                ..Build::default()
            };
        }
        let mut at = 0;
        while at < m {
            let k = (m - at).min(8);
            let w = load8(bytes, i + at) & (u64::MAX >> (64 - 8 * k));
            let low = w | swar::upper(w) >> 2;
            b.raw.push_word(low, k as u32);
            if b.digits {
                b.masked.push_word(low, k as u32);
            }
            b.letters += swar::count(swar::lower_alpha(low));
            at += k;
        }
        b.non_hex |= bytes[i..i + m]
            .iter()
            .any(|&c| matches!(c | 0x20, b'g'..=b'w' | b'y' | b'z'));
        b.in_digits = false;
        b.marker = 2;
        b.last_stop = matches!(bytes[i + m - 1], b'.' | b'!' | b'?');
        let preview = &mut self.line.preview;
        if preview.len() + 1 < PREVIEW {
            if space && !preview.is_empty() {
                preview.push(' ');
            }
            preview.push(char::from(bytes[i]));
            for &c in &bytes[i + 1..i + m] {
                if preview.len() + 1 >= PREVIEW {
                    break;
                }
                preview.push(char::from(c));
            }
        }
        if !self.lazy {
            self.lazy = true;
            self.lazy_from = pos;
            self.lazy_k = self.chain_len;
        }
        self.chain_len += m;
    }

    /// Writes the characters of the run of non-white-space that
    /// [`Near::plain_bytes`] counted but did not store (all ASCII, from
    /// `lazy_from` on) into the ring; `bytes` holds them, from `base`.
    fn materialize(&mut self, bytes: &[u8], base: usize) {
        if !self.lazy {
            return;
        }
        self.lazy = false;
        for k in self.lazy_k..self.chain_len {
            let p = self.lazy_from + (k - self.lazy_k);
            self.chain_chars[k % CHAIN_RING] = (u32::from(bytes[p - base]), p);
        }
    }

    /// A byte offset no cut found from now on can fall before: the start
    /// of the oldest unit any rule may still extend or begin.
    pub(crate) fn settled(&self, pos: usize) -> usize {
        if let Some(b) = &self.best {
            return b.keep;
        }
        let mut bound = pos;
        if self.seg_active {
            bound = bound.min(self.seg.start);
        }
        if self.line_active {
            bound = bound.min(self.line.start);
        }
        if self.build.active {
            bound = bound.min(self.build.start);
        }
        if self.chain_len > 0 {
            let first = self.chain_len.saturating_sub(CHAIN_RING - 1);
            bound = bound.min(self.chain_chars[first % CHAIN_RING].1);
        }
        // Items, segments, tokens and lines a run may reach back to.
        for k in 0..self.nitems.min(ITEM_RING) {
            bound = bound.min(self.items[k].2);
        }
        for r in &self.item_runs {
            if r.len > 0 {
                bound = bound.min(r.start);
            }
        }
        if self.copy.len > 0 {
            bound = bound.min(self.copy.keep);
        }
        // A few-codes window firing later starts at one of the last
        // `token_window - 1` codes in a row, or later.
        let w = self.cfg.token_window.min(TOKEN_WINDOW);
        if self.code_run > 0 && w >= 2 {
            let back = self.code_run.min(w - 1);
            let first = self.ntok - back;
            bound = bound.min(self.toks[first % TOK_RING].start);
        }
        for k in 0..self.nlines.min(ITEM_RING) {
            bound = bound.min(self.line_ring[k].2);
        }
        for k in 0..self.nprev.min(2) {
            bound = bound.min(self.prev[k].start);
        }
        for r in &self.sent_runs {
            if r.len > 0 {
                bound = bound.min(r.start);
            }
        }
        let back = self.mask_runs.iter().enumerate().map(|(i, &r)| r + i + 1);
        let back = back.max().unwrap_or(0).max(MASK_W);
        if self.ntok > 0 {
            let first = self.ntok.saturating_sub(back.min(TOK_RING - 1));
            bound = bound.min(self.toks[first % TOK_RING].start);
        }
        let back = self.code_runs.iter().enumerate().map(|(p, &r)| r + p);
        let back = back.max().unwrap_or(0).max(LINE_W);
        if self.ncode > 0 {
            let first = self.ncode.saturating_sub(back.min(LINE_RING - 1));
            bound = bound.min(self.code[first % LINE_RING].1);
        }
        bound
    }

    /// Feeds character `c` of `len` bytes at byte offset `pos` (an invalid
    /// sequence comes as U+FFFD with its own length).
    pub(crate) fn push(&mut self, c: char, pos: usize, len: usize) {
        if self.best.is_some() {
            return;
        }
        let ascii = [c as u8];
        let other = [0x80u8; 4];
        let bytes: &[u8] = if c.is_ascii() {
            &ascii
        } else {
            &other[..len.min(4)]
        };
        let src = Src { bytes, base: pos };
        self.step(c, pos, len, src);
        self.lines.advance(bytes, pos, pos + len);
    }

    /// One character; `src` holds the text around it for the line
    /// tracker, which is caught up only where a line starts.
    fn step(&mut self, c: char, pos: usize, len: usize, src: Src<'_>) {
        if c.is_whitespace() {
            self.space = true;
            self.chain_reset();
        } else {
            self.chain_push(c, pos);
            if self.best.is_some() {
                return;
            }
        }
        if let Some(bs) = self.pending_bs.take() {
            if c == 'n' {
                // The JSON escape `\n`: a line break.
                self.end_token(bs);
                self.end_line(bs);
                return;
            }
            self.token_char('\\', bs, 1, src);
        }
        if c == '\\' {
            self.pending_bs = Some(pos);
            return;
        }
        if c == '\n' {
            self.end_token(pos);
            self.end_line(pos);
            return;
        }
        if c.is_whitespace() {
            self.space_char(pos);
            return;
        }
        if is_cjk(c) {
            self.end_token(pos);
            self.token_char(c, pos, len, src);
            self.build.letters = self.build.letters.max(2);
            self.end_token(pos + len);
            if matches!(c, '。' | '！' | '？') && !self.line.fence {
                self.end_segment(pos + len);
            }
            return;
        }
        self.token_char(c, pos, len, src);
    }

    /// White space other than a line break: the token ends, and the
    /// segment with it after `. ! ?`.
    #[inline]
    fn space_char(&mut self, pos: usize) {
        let b = &self.build;
        let marker_only = b.marker == 1 && self.line.n == 0;
        let stop = b.active && b.last_stop && !marker_only && !self.line.fence;
        self.end_token(pos);
        if stop {
            self.end_segment(pos);
        }
    }

    fn token_char(&mut self, c: char, pos: usize, len: usize, src: Src<'_>) {
        if self.best.is_some() {
            return;
        }
        if !self.line_active {
            self.line_active = true;
            self.lines.advance(src.bytes, src.base, pos + len);
            let mut preview = std::mem::take(&mut self.line.preview);
            preview.clear();
            self.line = Line {
                start: pos,
                fence: self.lines.exempt(pos, true, false),
                table: self.lines.exempt(pos, false, true),
                preview,
                ..Line::default()
            };
        }
        if !self.seg_active {
            self.seg_active = true;
            self.seg.start = pos;
            self.seg.n = 0;
            self.seg.keys.clear();
        }
        let space = std::mem::replace(&mut self.space, false);
        if self.line.preview.len() + len < PREVIEW {
            if space && !self.line.preview.is_empty() {
                self.line.preview.push(' ');
            }
            self.line.preview.push(c);
        }
        let b = &mut self.build;
        if !b.active {
            *b = Build {
                active: true,
                start: pos,
                ..Build::default()
            };
        }
        let l = if c.is_ascii() {
            u32::from(c.to_ascii_lowercase() as u8)
        } else {
            c.to_lowercase().next().unwrap_or(c) as u32
        };
        let digit = c.is_ascii_digit();
        if digit && !b.digits {
            // The masked key equals the raw one up to the first digit.
            b.digits = true;
            b.masked = b.raw;
        }
        b.raw.push(l);
        if digit {
            if !b.in_digits {
                b.masked.push(u32::from(b'#'));
            }
        } else if b.digits {
            b.masked.push(l);
        }
        b.in_digits = digit;
        if c.is_alphabetic() {
            b.letters += 1;
            b.non_hex |= !matches!(l, 0x61..=0x66 | 0x78);
        }
        b.marker = match (b.marker, digit, c) {
            (0, true, _) => {
                b.ndigits += 1;
                if b.ndigits > 4 {
                    2
                } else {
                    0
                }
            }
            (0, false, '.' | ')') if b.ndigits > 0 => 1,
            _ => 2,
        };
        b.last_stop = matches!(c, '.' | '!' | '?');
    }

    fn end_token(&mut self, end: usize) {
        if !self.build.active || self.best.is_some() {
            return;
        }
        self.build.active = false;
        let b = self.build;
        let raw = b.raw.value();
        let tok = Tok {
            raw,
            masked: if b.digits { b.masked.value() } else { raw },
            start: b.start,
            end,
            word: b.letters >= 2,
            digits: b.digits,
            letter: b.letters >= 1,
            non_hex: b.non_hex,
        };
        let line = &mut self.line;
        // The body counts only on a list item, the whole line only in a
        // fence (nothing reads them elsewhere).
        if line.n == 0 && b.marker == 1 {
            line.marker = true;
            line.marker_key = tok.raw;
        } else {
            line.body = mix(line.body, tok.raw);
            line.body_len += 1;
        }
        if line.fence {
            line.whole = mix(line.whole, tok.raw);
        }
        line.n += 1;
        line.end = end;
        line.word |= tok.word;
        let seg = &mut self.seg;
        if seg.keys.len() < SEG_TOKENS {
            seg.keys.push(tok.raw);
        }
        seg.n += 1;
        seg.end = end;
        if !self.line.fence && !self.line.table {
            self.counter_token(tok);
        }
    }

    /// The counter rule: masked tokens repeating with a short period.
    fn counter_token(&mut self, tok: Tok) {
        let j = self.ntok;
        self.toks[j % TOK_RING] = tok;
        self.ntok = j + 1;
        if tok.word {
            self.last_word_tok = Some(j);
        }
        if tok.digits {
            self.last_digit_tok = Some(j);
        }
        if tok.digits && tok.letter {
            self.code_run += 1;
            let w = self.cfg.token_window.min(TOKEN_WINDOW);
            if w >= 2 && self.code_run >= w {
                self.few_tokens(j);
                if self.best.is_some() {
                    return;
                }
            }
        } else {
            self.code_run = 0;
        }
        // Bit p - 1: token j - p has the same masked key. The low bytes
        // of the last eight keys give the candidates in one compare; the
        // full keys confirm them. Runs not extended end.
        let valid = if j >= MASK_W { 0xff } else { (1u32 << j) - 1 };
        let mut hits = swar::eq_bits(self.mask_tags, tok.masked as u8) & valid;
        self.mask_tags = self.mask_tags << 8 | (tok.masked & 0xff);
        let mut c = hits;
        while c != 0 {
            let i = c.trailing_zeros() as usize;
            c &= c - 1;
            if self.toks[(j - i - 1) % TOK_RING].masked != tok.masked {
                hits &= !(1 << i);
            }
        }
        let mut ended = self.mask_active & !hits;
        while ended != 0 {
            self.mask_runs[ended.trailing_zeros() as usize] = 0;
            ended &= ended - 1;
        }
        self.mask_active = hits;
        let cfg = &self.cfg;
        while hits != 0 {
            let i = hits.trailing_zeros() as usize;
            hits &= hits - 1;
            let p = i + 1;
            self.mask_runs[i] += 1;
            let need = cfg.masked_min_run.max(cfg.masked_run_per_period * p);
            let r = self.mask_runs[i];
            if r < need || r + p >= TOK_RING {
                continue;
            }
            let has_word = self.last_word_tok.is_some_and(|w| w + p > j);
            let has_digit = self.last_digit_tok.is_some_and(|w| w + p > j);
            if !has_word || !has_digit {
                continue;
            }
            // One counter: at most one token of the unit differs from its
            // copy before once digits count (`Week 1: 5 km` has two).
            let differs = (j + 1 - p..=j)
                .filter(|&t| self.toks[t % TOK_RING].raw != self.toks[(t - p) % TOK_RING].raw)
                .count();
            // And something besides the counter repeats: a run of tokens that
            // each change (`palabra0 palabra1 …`, sequential ids) is content.
            if differs > 1 || differs >= p {
                continue;
            }
            // First matching token a; the loop starts at a - p.
            let a = j + 1 - r;
            let start = self.toks[(a - p) % TOK_RING].start;
            let keep = self.toks[(a - 1) % TOK_RING].end;
            let preview = self.token_preview(p);
            self.fire(Detector::NearDuplicate, p, start, keep, preview);
            return;
        }
    }

    /// Codes going round a few values (`802.11a, 802.11b, 802.11g,
    /// 802.11a, 802.11a+, …`): the last `token_window` tokens, in a row,
    /// each holding a digit and a letter, hold at most
    /// `token_window_values` different tokens (as read, case-folded), each
    /// at least twice, and one of them a letter that is not a hex digit
    /// (nor the `x` of `0x`): hex dumps are data. The loop starts at the window's first token; the
    /// cut keeps the window up to the first copy of its last new value.
    /// Token `j` was just read.
    fn few_tokens(&mut self, j: usize) {
        let w = self.cfg.token_window.min(TOKEN_WINDOW);
        if w < 2 || j + 1 < w {
            return;
        }
        let mut seen = [(0u64, 0usize); TOKEN_WINDOW];
        let mut nseen = 0;
        let mut keep = 0;
        let mut non_hex = false;
        for t in j + 1 - w..=j {
            let tok = self.toks[t % TOK_RING];
            non_hex |= tok.non_hex;
            match seen[..nseen].iter().position(|&(k, _)| k == tok.raw) {
                Some(i) => seen[i].1 += 1,
                None => {
                    if nseen == self.cfg.token_window_values {
                        return;
                    }
                    seen[nseen] = (tok.raw, 1);
                    nseen += 1;
                    keep = tok.end;
                }
            }
        }
        // Hex dumps (`0x00 0x1f 0x00 …`, `1f 00 a3`) are data.
        if !non_hex || seen[..nseen].iter().any(|&(_, c)| c < 2) {
            return;
        }
        // A window with a fixed period (`Am7 D7 Gmaj7 Cmaj7` four times)
        // is the word guard's to judge, with its own thresholds.
        let first = j + 1 - w;
        let periodic = (1..=nseen).any(|p| {
            (first + p..=j)
                .all(|t| self.toks[t % TOK_RING].raw == self.toks[(t - p) % TOK_RING].raw)
        });
        if periodic {
            return;
        }
        let start = self.toks[(j + 1 - w) % TOK_RING].start;
        let preview = self.line.preview.clone();
        self.fire(Detector::NearDuplicate, nseen, start, keep, preview);
    }

    fn token_preview(&self, _p: usize) -> String {
        self.line.preview.clone()
    }

    /// A sentence ends (or its line does).
    fn end_segment(&mut self, _end: usize) {
        if !self.seg_active || self.best.is_some() {
            return;
        }
        self.seg_active = false;
        if self.line.fence || self.line.table {
            return;
        }
        let seg = std::mem::take(&mut self.seg);
        self.sentence(&seg);
        let mut seg = seg;
        seg.keys.clear();
        self.seg = seg;
    }

    /// A line ends: its sentence too.
    fn end_line(&mut self, end: usize) {
        self.end_segment(end);
        if !self.line_active || self.best.is_some() {
            return;
        }
        self.line_active = false;
        let line = std::mem::take(&mut self.line);
        if line.fence {
            self.nlines = 0;
            self.code_line(&line);
        } else if line.table {
            self.nlines = 0;
        } else {
            self.list_item(&line);
            self.few_lines(&line);
        }
        self.line = line;
    }

    /// Counted list items.
    fn list_item(&mut self, seg: &Line) {
        if !seg.marker {
            self.end_list();
            return;
        }
        let k = self.nitems;
        if self.list_copy(seg, k) {
            return;
        }
        let cur = (seg.body, seg.body_len, seg.start, seg.end);
        for p in 1..=ITEM_W {
            let i = p - 1;
            let same = k >= p && {
                let o = self.items[(k - p) % ITEM_RING];
                o.0 == cur.0 && o.1 == cur.1
            };
            if !same {
                self.item_runs[i] = Run::default();
                continue;
            }
            if self.item_runs[i].len == 0 {
                // The loop starts at item k - p; one copy is items
                // k-p..k-1.
                self.item_runs[i].start = self.items[(k - p) % ITEM_RING].2;
                self.item_runs[i].keep = self.items[(k - 1) % ITEM_RING].3;
            }
            self.item_runs[i].len += 1;
            let items = self.item_runs[i].len + p;
            let need = if seg.body_len == 0 {
                self.cfg.empty_items
            } else {
                self.cfg.list_items.max(3 * p + 1)
            };
            if (p == 1 || seg.body_len > 0) && items >= need {
                let r = self.item_runs[i];
                self.fire(
                    Detector::NearDuplicate,
                    p,
                    r.start,
                    r.keep,
                    seg.preview.clone(),
                );
                return;
            }
        }
        self.items[k % ITEM_RING] = cur;
        self.nitems = k + 1;
    }

    /// The list going on ends (a line without a list marker).
    fn end_list(&mut self) {
        if self.list_used {
            self.list_gen = self.list_gen.wrapping_add(1);
            if self.list_gen == 0 {
                self.list_table.fill((0, 0, 0));
                self.list_gen = 1;
            }
            self.list_used = false;
            self.list_count = 0;
        }
        self.nitems = 0;
        self.item_runs = [Run::default(); ITEM_W];
        self.copy = Run::default();
    }

    /// A restarted list: item `k` of the list going on, whole (marker
    /// and body), equal to an earlier item of the same list, and the
    /// items since then copied in order: the last `d` items come again,
    /// whole, right after themselves (`… 19. 19 / 20. 20 / 2. 2 / 3. 3
    /// … 20. 20`: a count that starts again and copies itself; or the
    /// whole list again under its old numbers). It fires once the copy
    /// holds all `d` items and at least `list_copy_items`. Numbered items
    /// come back whole only when the numbering went back, so a list that
    /// keeps counting never matches; the same sub-steps under two parent
    /// items (`1. dev / 1. build … / 2. staging / 1. build …`) are not a
    /// copy of the items right before them. The loop starts at the
    /// copy's first item; the cut keeps the text before it. True when it
    /// fires.
    fn list_copy(&mut self, seg: &Line, k: usize) -> bool {
        let need = self.cfg.list_copy_items;
        if need == 0 {
            return false;
        }
        let whole = mix(mix(seg.body, seg.marker_key), seg.body_len as u64);
        let d = self.copy_d;
        let goes_on = self.copy.len > 0
            && k >= d
            && d <= LIST_BACK
            && self.list_keys[(k - d) % LIST_BACK] == whole;
        let gen = self.list_gen;
        if goes_on {
            self.copy.len += 1;
        } else {
            self.copy = Run::default();
            // The latest earlier item with this whole key, if any.
            let mut slot = (whole as usize) % LIST_TABLE;
            for _ in 0..LIST_TABLE {
                let (key, at, g) = self.list_table[slot];
                if at == 0 || g != gen {
                    break;
                }
                if key == whole {
                    // Entries are items of this list before `k`.
                    let d = k.saturating_sub(at as usize - 1);
                    if (1..=LIST_BACK).contains(&d) {
                        self.copy_d = d;
                        let prev = self.items[(k - 1) % ITEM_RING];
                        self.copy = Run {
                            len: 1,
                            start: seg.start,
                            keep: prev.3,
                        };
                    }
                    break;
                }
                slot = (slot + 1) % LIST_TABLE;
            }
        }
        // Record item k: the table keeps each key's latest index, for the
        // first `LIST_BACK` different items of the list.
        self.list_keys[k % LIST_BACK] = whole;
        self.list_used = true;
        let mut slot = (whole as usize) % LIST_TABLE;
        for _ in 0..LIST_TABLE {
            let (key, at, g) = self.list_table[slot];
            if at == 0 || g != gen {
                if self.list_count < LIST_BACK {
                    self.list_table[slot] = (whole, k as u32 + 1, gen);
                    self.list_count += 1;
                }
                break;
            }
            if key == whole {
                self.list_table[slot].1 = k as u32 + 1;
                break;
            }
            slot = (slot + 1) % LIST_TABLE;
        }
        if self.copy.len >= need.max(self.copy_d) {
            let r = self.copy;
            self.fire(
                Detector::NearDuplicate,
                self.copy_d,
                r.start,
                r.keep,
                seg.preview.clone(),
            );
            return true;
        }
        false
    }

    /// Lines going round a few values: the last `line_window` lines in a
    /// row outside fences and tables (the one just read included; blank
    /// lines do not count) hold at most `line_window_values` different
    /// lines (tokens compared as read, a list marker set aside), each of
    /// them at least twice, one of them of `line_window_min_tokens`
    /// tokens or more with a word (two letters; rows of ASCII art in
    /// blank braille have none). The loop starts at the
    /// window's first line; the cut keeps the window up to the first line
    /// of its last new value (one of each).
    fn few_lines(&mut self, seg: &Line) {
        let k = self.nlines;
        self.line_ring[k % ITEM_RING] = (seg.body, seg.body_len, seg.start, seg.end, seg.word);
        self.nlines = k + 1;
        let w = self.cfg.line_window.min(ITEM_RING);
        let n = self.nlines;
        if w == 0 || n < w {
            return;
        }
        // (key, tokens, copies in the window)
        let mut seen = [(0u64, 0usize, 0usize); ITEM_RING];
        let mut nseen = 0;
        let mut keep = 0;
        let mut long = false;
        for t in n - w..n {
            let (body, len, _, end, word) = self.line_ring[t % ITEM_RING];
            long |= word && len >= self.cfg.line_window_min_tokens;
            match seen[..nseen]
                .iter()
                .position(|&(b, l, _)| (b, l) == (body, len))
            {
                Some(i) => seen[i].2 += 1,
                None => {
                    if nseen == self.cfg.line_window_values {
                        return;
                    }
                    seen[nseen] = (body, len, 1);
                    nseen += 1;
                    keep = end;
                }
            }
        }
        // Every value comes back: a line seen once (an introduction
        // before rows of art) is not part of a loop.
        if seen[..nseen].iter().any(|&(_, _, c)| c < 2) {
            return;
        }
        if !long {
            return;
        }
        let start = self.line_ring[(n - w) % ITEM_RING].2;
        self.fire(
            Detector::NearDuplicate,
            nseen,
            start,
            keep,
            seg.preview.clone(),
        );
    }

    /// Near-duplicate segments.
    fn sentence(&mut self, seg: &Seg) {
        let cfg = &self.cfg;
        let long = seg.n >= cfg.sentence_min_tokens;
        for p in 1..=2 {
            let i = p - 1;
            let near = long && self.nprev >= p && {
                let o = &self.prev[(self.nprev - p) % 2];
                o.n >= cfg.sentence_min_tokens
                    && o.n.abs_diff(seg.n) <= cfg.sentence_max_edits
                    && within_edits(&o.keys, &seg.keys, cfg.sentence_max_edits.min(seg.n / 4))
            };
            if !near {
                self.sent_runs[i] = Run::default();
                continue;
            }
            if self.sent_runs[i].len == 0 {
                self.sent_runs[i].start = self.prev[(self.nprev - p) % 2].start;
                self.sent_runs[i].keep = self.prev[(self.nprev - 1) % 2].end;
            }
            self.sent_runs[i].len += 1;
            let need = self.cfg.sentence_copies.max(3 * p);
            if self.sent_runs[i].len + p >= need {
                let r = self.sent_runs[i];
                let preview = self.line.preview.clone();
                self.fire(Detector::NearDuplicate, p, r.start, r.keep, preview);
                return;
            }
        }
        let slot = self.nprev % 2;
        let old = std::mem::take(&mut self.prev[slot]);
        let mut keys = old.keys;
        keys.clear();
        keys.extend_from_slice(&seg.keys);
        self.prev[slot] = Seg {
            start: seg.start,
            end: seg.end,
            keys,
            n: seg.n,
        };
        self.nprev += 1;
    }

    /// Lines inside a code fence.
    fn code_line(&mut self, seg: &Line) {
        let j = self.ncode;
        let key = seg.whole;
        self.code[j % LINE_RING] = (key, seg.start, seg.end, seg.word);
        self.ncode = j + 1;
        for p in 2..=LINE_W {
            if j >= p && self.code[(j - p) % LINE_RING].0 == key {
                self.code_runs[p] += 1;
            } else {
                self.code_runs[p] = 0;
                continue;
            }
            let r = self.code_runs[p];
            if r < (self.cfg.code_block_copies.max(2) - 1) * p {
                continue;
            }
            // The block: lines j-p+1..=j; two different lines and a word.
            let first = self.code[(j + 1 - p) % LINE_RING].0;
            let mut varied = false;
            let mut word = false;
            for t in j + 1 - p..=j {
                let l = self.code[t % LINE_RING];
                varied |= l.0 != first;
                word |= l.3;
            }
            if !varied || !word {
                continue;
            }
            let a = j + 1 - r;
            let start = self.code[(a - p) % LINE_RING].1;
            let keep = self.code[(a - 1) % LINE_RING].2;
            self.fire(Detector::CodeBlock, p, start, keep, seg.preview.clone());
            return;
        }
    }

    fn chain_reset(&mut self) {
        self.chain_base += self.chain_len as u64;
        self.lazy = false;
        self.chain_len = 0;
        self.chain_roll = 0;
        self.chain_d = 0;
        self.chain_run = 0;
    }

    /// Whether a loop starting at character `s` of the run starts inside
    /// a data token: the substring guard's test, replayed on the 17
    /// characters before it (all it looks at).
    fn chain_data_at(&self, s: usize) -> bool {
        let from = s.saturating_sub(17);
        let mut d = if from == 0 {
            crate::repetition::substring::DataScan::after_space()
        } else {
            crate::repetition::substring::DataScan::NONE
        };
        for t in from..s {
            d.push(char::from_u32(self.chain_chars[t % CHAIN_RING].0).unwrap_or('\u{FFFD}'));
        }
        d.data_here()
    }

    /// Long units inside one run of non-white-space.
    fn chain_push(&mut self, c: char, pos: usize) {
        let k = self.chain_len;
        let cu = c as u32;
        self.chain_chars[k % CHAIN_RING] = (cu, pos);
        self.chain_len = k + 1;
        if k + 1 < CHAIN_START {
            return;
        }
        if k + 1 == CHAIN_START {
            let mut roll = 0u64;
            for t in k + 1 - CHAIN_SHINGLE..=k {
                roll = roll
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(u64::from(self.chain_chars[t % CHAIN_RING].0));
            }
            self.chain_roll = roll;
        } else {
            let old = u64::from(self.chain_chars[(k - CHAIN_SHINGLE) % CHAIN_RING].0);
            self.chain_roll = self
                .chain_roll
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .wrapping_add(u64::from(cu))
                .wrapping_sub(old.wrapping_mul(self.chain_pow));
        }
        if self.chain_d > 0 {
            let d = self.chain_d;
            if self.chain_chars[(k - d) % CHAIN_RING].0 == cu {
                self.chain_run += 1;
                if self.chain_run >= (self.cfg.chain_copies.max(2) - 1) * d {
                    let a = k + 1 - self.chain_run;
                    let s = a - d;
                    let unit: Vec<u32> = (k + 1 - d..=k)
                        .map(|t| self.chain_chars[t % CHAIN_RING].0)
                        .collect();
                    if !(crate::repetition::substring::data_unit(&unit) && self.chain_data_at(s)) {
                        let start = self.chain_chars[s % CHAIN_RING].1;
                        let keep = self.chain_chars[(a - 1) % CHAIN_RING].1
                            + char::from_u32(self.chain_chars[(a - 1) % CHAIN_RING].0)
                                .map_or(1, char::len_utf8);
                        let unit: String = (k + 1 - d..=k)
                            .filter_map(|t| char::from_u32(self.chain_chars[t % CHAIN_RING].0))
                            .collect();
                        self.fire(Detector::LongUnit, d, start, keep, unit);
                    }
                    // Data: stop following this period.
                    self.chain_d = 0;
                    self.chain_run = 0;
                }
                return;
            }
            self.chain_d = 0;
            self.chain_run = 0;
        }
        let h = crate::repetition::text::fold::mix(self.chain_roll);
        let tag = (h >> 32) as u32;
        let slot = (tag as usize) % CHAIN_TABLE;
        let here = self.chain_base + k as u64;
        let (old_tag, at) = self.chain_table[slot];
        self.chain_table[slot] = (tag, here);
        // An entry of an earlier run (below `chain_base`) is empty.
        if old_tag != tag || at < self.chain_base || at >= here {
            return;
        }
        let d = (here - at) as usize;
        if d < self.cfg.chain_min_unit
            || d > self
                .cfg
                .chain_max_unit
                .min(crate::repetition::bounds::MAX_CHAIN_UNIT)
            || k < d + CHAIN_SHINGLE - 1
        {
            return;
        }
        // Verify the shingle and count the matches behind it.
        let mut run = 0;
        while run < k - d + 1 && run < 3 * d && {
            let t = k - run;
            self.chain_chars[t % CHAIN_RING].0 == self.chain_chars[(t - d) % CHAIN_RING].0
        } {
            run += 1;
        }
        if run >= CHAIN_SHINGLE {
            self.chain_d = d;
            self.chain_run = run;
        }
    }

    fn fire(&mut self, detector: Detector, period: usize, start: usize, keep: usize, unit: String) {
        if self.cfg.enabled && self.best.is_none() {
            self.best = Some(Candidate {
                detector,
                period,
                start,
                keep,
                keep_tokens: 0,
                unit,
            });
        }
    }
}

/// Whether token sequences `a` and `b` (at most `SEG_TOKENS` each) are
/// within `k` edits (insert, delete, substitute): a dynamic program on
/// the band `|i - j| <= k`, O(len · (2k + 1)), stopping once every cell
/// of a row exceeds `k`.
fn within_edits(a: &[u64], b: &[u64], k: usize) -> bool {
    let (n, m) = (a.len().min(SEG_TOKENS), b.len().min(SEG_TOKENS));
    if n.abs_diff(m) > k {
        return false;
    }
    const INF: usize = usize::MAX / 4;
    let mut prev = [INF; SEG_TOKENS + 1];
    let mut cur = [INF; SEG_TOKENS + 1];
    for (j, v) in prev.iter_mut().enumerate().take(m.min(k) + 1) {
        *v = j;
    }
    for i in 1..=n {
        let lo = i.saturating_sub(k);
        let hi = (i + k).min(m);
        let mut best = INF;
        if lo == 0 {
            cur[0] = i;
            best = i;
        } else {
            cur[lo - 1] = INF;
        }
        for j in lo.max(1)..=hi {
            let v = (prev[j - 1] + usize::from(a[i - 1] != b[j - 1]))
                .min(prev[j] + 1)
                .min(cur[j - 1] + 1);
            cur[j] = v;
            best = best.min(v);
        }
        if best > k {
            return false;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[m] <= k
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A run of sequential ids changes every token: content, not a loop.
    /// A counter with a repeating word beside it is a loop.
    #[test]
    fn sequential_ids_pass_and_counted_units_fire() {
        let config = ClampConfig::default();
        let ids: String = (0..200).map(|i| format!("palabra{i} ")).collect();
        assert!(!crate::repetition::clamp_near(&ids, &config).is_clamped());
        let counted: String = (0..200).map(|i| format!("{i}:00 PM: ")).collect();
        assert!(crate::repetition::clamp_near(&counted, &config).is_clamped());
    }

    /// Pushing ASCII bytes one at a time or as words of any split gives
    /// the same key, before and after another character.
    #[test]
    fn key_words_equal_bytes() {
        let text = b"abcdefghijklmnopqrstuvwxyz0123456789-_.,;:!?()[]{}";
        for len in 0..text.len() {
            for split in 0..=len {
                let mut one = Key::default();
                let mut words = Key::default();
                for key in [&mut one, &mut words] {
                    key.push(u32::from(b'q'));
                    key.push(0xe9);
                }
                for &c in &text[..len] {
                    one.push(u32::from(c));
                }
                for part in [&text[..split], &text[split..len]] {
                    for chunk in part.chunks(8) {
                        let k = chunk.len();
                        let w = load8(chunk, 0) & (u64::MAX >> (64 - 8 * k));
                        words.push_word(w, k as u32);
                    }
                }
                assert_eq!(one.value(), words.value(), "{len} {split}");
                one.push(0x3b1);
                words.push(0x3b1);
                assert_eq!(one.value(), words.value(), "{len} {split}");
            }
        }
    }

    /// Texts for the fast path: prose in mixed case, digits, list items,
    /// near-duplicate sentences, counters, long runs without white
    /// space, fences, table rows, JSON `\n`, CJK and odd Unicode, with
    /// loops and near-loops among healthy stretches.
    fn near_text() -> impl Strategy<Value = Vec<(String, usize)>> {
        let word = prop::sample::select(vec![
            "the",
            "The",
            "of",
            "cell",
            "CELLS",
            "protein.",
            "was",
            "tumour,",
            "Growth!",
            "why?",
            "a",
            "x",
            "(n",
            "=",
            "p<0.05)",
            "12",
            "3.5",
            "1.",
            "2)",
            "76.",
            "a1b2",
            "#",
            "##",
            "-",
            "--",
            "|",
            "\\",
            "\\n",
            "\\x",
            "é",
            "İstanbul",
            "STRASSE",
            "straße",
            "K",
            "高",
            "级",
            "。",
            "！",
            "ａｂ",
            "\u{301}",
            "\u{FFFD}",
            "\0",
            "immunohistochemistry",
            "https://host/",
            "resak-kasra-tomo-",
            "0x00ff",
            "AAAAAAAAAAAAAAAAAAAA",
            "😂",
        ]);
        let space = prop::sample::select(vec![
            " ", " ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u{b}", "\u{c}", "\u{a0}",
            "\u{2028}", "\u{3000}",
        ]);
        let prose = prop::collection::vec((word.clone(), space), 1..120).prop_map(|v| {
            v.into_iter()
                .map(|(w, s)| format!("{w}{s}"))
                .collect::<String>()
        });
        let unit = prop::collection::vec(word, 1..12).prop_map(|v| v.join(" "));
        let looped = (unit, 2..12usize, 0..3usize).prop_map(|(u, n, how)| {
            (0..n)
                .map(|k| match how {
                    0 => format!("{u} "),
                    1 => format!("{k}. {u}\n"),
                    _ => format!("{u} {k}:00 word{} ", k % 3),
                })
                .collect::<String>()
        });
        let shape = prop::sample::select(vec![
            "\n```\n",
            "\n~~~\n",
            "\n| a | b |\n",
            "\n",
            "The refrigerator uses a small fan to keep it cool. ",
            "The refrigerator also uses a small fan to keep it cool. ",
            "assistant57 ",
            "/api/v1/users",
            "_advanced_settings",
            "\\n",
            "0123456789abcdef0123",
        ])
        .prop_map(str::to_string);
        // Long units without white space, after a word or glued on.
        let chain = ("[a-zA-Z/_-]{13,30}", 3..6usize, any::<bool>())
            .prop_map(|(u, n, glued)| format!("{}{}", if glued { "x" } else { " " }, u.repeat(n)));
        let piece = prop_oneof![4 => prose, 2 => looped, 2 => shape, 1 => chain];
        let invalid = prop_oneof![6 => Just(0usize), 1 => 1..4usize];
        prop::collection::vec((piece, invalid), 1..40)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            crate::repetition::test_cases::cases(256)
        ))]

        /// The word-at-a-time path of [`Near::feed`] in any chunking
        /// (with invalid bytes, pushed as U+FFFD, between the pieces)
        /// fires after the same character as the one-character-at-a-
        /// time reference, with the same cut, and reports the same
        /// settled offset after every chunk.
        #[test]
        fn fast_path_equals_the_reference(pieces in near_text(), size in 1..64usize) {
            let config = ClampConfig::default();
            let mut fast = Near::new(&config);
            let mut slow = Near::new(&config);
            let mut pos = 0;
            'pieces: for (text, bad) in &pieces {
                let mut rest = text.as_str();
                while !rest.is_empty() {
                    let mut cut = size.min(rest.len());
                    while !rest.is_char_boundary(cut) {
                        cut += 1;
                    }
                    let (chunk, tail) = rest.split_at(cut);
                    let fired = fast.feed(chunk, pos);
                    let mut at = None;
                    for (i, c) in chunk.char_indices() {
                        slow.push(c, pos + i, c.len_utf8());
                        if slow.best.is_some() {
                            at = Some(i + c.len_utf8());
                            break;
                        }
                    }
                    prop_assert_eq!(fired, at);
                    prop_assert_eq!(&fast.best, &slow.best);
                    if fired.is_some() {
                        break 'pieces;
                    }
                    pos += chunk.len();
                    prop_assert_eq!(fast.settled(pos), slow.settled(pos));
                    rest = tail;
                }
                if *bad > 0 {
                    fast.push('\u{FFFD}', pos, *bad);
                    slow.push('\u{FFFD}', pos, *bad);
                    pos += bad;
                    prop_assert_eq!(&fast.best, &slow.best);
                    if fast.best.is_some() {
                        break;
                    }
                    prop_assert_eq!(fast.settled(pos), slow.settled(pos));
                }
            }
        }
    }

    #[test]
    fn edit_distance_band() {
        let a = [1, 2, 3, 4, 5, 6, 7, 8];
        assert!(within_edits(&a, &a, 0));
        assert!(within_edits(&a, &[1, 2, 9, 3, 4, 5, 6, 7, 8], 1));
        assert!(!within_edits(&a, &[1, 2, 9, 3, 4, 5, 6, 7, 8], 0));
        assert!(within_edits(&a, &[1, 2, 4, 5, 6, 9, 8], 2));
        assert!(!within_edits(&a, &[8, 7, 6, 5, 4, 3, 2, 1], 2));
        assert!(within_edits(&[], &[1, 2], 2));
        assert!(!within_edits(&[], &[1, 2, 3], 2));
    }
}
