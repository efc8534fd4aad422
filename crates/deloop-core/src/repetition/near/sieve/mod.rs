//! The near-duplicate detector's pre-filter: a cheap pass over the text
//! that proves most of a healthy text free of near-duplicate loops, so the
//! exact detector ([`Near`]) reads only regions around possible ones.
//!
//! # What the sieve reads
//!
//! The sieve splits the text as [`Near`] does — tokens, segments (lines,
//! `\n` escapes, sentence ends) and lines inside fences or table rows —
//! but keeps only counts and flags.
//!
//! * Inside a line of ordinary text and a segment already open,
//!   [`Sieve::skim`] reads eight bytes at a time: for words of ASCII
//!   letters, spaces and punctuation other than `. / ! ? # \` and digits
//!   it only adds the token starts (a byte that is not a space after a
//!   space) to the counts, with a few word-wide operations and no branch
//!   per token. A `.` before a space ends the segment there; a token with
//!   a digit that ends at a space is a marked token (below). Anything else
//!   hands over, at the start of its token, to the token loop.
//! * The token loop ([`Sieve::run`]) takes an ASCII token in one
//!   eight-byte step; a span between ASCII white space that holds a
//!   character outside ASCII, a backslash or a `#` is read character by
//!   character with [`Near`]'s rules (Unicode white space, CJK characters
//!   as tokens, the JSON escape `\n`).
//!
//! The sieve stops at the first token (or character of a span) after
//! which a condition below holds, so the restart points are those of
//! that point.
//!
//! # Necessary conditions (the rules cannot fire without them)
//!
//! * **Counters.** Call a token *marked* when it holds an ASCII digit or
//!   a `#`: exactly the tokens whose masked key (digit runs as `#`)
//!   holds a `#`, so two tokens with equal masked keys are both marked
//!   or both not. In a run of `r` matches at period `p ≤ 8` that fires,
//!   some token of the last copy has a digit; masked equality carries
//!   that back, so the run's region holds a marked token in every `p`
//!   tokens, and each marked token of the run after its first copy has
//!   a marked token with an equal masked key exactly `p` tokens back (a
//!   *hit at `p`*). The sieve computes the exact masked key ([`Key`]) of
//!   marked tokens only and counts, per period, the marked tokens in a
//!   row with a hit at that period: a run that fires has at least
//!   `⌊r/p⌋ ≥ ⌊need(p)/p⌋` of them, so the sieve flags at
//!   `min over p of ⌊max(masked_min_run, masked_run_per_period·p)/p⌋`
//!   (6 by default).
//! * **Sentences.** Near-duplicate segments have token counts within
//!   `sentence_max_edits` of each other and at least
//!   `sentence_min_tokens` tokens; the sieve follows runs of segments
//!   whose counts allow it, at distance 1 and 2, and flags where such a
//!   run could reach `sentence_copies` (or `3p`).
//! * **Lists.** A list rule fires only after
//!   `max(2, min(empty_items, max(list_items, 4)))` list items in a row
//!   (lines whose first token is 1–4 digits then `.` or `)`), the
//!   restarted-list rule after `list_copy_items + 1`: the sieve flags at
//!   the smaller.
//! * **Lines going round a few values.** Equal lines have equal token
//!   counts (a list marker set aside), so `line_window` lines in a row
//!   outside fences and tables holding at most `line_window_values`
//!   different lines hold at most that many different counts, one at
//!   least `line_window_min_tokens`: the sieve keeps the last lines'
//!   counts (the tokens read between a line's start and its end) and
//!   flags there.
//! * **Long units.** A unit of `d ≥ chain_min_unit` characters repeated
//!   `chain_copies` times needs a run of non-white-space of
//!   `chain_copies · d` characters (and at least [`CHAIN_START`]): the
//!   sieve flags any span between ASCII white space that long. The long-
//!   unit rule ignores shingles of earlier runs of non-white-space, so a
//!   run that cannot fire leaves nothing behind.
//! * **Code blocks** need lines inside a fence: the sieve flags them all.
//! * **Codes going round a few values** need `token_window` tokens in a
//!   row, each with a digit: the sieve follows the run of marked tokens
//!   in a row (counter tokens, so fences and table rows are skipped as
//!   [`Near`] skips them) and flags while it is that long.
//!
//! Lines inside fences and table rows are skipped by the counter,
//! sentence and list rules, and by the sieve in the same way.
//!
//! # Restart points
//!
//! A fresh detector started at the start of a line (just after a newline)
//! has the state of one that read the whole text once it has read past
//! four points, one per rule:
//! * counters: for each period `p`, 8 tokens before the last marked
//!   token without a hit at `p` (a run at `p` that fires later starts
//!   after it), or 8 tokens back after a stretch of 8 unmarked tokens (a
//!   firing run has a marked token in every `p ≤ 8`);
//! * sentences: the segment before the last segment whose count allowed
//!   no near-duplicate at distance 1 or 2 (every run is then 0, and the
//!   two segments a comparison reads are read again);
//! * lists: the first item of the list going on (a line without a list
//!   marker empties the list state);
//! * codes: while the last token read is marked, the later of the run's
//!   first token and the token `token_window - 1` back (a window that
//!   fires there or later starts at or after it).
//!
//! Before those points the fresh detector's runs are never longer than
//! the whole-text detector's (it saw less), so it cannot fire where the
//! whole-text detector does not; after them the states agree. The lines
//! of the code-block rule are carried over from the previous region's
//! detector ([`Near::restart`] keeps them), which read every fenced line
//! (the sieve flags each one). The restart point is the start of the
//! line holding the earliest of the three points; the fence state there
//! is rebuilt from the sieve's line tracker. A region that would start
//! before the previous one ended goes on with that region's detector.
//!
//! The few-lines rule looks `line_window` lines back, further than the
//! others (about 10 KB of SciFact abstracts), so its point is not part
//! of the restart point: a window fires only where the sieve flags it,
//! and the flag records the window's first line. Before the detector
//! reads past a flag (the sieve always reads first), a window whose
//! first line lies before the detector's start makes it start again
//! there and read that stretch again: the window's lines are lines in
//! a row outside fences and tables, so no fenced line lies between its
//! first line and the flag, and no fence is open at its start. The
//! stream keeps the text back to [`Sieve::lines_restart`], the earliest
//! first line a window flagged later can have (it never moves back),
//! and the exact detector starts there before it reads the unread rest,
//! where the sieve flags nothing. Regions of healthy prose then read
//! about as much as before the rule (17 KB per SciFact megabyte against
//! 134 KB when the restart point went `line_window` lines back).
//!
//! The property tests compare this scan (batch and stream, any chunking,
//! invalid bytes) with [`Near`] reading every character, on generated
//! texts with loops of every rule one copy short of firing or firing,
//! under five configurations; twenty deliberate mistakes (thresholds one
//! off, restart points too late, no continuation, the skim's hand-over
//! and dot rules, the stream's unread rest) each make them fail; so do
//! a few-lines window recorded 3 lines late and a detector that does not
//! start again at a window's first line (batch or stream). A window that
//! closes in the stream's unread rest has its own test.

use crate::repetition::candidate::Candidate;
use crate::repetition::near::{Key, Near, CHAIN_START};
use crate::repetition::text::healthy::{is_cjk, Lines};
use crate::repetition::text::list_marker::{is_marker, MarkerShape};
use crate::repetition::text::swar;
use crate::repetition::ClampConfig;

/// What [`Sieve::run`] stops at: a possible loop, or a quiet point.
const FLAG: u8 = 1;
const QUIET: u8 = 2;

/// Bits of [`Sieve::hot`]: the conditions under which a rule may fire.
const HOT_COUNTER: u8 = 1;
const HOT_SENTENCE: u8 = 2;
const HOT_LIST: u8 = 4;
const HOT_FENCE: u8 = 8;
const HOT_LONG: u8 = 16;
const HOT_LINES: u8 = 32;
const HOT_CODES: u8 = 64;

/// Token periods of the counter rule (as [`Near`]'s).
const MASK_W: usize = 8;
/// Real lines remembered for restart points (tokens 8 back lie within
/// the last 9 lines that hold tokens).
const LINE_RING: usize = 16;

/// The thresholds the sieve flags at.
#[derive(Debug, Clone)]
struct Plan {
    /// Spans of non-white-space this long (bytes) may hold a long unit.
    long_span: usize,
    /// Hits in a row a firing counter run has at least.
    streak: usize,
    /// List items in a row a list rule needs at least.
    list: usize,
    /// Segments in a row (plus the period) the sentence rule needs at
    /// distance 1 and 2.
    sent_need: [usize; 2],
    min_tokens: usize,
    max_edits: usize,
    /// The few-lines rule's window (0: off), values and tokens per line.
    line_window: usize,
    line_values: usize,
    line_min: usize,
    /// The few-codes rule's window in tokens (`usize::MAX`: off).
    code_window: usize,
}

impl Plan {
    /// `None` when the guard is off, or when a counter loop could fire
    /// with no hit at all (the exact detector then reads everything).
    fn of(config: &ClampConfig) -> Option<Plan> {
        let n = &config.near;
        if !n.enabled {
            return None;
        }
        let streak = (1..=MASK_W)
            .map(|p| {
                n.masked_min_run
                    .max(n.masked_run_per_period.saturating_mul(p))
                    / p
            })
            .min()
            .unwrap_or(0);
        if streak == 0 {
            return None;
        }
        let long_span = if n.chain_min_unit
            > n.chain_max_unit
                .min(crate::repetition::bounds::MAX_CHAIN_UNIT)
        {
            usize::MAX
        } else {
            CHAIN_START.max(
                n.chain_copies
                    .max(2)
                    .saturating_mul(n.chain_min_unit.max(1)),
            )
        };
        // The flood form of the long-unit rule: two copies of a unit of
        // `lo` characters or more and the head of a third.
        let (lo, hi) = crate::repetition::near::flood_units(n, config.healthy.token_flood());
        let long_span = if lo <= hi {
            long_span.min(CHAIN_START.max(2 * lo + crate::repetition::near::CHAIN_FLOOD_HEAD))
        } else {
            long_span
        };
        Some(Plan {
            long_span,
            streak,
            list: list_need(n),
            line_window: n.line_window.min(LINE_RING),
            line_values: n.line_window_values,
            line_min: n.line_window_min_tokens.max(1),
            code_window: if n.token_window < 2 || n.token_window_values == 0 {
                usize::MAX
            } else {
                n.token_window.min(crate::repetition::near::TOKEN_WINDOW)
            },
            sent_need: [n.sentence_copies.max(3), n.sentence_copies.max(6)],
            min_tokens: n.sentence_min_tokens,
            max_edits: n.sentence_max_edits,
        })
    }
}

/// The token the character-by-character path is reading.
#[derive(Debug, Clone, Copy, Default)]
struct Tok {
    active: bool,
    /// List-marker shape so far.
    marker: MarkerShape,
    last_stop: bool,
    /// Holds an ASCII digit or a `#`.
    marked: bool,
    in_digits: bool,
    masked: Key,
}

/// The pre-filter's state (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Sieve {
    plan: Plan,
    /// Fences and table rows, read lazily at the start of each line.
    lines: Lines,
    /// Conditions under which a rule may fire ([`HOT_COUNTER`], …).
    hot: u8,
    // Structure, as `Near` reads it.
    line_active: bool,
    line_n: usize,
    line_fence: bool,
    line_table: bool,
    line_marker: bool,
    /// Start of the real line (just after the last newline).
    real_line: usize,
    /// Real line the current line (or `\n` piece) lies in.
    line_real: usize,
    seg_active: bool,
    seg_n: usize,
    seg_real: usize,
    tok: Tok,
    /// A backslash waiting for its next character (its offset).
    pending_bs: Option<usize>,
    // Counters: tokens read outside fences and tables, the last marked
    // tokens (index, masked key) and, per period, hits in a row.
    ntok: usize,
    marked: [(usize, u64); MASK_W],
    nmarked: usize,
    streaks: [usize; MASK_W],
    /// Per period, the restart point set by the last marked token
    /// without a hit at that period.
    counter_from: [usize; MASK_W],
    /// First token of the run of marked tokens in a row the last marked
    /// token ends, and the token after that one (`usize::MAX` before
    /// the first).
    marked_from: usize,
    marked_next: usize,
    /// Real lines holding tokens: (first token, start).
    reals: [(usize, usize); LINE_RING],
    nreals: usize,
    real_recorded: bool,
    // Sentences: the last two segments' token counts and real lines.
    prev_n: [usize; 2],
    prev_real: [usize; 2],
    nprev: usize,
    sent_runs: [usize; 2],
    sentence_from: usize,
    // Lists: list items in a row and the real line of the first.
    items: usize,
    list_from: usize,
    // Lines going round a few values: tokens read when the line started,
    // and the last lines in a row outside fences and tables (tokens, a
    // list marker set aside; real line).
    line_tok0: usize,
    flines: [(usize, usize); LINE_RING],
    nflines: usize,
    /// The earliest first line of the windows flagged since the driver
    /// last took it ([`Sieve::take_lines_low`]), or `usize::MAX`.
    lines_low: usize,
    /// The last look for a backslash, `#`, `!` or `?` covered the stream
    /// from `spec_from` to `spec_at`, where one is (`spec_found`) or the
    /// look ended.
    spec_from: usize,
    spec_at: usize,
    spec_found: bool,
}

/// List items in a row before a list rule can fire: the counted-list
/// rule needs `max(2, min(empty_items, max(list_items, 4)))`, the
/// restarted-list rule `list_copy_items + 1` (a copy of an item needs the
/// item).
fn list_need(n: &crate::repetition::NearConfig) -> usize {
    let counted = n.empty_items.min(n.list_items.max(4)).max(2);
    match n.list_copy_items {
        0 => counted,
        c => counted.min(c.saturating_add(1)),
    }
}

/// Eight bytes of `b` from `p` (little-endian), padded with spaces past
/// the end.
#[inline(always)]
fn load(b: &[u8], p: usize) -> u64 {
    match b.get(p..p + 8) {
        Some(w) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            u64::from_le_bytes(a)
        }
        None => {
            let mut a = [b' '; 8];
            let rest = b.get(p..).unwrap_or(&[]);
            a[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(a)
        }
    }
}

/// Where the span of non-ASCII-white-space bytes from `p` ends.
fn span_end(b: &[u8], p: usize) -> usize {
    b[p..]
        .iter()
        .position(|&c| matches!(c, b'\t'..=b'\r' | b' '))
        .map_or(b.len(), |k| p + k)
}

/// The case fold [`Near`] keys tokens with.
#[inline]
fn fold(c: char) -> u32 {
    if c.is_ascii() {
        u32::from(c.to_ascii_lowercase() as u8)
    } else {
        c.to_lowercase().next().unwrap_or(c) as u32
    }
}

/// The masked key of an ASCII token (digit runs as one `#`), as
/// [`Near`] computes it: the masked bytes go to the key eight at a time,
/// which gives the key of pushing them one by one.
fn masked_key(t: &[u8]) -> u64 {
    let mut k = Key::default();
    let (mut w, mut n) = (0u64, 0u32);
    let mut in_digits = false;
    for &c in t {
        let out = if c.is_ascii_digit() {
            if in_digits {
                continue;
            }
            in_digits = true;
            b'#'
        } else {
            in_digits = false;
            c.to_ascii_lowercase()
        };
        w |= u64::from(out) << (8 * n);
        n += 1;
        if n == 8 {
            k.push_word(w, 8);
            (w, n) = (0, 0);
        }
    }
    if n > 0 {
        k.push_word(w, n);
    }
    k.value()
}

impl Sieve {
    fn new(plan: Plan) -> Self {
        Sieve {
            plan,
            lines: Lines::default(),
            hot: 0,
            line_active: false,
            line_n: 0,
            line_fence: false,
            line_table: false,
            line_marker: false,
            real_line: 0,
            line_real: 0,
            seg_active: false,
            seg_n: 0,
            seg_real: 0,
            tok: Tok::default(),
            pending_bs: None,
            ntok: 0,
            marked: [(0, 0); MASK_W],
            nmarked: 0,
            streaks: [0; MASK_W],
            counter_from: [0; MASK_W],
            marked_from: 0,
            marked_next: usize::MAX,
            reals: [(0, 0); LINE_RING],
            nreals: 0,
            real_recorded: false,
            prev_n: [0; 2],
            prev_real: [0; 2],
            nprev: 0,
            sent_runs: [0; 2],
            sentence_from: 0,
            items: 0,
            list_from: 0,
            line_tok0: 0,
            flines: [(0, 0); LINE_RING],
            nflines: 0,
            lines_low: usize::MAX,
            spec_from: 0,
            spec_at: 0,
            spec_found: false,
        }
    }

    /// The offset in `b` (the stream from `base`) of the next backslash,
    /// `#`, `!` or `?` from `p`, or of the end of the stretch looked
    /// through: a look goes on from where the last one ended, so every
    /// byte is looked at about once.
    fn next_special(&mut self, b: &[u8], base: usize, p: usize) -> usize {
        let at = base + p;
        let mut from = at;
        if self.spec_from <= at && at <= self.spec_at {
            if self.spec_found || self.spec_at >= base + b.len() {
                return self.spec_at - base;
            }
            from = self.spec_at;
        }
        let k = next_special(b, from - base);
        self.spec_from = at;
        self.spec_at = base + k;
        self.spec_found = k < b.len() && matches!(b[k], b'\\' | b'#' | b'!' | b'?');
        k
    }

    /// A character of a token (as [`Near`]'s `token_char`).
    fn token_char(&mut self, c: char, pos: usize, len: usize, b: &[u8], base: usize) {
        if !self.line_active {
            self.line_start(pos, len, b, base);
        }
        if !self.seg_active {
            self.seg_active = true;
            self.seg_n = 0;
            self.seg_real = self.real_line;
        }
        let t = &mut self.tok;
        if !t.active {
            *t = Tok {
                active: true,
                ..Tok::default()
            };
        }
        let digit = c.is_ascii_digit();
        if digit || c == '#' {
            t.marked = true;
        }
        if digit {
            if !t.in_digits {
                t.masked.push(u32::from(b'#'));
            }
        } else {
            t.masked.push(fold(c));
        }
        t.in_digits = digit;
        t.marker.push(c);
        t.last_stop = matches!(c, '.' | '!' | '?');
    }

    /// The first token character of a line, at `pos`.
    #[inline]
    fn line_start(&mut self, pos: usize, len: usize, b: &[u8], base: usize) {
        self.line_active = true;
        self.line_n = 0;
        self.line_marker = false;
        self.line_real = self.real_line;
        self.line_tok0 = self.ntok;
        self.lines.advance(b, base, pos + len);
        self.line_fence = self.lines.exempt(pos, true, false);
        self.line_table = self.lines.exempt(pos, false, true);
        if self.line_fence {
            self.hot |= HOT_FENCE;
        } else {
            self.hot &= !HOT_FENCE;
        }
    }

    /// The token read character by character ends.
    fn end_token(&mut self) {
        if !self.tok.active {
            return;
        }
        self.tok.active = false;
        let t = self.tok;
        let key = t.marked.then(|| t.masked.value());
        self.token_done(t.marker.is_marker(), key);
    }

    /// A token ends: it was a list marker shape (`marker`), and `key` is
    /// its masked key when it is marked.
    #[inline]
    fn token_done(&mut self, marker: bool, key: Option<u64>) {
        if self.line_n == 0 && marker {
            self.line_marker = true;
        }
        self.line_n += 1;
        self.seg_n += 1;
        if !self.line_fence && !self.line_table {
            self.counter_token(key);
        }
    }

    /// White space other than a newline (as [`Near`]'s `space_char`).
    fn space_char(&mut self) {
        let t = &self.tok;
        let marker_only = t.marker.is_marker() && self.line_n == 0;
        let stop = t.active && t.last_stop && !marker_only && !self.line_fence;
        self.end_token();
        if stop {
            self.end_segment();
        }
    }

    fn end_segment(&mut self) {
        if !self.seg_active {
            return;
        }
        self.seg_active = false;
        if self.line_fence || self.line_table {
            return;
        }
        self.sentence(self.seg_n);
    }

    /// A line (or a `\n` piece of one) ends.
    fn end_line(&mut self) {
        self.end_segment();
        if !self.line_active {
            return;
        }
        self.line_active = false;
        if self.line_fence || self.line_table {
            self.nflines = 0;
            self.hot &= !HOT_LINES;
            return;
        }
        self.few_lines();
        if self.line_marker {
            if self.items == 0 {
                self.list_from = self.line_real;
            }
            self.items += 1;
        } else {
            self.items = 0;
        }
        if self.items >= self.plan.list {
            self.hot |= HOT_LIST;
        } else {
            self.hot &= !HOT_LIST;
        }
    }

    /// One ASCII white-space byte `c` at `pos`.
    fn white(&mut self, c: u8, pos: usize, b: &[u8], base: usize) {
        if let Some(bs) = self.pending_bs.take() {
            self.token_char('\\', bs, 1, b, base);
        }
        self.hot &= !HOT_LONG;
        if c == b'\n' {
            self.end_token();
            self.end_line();
            self.real_line = pos + 1;
            self.real_recorded = false;
        } else {
            self.space_char();
        }
    }

    /// The span `from..to` of `s` (no ASCII white space), character by
    /// character, as [`Near::push`] reads it, until the first character
    /// after which [`Sieve::run`] stops (`WANT`): returns the offset in
    /// `s` just after it. The sieve stops where a condition changes, so
    /// the restart points are those of that character.
    fn span<const WANT: u8>(
        &mut self,
        s: &str,
        base: usize,
        from: usize,
        to: usize,
    ) -> Option<usize> {
        let b = s.as_bytes();
        if to - from >= self.plan.long_span {
            self.hot |= HOT_LONG;
        }
        for (k, c) in s[from..to].char_indices() {
            let pos = base + from + k;
            self.span_char(c, pos, b, base);
            if (self.hot != 0) == (WANT == FLAG) {
                return Some(from + k + c.len_utf8());
            }
        }
        None
    }

    /// One character of a span.
    fn span_char(&mut self, c: char, pos: usize, b: &[u8], base: usize) {
        if let Some(bs) = self.pending_bs.take() {
            if c == 'n' {
                // The JSON escape `\n`: a line break.
                self.end_token();
                self.end_line();
                return;
            }
            self.token_char('\\', bs, 1, b, base);
        }
        if c == '\\' {
            self.pending_bs = Some(pos);
            return;
        }
        if c.is_whitespace() {
            self.space_char();
            return;
        }
        if is_cjk(c) {
            self.end_token();
            self.token_char(c, pos, c.len_utf8(), b, base);
            self.end_token();
            if matches!(c, '。' | '！' | '？') && !self.line_fence {
                self.end_segment();
            }
            return;
        }
        self.token_char(c, pos, c.len_utf8(), b, base);
    }
}

mod conditions;
mod restart;
mod skim;
mod stream;
#[cfg(test)]
mod tests;

use skim::next_special;
pub(crate) use stream::{scan, NearStream};
