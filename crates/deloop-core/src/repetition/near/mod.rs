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
//!   `sentence_copies` segments in a row; rows of data (mostly numbers)
//!   match only equal copies, and a copy that fills two slots with new
//!   values is an enumeration, not a loop (`sentences.rs`);
//! * **counters**: tokens with every digit run masked (`28:00` =
//!   `29:00`, `assistant57` = `assistant58`) repeating with a period of
//!   1–8 tokens for `max(masked_min_run, masked_run_per_period·p)` tokens,
//!   the unit holding a word and a number, and exactly one token of the
//!   unit differing from its previous copy at most (one counter) while
//!   another token stays the same (a run of ids `item1 item2 …` passes),
//!   and every change the same step (the counter counts; random ids
//!   pass);
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

mod code_block;
mod counters;
mod fast;
mod key;
mod lists;
mod long_unit;
pub(crate) use long_unit::{flood_units, CHAIN_FLOOD_HEAD};
mod sentences;
pub(crate) mod sieve;
#[cfg(test)]
mod tests;

use crate::repetition::candidate::Candidate;
use crate::repetition::text::healthy::{is_cjk, Lines, Src};
use crate::repetition::text::list_marker::MarkerShape;
use crate::repetition::text::swar;
use crate::repetition::{ClampConfig, Detector};
use key::{load8, mix, Key};

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
    /// The values of its first and last digit runs (counters).
    num: (u64, u64),
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
    /// List-marker shape so far.
    marker: MarkerShape,
    /// A letter other than `a`–`f` and `x` (case-folded) was read.
    non_hex: bool,
    /// Last character was `. ! ?`.
    last_stop: bool,
    /// Digit runs read, and the values of the first and the last.
    num_runs: u32,
    num: (u64, u64),
    /// [`SLOT_CAP`] or [`SLOT_QUOTE`] once its first letter was read.
    shape: u8,
    letter_seen: bool,
}

/// A token of a segment holds a digit.
pub(super) const SLOT_DIGIT: u8 = 1;
/// Its first letter is a capital (a name, in most scripts).
pub(super) const SLOT_CAP: u8 = 2;
/// It starts with a quote (a string value in data).
pub(super) const SLOT_QUOTE: u8 = 4;
/// It is the list marker of its line (`7.`).
pub(super) const SLOT_MARKER: u8 = 8;

/// A sentence-like segment: its tokens' masked keys.
#[derive(Debug, Clone, Default)]
struct Seg {
    start: usize,
    end: usize,
    keys: Vec<u64>,
    /// Per kept token: `SLOT_*` bits, what kind of value it is.
    slots: Vec<u8>,
    n: usize,
    /// Tokens that are words (two letters or more), and tokens with a
    /// letter or a digit.
    words: usize,
    alnum: usize,
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
    /// `healthy.token_flood_bytes` (`usize::MAX`: off), for the long-unit
    /// rule's flood form.
    flood: usize,
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
            flood: config.healthy.token_flood(),
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
        self.seg.slots.clear();
        self.seg.n = 0;
        self.seg.words = 0;
        self.seg.alnum = 0;
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
        let marker_only = b.marker.is_marker() && self.line.n == 0;
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
            self.seg.words = 0;
            self.seg.alnum = 0;
            self.seg.keys.clear();
            self.seg.slots.clear();
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
                b.num_runs += 1;
                b.num.1 = 0;
            }
            let d = u64::from(c as u8 - b'0');
            b.num.1 = b.num.1.saturating_mul(10).saturating_add(d);
            if b.num_runs == 1 {
                b.num.0 = b.num.1;
            }
        } else if b.digits {
            b.masked.push(l);
        }
        b.in_digits = digit;
        if b.start == pos && matches!(c, '"' | '\'' | '“' | '«' | '„' | '‘') {
            b.shape = SLOT_QUOTE;
        }
        if c.is_alphabetic() {
            if !b.letter_seen && b.shape == 0 && c.is_uppercase() {
                b.shape = SLOT_CAP;
            }
            b.letter_seen = true;
            b.letters += 1;
            b.non_hex |= !matches!(l, 0x61..=0x66 | 0x78);
        }
        b.marker.push(c);
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
            num: b.num,
        };
        let mut slot = b.shape | if b.digits { SLOT_DIGIT } else { 0 };
        let line = &mut self.line;
        // The body counts only on a list item, the whole line only in a
        // fence (nothing reads them elsewhere).
        if line.n == 0 && b.marker.is_marker() {
            slot |= SLOT_MARKER;
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
            seg.slots.push(slot);
        }
        seg.n += 1;
        seg.words += usize::from(tok.word);
        seg.alnum += usize::from(tok.letter || tok.digits);
        seg.end = end;
        if !self.line.fence && !self.line.table {
            self.counter_token(tok);
        }
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
        seg.slots.clear();
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
