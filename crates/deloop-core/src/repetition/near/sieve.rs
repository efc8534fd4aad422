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

use crate::repetition::near::{Key, Near, CHAIN_START};
use crate::repetition::substring::Candidate;
use crate::repetition::text::healthy::{is_cjk, Lines};
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
    /// List-marker shape so far, as [`Near`]'s: 0 digits only, 1 digits
    /// then `.` or `)`, 2 anything else.
    marker: u8,
    ndigits: u32,
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

/// A list marker: 1–4 ASCII digits then `.` or `)`.
#[inline]
fn is_marker(t: &[u8]) -> bool {
    match t.split_last() {
        Some((&last, digits)) => {
            matches!(last, b'.' | b')')
                && (1..=4).contains(&digits.len())
                && digits.iter().all(u8::is_ascii_digit)
        }
        None => false,
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

    /// Where a fresh detector may start (a line start) for the counter,
    /// sentence and list rules, and the fenced block open there. The
    /// few-lines rule is served by [`Sieve::take_lines_low`] (a region
    /// whose windows start earlier reads again from there).
    fn restart(&self) -> (usize, Option<(u8, usize)>) {
        let mut at = self.counter_restart().min(self.sentence_from);
        // A few-codes window going on (the last token read is marked)
        // starts at the run's first token or at most `code_window - 1`
        // tokens before the next one.
        let w = self.plan.code_window;
        if w != usize::MAX && self.marked_next == self.ntok {
            at = at.min(self.real_of(self.marked_from.max(self.ntok.saturating_sub(w))));
        }
        if self.items > 0 {
            at = at.min(self.list_from);
        }
        (at, self.fence_at(at))
    }

    /// The earliest first line of the few-lines windows flagged since the
    /// last call (`usize::MAX` if none): the exact detector must have
    /// started there or before to see them whole.
    fn take_lines_low(&mut self) -> usize {
        std::mem::replace(&mut self.lines_low, usize::MAX)
    }

    /// The fenced block open at `at`, a line start at or after which no
    /// line inside a fence was read up to here.
    fn fence_at(&self, at: usize) -> Option<(u8, usize)> {
        // Between the restart point and here no line inside a fence was
        // read (each one flags), so the fence open now, if any, was
        // either open there too or opened at or after it.
        match self.lines.open_fence() {
            Some((_, line)) if line >= at => None,
            f => f,
        }
    }

    /// The few-lines rule's restart point: the first of the last lines
    /// read that a window firing here or later can start at. Such a
    /// window holds at most the last `line_window` lines read, and it
    /// holds every line from its first to the last one read, so at most
    /// `line_window_values` different counts among them: the earliest
    /// such line (a window starting before it would hold one count too
    /// many). With no such line, the line being read (or the next). Never
    /// earlier than it was (a line read only takes lines away), until a
    /// line inside a fence or table row empties the window.
    /// `usize::MAX` when the rule is off.
    fn lines_restart(&self) -> usize {
        let (w, n) = (self.plan.line_window, self.nflines);
        if w == 0 || self.plan.line_values == 0 {
            return usize::MAX;
        }
        let here = if self.line_active {
            self.line_real
        } else {
            self.real_line
        };
        if n == 0 {
            return here;
        }
        let mut seen = [0usize; LINE_RING];
        let mut nseen = 0;
        let mut first = n;
        for t in (n.saturating_sub(w)..n).rev() {
            let c = self.flines[t % LINE_RING].0;
            if !seen[..nseen].contains(&c) {
                if nseen == self.plan.line_values {
                    break;
                }
                seen[nseen] = c;
                nseen += 1;
            }
            first = t;
        }
        self.flines[first % LINE_RING].1
    }

    /// The counter rule's restart point: for each period, 8 tokens
    /// before the last marked token without a hit at that period; or 8
    /// tokens back when none of the last 8 tokens is marked.
    fn counter_restart(&self) -> usize {
        let j = self.ntok;
        let quiet = match self.nmarked {
            0 => true,
            k => self.marked[(k - 1) % MASK_W].0 + MASK_W < j,
        };
        if quiet {
            self.real_of(j.saturating_sub(MASK_W))
        } else {
            self.counter_from.iter().copied().min().unwrap_or(0)
        }
    }

    /// Start of the real line holding token `t` (`t` among the last
    /// tokens), or 0 before the first.
    fn real_of(&self, t: usize) -> usize {
        let n = self.nreals;
        for k in (n.saturating_sub(LINE_RING)..n).rev() {
            let (first, start) = self.reals[k % LINE_RING];
            if first <= t {
                return start;
            }
        }
        0
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
        t.marker = match (t.marker, digit, c) {
            (0, true, _) => {
                t.ndigits += 1;
                if t.ndigits > 4 {
                    2
                } else {
                    0
                }
            }
            (0, false, '.' | ')') if t.ndigits > 0 => 1,
            _ => 2,
        };
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
        self.token_done(t.marker == 1, key);
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
        let marker_only = t.marker == 1 && self.line_n == 0;
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

    /// A line outside fences and tables ends: the few-lines condition.
    #[inline]
    fn few_lines(&mut self) {
        let w = self.plan.line_window;
        if w == 0 {
            return;
        }
        let n = self.ntok - self.line_tok0 - usize::from(self.line_marker);
        self.hot &= !HOT_LINES;
        let k = self.nflines;
        self.flines[k % LINE_RING] = (n, self.line_real);
        self.nflines = k + 1;
        if self.nflines < w {
            return;
        }
        let mut seen = [0usize; LINE_RING];
        let mut nseen = 0;
        let mut long = false;
        for t in self.nflines - w..self.nflines {
            let c = self.flines[t % LINE_RING].0;
            long |= c >= self.plan.line_min;
            if !seen[..nseen].contains(&c) {
                if nseen == self.plan.line_values {
                    return;
                }
                seen[nseen] = c;
                nseen += 1;
            }
        }
        if long {
            self.hot |= HOT_LINES;
            let first = self.flines[(self.nflines - w) % LINE_RING].1;
            self.lines_low = self.lines_low.min(first);
        }
    }

    /// A token outside fences and tables.
    #[inline]
    fn counter_token(&mut self, key: Option<u64>) {
        let j = self.ntok;
        self.ntok = j + 1;
        if !self.real_recorded {
            self.real_recorded = true;
            self.reals[self.nreals % LINE_RING] = (j, self.real_line);
            self.nreals += 1;
        }
        if let Some(key) = key {
            self.marked_token(j, key);
        }
    }

    /// Counter token `j` is marked, with masked key `key`: for each
    /// period `p`, whether the token `p` back is marked with the same key
    /// (a hit at `p`) extends or ends the hits in a row at `p`.
    fn marked_token(&mut self, j: usize, key: u64) {
        let k = self.nmarked;
        // Few codes: a window of `code_window` marked tokens in a row.
        if self.marked_next != j {
            self.marked_from = j;
        }
        self.marked_next = j + 1;
        let codes = j + 1 - self.marked_from >= self.plan.code_window;
        self.hot = self.hot & !HOT_CODES | if codes { HOT_CODES } else { 0 };
        let mut hits = 0u32;
        for m in k.saturating_sub(MASK_W)..k {
            let (t, other) = self.marked[m % MASK_W];
            if t + MASK_W >= j && other == key {
                hits |= 1 << (j - t - 1);
            }
        }
        self.marked[k % MASK_W] = (j, key);
        self.nmarked = k + 1;
        if hits == 0 {
            // No run goes through this token (the common case).
            self.streaks = [0; MASK_W];
            self.counter_from = [self.real_of(j.saturating_sub(MASK_W)); MASK_W];
            self.hot &= !HOT_COUNTER;
            return;
        }
        let mut best = 0;
        let mut from = None;
        for p in 0..MASK_W {
            if hits >> p & 1 != 0 {
                self.streaks[p] += 1;
                best = best.max(self.streaks[p]);
            } else {
                self.streaks[p] = 0;
                // No run at `p` goes through this token: one that fires
                // later has its first copy after `j - 8`.
                let at = *from.get_or_insert_with(|| self.real_of(j.saturating_sub(MASK_W)));
                self.counter_from[p] = at;
            }
        }
        if best >= self.plan.streak {
            self.hot |= HOT_COUNTER;
        } else {
            self.hot &= !HOT_COUNTER;
        }
    }

    /// A segment of `n` tokens outside fences and tables ends.
    fn sentence(&mut self, n: usize) {
        let plan = &self.plan;
        let long = n >= plan.min_tokens;
        for p in 1..=2 {
            let near = long && self.nprev >= p && {
                let o = self.prev_n[(self.nprev - p) % 2];
                o >= plan.min_tokens && o.abs_diff(n) <= plan.max_edits
            };
            self.sent_runs[p - 1] = if near { self.sent_runs[p - 1] + 1 } else { 0 };
        }
        if self.sent_runs == [0, 0] {
            self.sentence_from = if self.nprev > 0 {
                self.prev_real[(self.nprev - 1) % 2]
            } else {
                self.seg_real
            };
        }
        let slot = self.nprev % 2;
        self.prev_n[slot] = n;
        self.prev_real[slot] = self.seg_real;
        self.nprev += 1;
        if self.sent_runs[0] + 1 >= plan.sent_need[0] || self.sent_runs[1] + 2 >= plan.sent_need[1]
        {
            self.hot |= HOT_SENTENCE;
        } else {
            self.hot &= !HOT_SENTENCE;
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

    /// Reads `s` (the text from offset `base`) from byte `*i` until a
    /// point where a rule may fire (`WANT` is [`FLAG`]) or where none can
    /// before the next flag ([`QUIET`]): returns that offset (`*i` is
    /// there), or `None` at the end of `s`. `s` ends just after ASCII
    /// white space, or at the end of the text (its last token is then
    /// left unfinished, as [`Near`] leaves it).
    fn run<const WANT: u8>(&mut self, s: &str, base: usize, i: &mut usize) -> Option<usize> {
        let b = s.as_bytes();
        let n = b.len();
        let mut p = *i;
        // The next backslash, `#`, `!` or `?`, looked for a window at a
        // time.
        let mut special = self.next_special(b, base, p);
        let long = self.plan.long_span;
        // Inside a line and a segment of ordinary text, with no token or
        // escape going on, a token only adds to the counts: kept in
        // registers, written back before anything else happens.
        let mut plain = self.plain();
        let mut seg_n = self.seg_n;
        let mut ntok = self.ntok;
        let found = loop {
            if p >= n {
                break None;
            }
            if p > special {
                special = self.next_special(b, base, p);
            }
            if plain {
                (self.seg_n, self.ntok) = (seg_n, ntok);
                let stop = self.skim::<WANT>(b, base, &mut p, special);
                (plain, seg_n, ntok) = (self.plain(), self.seg_n, self.ntok);
                if stop.is_some() {
                    break stop;
                }
                if p >= n {
                    break None;
                }
            }
            let x = load(b, p);
            let stop = swar::stop(x);
            if stop & 0x80 != 0 {
                (self.seg_n, self.ntok) = (seg_n, ntok);
                if x & 0x80 == 0 {
                    self.white(x as u8, base + p, b, base);
                    p += 1;
                } else {
                    let e = span_end(b, p);
                    p = self.span::<WANT>(s, base, p, e).unwrap_or(e);
                }
                (plain, seg_n, ntok) = (self.plain(), self.seg_n, self.ntok);
                if (self.hot != 0) == (WANT == FLAG) {
                    break Some(base + p);
                }
                continue;
            }
            let start = p;
            let (mut q, mut x, mut stop) = (p, x, stop);
            let mut digits = 0u64;
            while stop == 0 {
                digits |= swar::digit(x);
                q += 8;
                x = load(b, q);
                stop = swar::stop(x);
            }
            let k = (stop.trailing_zeros() / 8) as usize;
            let end = q + k;
            // The white space after the token (a space past the end).
            let after = (x >> (8 * k)) as u8;
            if end >= n || after >= 0x80 || end > special || end - start >= long {
                // Not an ASCII token followed by white space.
                (self.seg_n, self.ntok) = (seg_n, ntok);
                let e = span_end(b, start);
                p = self.span::<WANT>(s, base, start, e).unwrap_or(e);
                (plain, seg_n, ntok) = (self.plain(), self.seg_n, self.ntok);
                if (self.hot != 0) == (WANT == FLAG) {
                    break Some(base + p);
                }
                continue;
            }
            digits |= swar::digit(x) & ((1u64 << (8 * k)) - 1);
            let last = if k > 0 {
                (x >> (8 * (k - 1))) as u8
            } else {
                b[end - 1]
            };
            let stop_char = matches!(last, b'.' | b'!' | b'?');
            p = end + 1;
            if plain && digits == 0 {
                seg_n += 1;
                ntok += 1;
                if after != b'\n' && !stop_char {
                    continue;
                }
            }
            (self.seg_n, self.ntok) = (seg_n, ntok);
            if plain && digits == 0 {
                // The token was counted: only the white space is left.
                if after == b'\n' {
                    self.newline(base + end);
                } else {
                    self.end_segment();
                }
            } else {
                let t = &b[start..end];
                self.ascii_token(t, base + start, b, base, digits != 0, stop_char, after);
            }
            (plain, seg_n, ntok) = (self.plain(), self.seg_n, self.ntok);
            if (self.hot != 0) == (WANT == FLAG) {
                break Some(base + p);
            }
        };
        (self.seg_n, self.ntok) = (seg_n, ntok);
        *i = p;
        found
    }

    /// Reads ordinary text from `*p` (just after white space, in the
    /// [`Sieve::plain`] state) up to `lim` eight bytes at a time: ASCII
    /// letters, spaces and punctuation other than `. ! ? # \\` and digits
    /// only add token starts to the counts. A `.` that ends a token before
    /// a space ends the segment; a token with a digit that ends before a
    /// space is a marked token. Anything else (other white space or
    /// control bytes, bytes outside ASCII, a stretch without spaces that
    /// could hold a long unit, `lim`) hands over to the token loop at the
    /// start of the token it falls in (that token is then not counted).
    /// Returns where the sieve stops, as [`Sieve::run`] does, or `None`
    /// with `*p` where the token loop goes on.
    #[inline(never)]
    fn skim<const WANT: u8>(
        &mut self,
        b: &[u8],
        base: usize,
        p: &mut usize,
        lim: usize,
    ) -> Option<usize> {
        let entry = *p;
        let lim = lim.min(b.len()).max(entry);
        // A span of `long_span` bytes without white space covers this
        // many whole words in a row.
        let max_bare = (self.plan.long_span.saturating_sub(7) / 8).max(1);
        let mut seg_n = self.seg_n;
        let mut ntok = self.ntok;
        // The byte before is white space (bit 7 of the byte below the
        // first).
        let mut carry = swar::HI >> 56;
        // Words in a row without a space.
        let mut bare = 0usize;
        // A marked token read ahead ends (with a space) here, and the
        // dot that ended its segment, if any.
        let mut marked_to = 0usize;
        let mut dot_done = usize::MAX;
        let mut q = entry;
        loop {
            let (to, c, cy, br) = skim_words(b, q, lim, carry, bare, max_bare);
            seg_n += c;
            ntok += c;
            (q, carry, bare) = (to, cy, br);
            // The word at `q` holds a dot or a digit, or ends the skim.
            let Some(x) = b.get(q..q + 8).filter(|_| q + 8 <= lim).map(word) else {
                break;
            };
            if x & swar::HI != 0 || swar::control(x) != 0 {
                break;
            }
            let sp = swar::zero(x ^ swar::rep(b' '));
            if sp == 0 {
                if bare + 1 >= max_bare {
                    break;
                }
                bare += 1;
            } else {
                bare = 0;
            }
            let starts = !sp & (sp << 8 | carry) & swar::HI;
            let mut counted = 0u64;
            {
                let dots = swar::zero(x ^ swar::rep(b'.'));
                let digits = swar::digit(x);
                // Dots before a space (the next word's first byte for the
                // last one), and digits.
                let next_space = if b.get(q + 8) == Some(&b' ') {
                    1 << 63
                } else {
                    0
                };
                let mut ev = dots & (sp >> 8 | next_space) | digits;
                while ev != 0 {
                    let bit = ev.trailing_zeros();
                    ev &= ev - 1;
                    let at = q + (bit / 8) as usize;
                    let digit = digits >> bit & 1 != 0;
                    if (digit && at < marked_to) || at == dot_done {
                        continue;
                    }
                    let upto = u64::MAX >> (63 - bit);
                    let c = swar::count(starts & upto & !counted) as usize;
                    counted |= starts & upto;
                    seg_n += c;
                    ntok += c;
                    if !digit {
                        // A segment ends after this token.
                        (self.seg_n, self.ntok, self.seg_active) = (seg_n, ntok, true);
                        self.end_segment();
                        seg_n = 0;
                        self.seg_n = 0;
                        self.seg_real = self.real_line;
                        if (self.hot != 0) == (WANT == FLAG) {
                            *p = at + 2;
                            return Some(base + at + 2);
                        }
                        continue;
                    }
                    // A marked token: it starts after the last space
                    // before `at` and must end at a space before `lim`.
                    let mut s = at;
                    while s > entry && b[s - 1] != b' ' {
                        s -= 1;
                    }
                    let mut e = at + 1;
                    while e < lim && b[e] > b' ' && b[e] < 0x80 {
                        e += 1;
                    }
                    if e >= lim || b[e] != b' ' || e - s >= self.plan.long_span {
                        // The token loop reads it (it was counted).
                        (self.seg_n, self.ntok, self.seg_active) = (seg_n - 1, ntok - 1, seg_n > 1);
                        *p = s;
                        return None;
                    }
                    (self.seg_n, self.ntok, self.seg_active) = (seg_n, ntok, true);
                    self.marked_token(ntok - 1, masked_key(&b[s..e]));
                    marked_to = e;
                    if b[e - 1] == b'.' {
                        // Its segment ends here too.
                        self.end_segment();
                        seg_n = 0;
                        self.seg_n = 0;
                        self.seg_real = self.real_line;
                        dot_done = e - 1;
                    }
                    if (self.hot != 0) == (WANT == FLAG) {
                        *p = e + 1;
                        return Some(base + e + 1);
                    }
                }
            }
            let c = swar::count(starts & !counted) as usize;
            seg_n += c;
            ntok += c;
            carry = sp >> 56;
            q += 8;
        }
        // Hand over at `q`: a token read ahead as marked ends past it, or
        // a token that goes on at `q` (or ends there other than at a
        // space) is read again by the token loop.
        let mut at = q;
        if marked_to > q {
            at = marked_to;
        } else if q > entry && b[q - 1] != b' ' && b.get(q) != Some(&b' ') {
            while at > entry && b[at - 1] != b' ' {
                at -= 1;
            }
            seg_n -= 1;
            ntok -= 1;
        }
        (self.seg_n, self.ntok, self.seg_active) = (seg_n, ntok, seg_n > 0);
        *p = at;
        None
    }

    /// Whether an ASCII token only adds to the counts: inside a line of
    /// ordinary text (not a fence or table row) already recorded for
    /// restarts, in a segment, with no token or escape going on.
    #[inline]
    fn plain(&self) -> bool {
        self.line_active
            && self.seg_active
            && !self.line_fence
            && !self.line_table
            && self.real_recorded
            && !self.tok.active
            && self.pending_bs.is_none()
    }

    /// A newline at `pos`, with no token going on.
    fn newline(&mut self, pos: usize) {
        self.end_line();
        self.real_line = pos + 1;
        self.real_recorded = false;
    }

    /// An ASCII token `t` at `pos` (no backslash or `#`, no white space)
    /// followed by the white space `after`: [`Near`]'s `token_char` for
    /// each byte, then the white space.
    #[allow(clippy::too_many_arguments)]
    fn ascii_token(
        &mut self,
        t: &[u8],
        pos: usize,
        b: &[u8],
        base: usize,
        digits: bool,
        stop_char: bool,
        after: u8,
    ) {
        if !self.line_active {
            self.line_start(pos, 1, b, base);
        }
        if !self.seg_active {
            self.seg_active = true;
            self.seg_n = 0;
            self.seg_real = self.real_line;
        }
        let first = self.line_n == 0;
        let marker = first && is_marker(t);
        let key = digits.then(|| masked_key(t));
        self.token_done(marker, key);
        self.hot &= !HOT_LONG;
        if after == b'\n' {
            self.newline(pos + t.len());
        } else if stop_char && !(marker && first) && !self.line_fence {
            self.end_segment();
        }
    }
}

/// Eight bytes as a little-endian word.
#[inline(always)]
fn word(w: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&w[..8]);
    u64::from_le_bytes(a)
}

/// The inner loop of [`Sieve::skim`]: from `q`, words of ASCII letters,
/// spaces and punctuation other than `.`, `/`, digits and control bytes
/// (and no stretch of `max_bare` words without a space) before `lim`.
/// Returns where it stops, the token starts counted, the carry (bit 7:
/// the last byte read is a space) and the words in a row without one.
#[inline(never)]
fn skim_words(
    b: &[u8],
    mut q: usize,
    lim: usize,
    mut carry: u64,
    mut bare: usize,
    max_bare: usize,
) -> (usize, usize, u64, usize) {
    const HI: u64 = swar::HI;
    let end = lim.min(b.len()).max(q);
    let mut c = 0usize;
    // Batches of at most 32 words: each byte of `acc` counts token starts
    // (at most four a word), so their sum fits in a byte.
    for batch in b[q..end].chunks(256) {
        let mut acc = 0u64;
        let mut done = 0;
        for w in batch.chunks_exact(8) {
            let x = word(w);
            // Not ASCII, control bytes, `.`, `/` and digits.
            if (x | swar::control(x) | swar::dot_or_digit(x)) & HI != 0 {
                break;
            }
            // Spaces (the only white space left), then the bytes after
            // one that are not spaces: token starts.
            let sp = !(x ^ swar::rep(b' ')).wrapping_add(swar::rep(0x7f)) & HI;
            if sp == 0 {
                if bare + 1 >= max_bare {
                    break;
                }
                bare += 1;
            } else {
                bare = 0;
            }
            acc += ((sp << 8 | carry) & !sp) >> 7;
            carry = sp >> 56;
            done += 8;
        }
        c += (acc.wrapping_mul(0x0101_0101_0101_0101) >> 56) as usize;
        q += done;
        if done < batch.len() {
            break;
        }
    }
    (q, c, carry, bare)
}

/// Bytes looked through for a backslash, `#`, `!` or `?` at a time.
const SPECIAL_WINDOW: usize = 64 * 1024;

/// The offset of the next backslash, `#`, `!` or `?` in `b` from `p`, or
/// the end of the window looked through: a token that holds one of the
/// first two is read character by character, and [`Sieve::skim`] leaves
/// all four to the token loop (the next look starts past it).
fn next_special(b: &[u8], p: usize) -> usize {
    let end = b.len().min(p.saturating_add(SPECIAL_WINDOW));
    let from = p.min(end);
    let w = &b[from..end];
    let a = memchr::memchr3(b'\\', b'#', b'!', w).unwrap_or(w.len());
    let q = memchr::memchr(b'?', &w[..a]).unwrap_or(a);
    from + q
}

/// Runs the near-duplicate detector over `text` behind the sieve: the
/// first loop it completes, as [`Near`] reading every character finds it.
pub(crate) fn scan(text: &str, config: &ClampConfig) -> Option<Candidate> {
    let Some(plan) = Plan::of(config) else {
        if !config.near.enabled {
            return None;
        }
        let mut n = Near::new(config);
        n.feed(text, 0);
        return n.best;
    };
    let mut sieve = Sieve::new(plan);
    let mut i = 0;
    // The detector of the last region, in step with a whole-text scan up
    // to where the region ended, and where it started.
    let mut last: Option<(Box<Near>, usize, usize)> = None;
    loop {
        sieve.run::<FLAG>(text, 0, &mut i)?;
        let (at, fence) = sieve.restart();
        let (mut near, mut from, mut start) = match last.take() {
            Some((near, end, start)) if at < end => (near, end, start),
            Some((mut near, _, _)) => {
                near.restart(at, fence);
                (near, at, at)
            }
            None => {
                let mut near = Box::new(Near::new(config));
                near.restart(at, fence);
                (near, at, at)
            }
        };
        // The region runs to the next quiet point; the sieve looks for it
        // a window at a time, so a loop is reported without the sieve
        // reading the rest of the text first.
        loop {
            let lim = window_end(text, i);
            let quiet = sieve.run::<QUIET>(&text[..lim], 0, &mut i);
            // A few-lines window flagged since the detector last read
            // starts before the detector did: it reads again from there.
            let low = sieve.take_lines_low();
            if low < start {
                near.restart(low, sieve.fence_at(low));
                (from, start) = (low, low);
            }
            let upto = quiet.unwrap_or(lim).max(from);
            if near.feed(&text[from..upto], from).is_some() {
                return near.best;
            }
            from = upto;
            if quiet.is_some() {
                last = Some((near, upto, start));
                break;
            }
            if lim >= text.len() {
                return None;
            }
        }
    }
}

/// History kept for restarts beyond which the stream is read exactly
/// for good (a line this long, or a list or a loop going on this long).
const STREAM_CAP: usize = 256 * 1024;

/// The near-duplicate detector of a stream, behind the sieve.
///
/// The stream is kept from the sieve's restart point on. The sieve reads
/// complete spans (up to the last ASCII white space); the unread rest is
/// a token in the making, which can complete nothing before white space
/// follows unless it holds a character outside ASCII or a backslash (a
/// CJK token, Unicode white space, `\n`), or is long enough for a long
/// unit: then, as on a flag, an exact detector starts at the restart
/// point (or the last region's goes on) and catches up on the kept
/// stream. It reads every chunk as it comes until the sieve finds a quiet
/// point. Invalid UTF-8, or more than [`STREAM_CAP`] bytes kept, hands the
/// rest of the stream to the exact detector.
#[derive(Debug, Clone)]
pub(crate) struct NearStream {
    config: ClampConfig,
    /// The sieve, until the stream is read exactly for good.
    sieve: Option<Sieve>,
    /// The exact detector: running (reading the stream as far as the
    /// sieve has, up to the next quiet point), parked where its region
    /// ended, or reading the stream for good.
    near: Option<Box<Near>>,
    running: bool,
    /// Where the exact detector has read to, and where it started.
    parked: usize,
    started: usize,
    /// The stream from `base` to `pos`.
    hist: String,
    base: usize,
    /// The sieve has read the stream up to here.
    sieved: usize,
    /// Just after the last ASCII white space of the stream (the sieve
    /// reads up to here), and how far the unread rest was looked at for
    /// bytes that can complete a token.
    cut: usize,
    tail_seen: usize,
    /// The unread rest holds a byte outside ASCII or a backslash.
    tail_risky: bool,
    pos: usize,
}

impl NearStream {
    /// `filter` puts the sieve in front (the tests' reference reads every
    /// character exactly).
    pub(crate) fn new(config: &ClampConfig, filter: bool) -> Self {
        let sieve = if filter {
            Plan::of(config).map(Sieve::new)
        } else {
            None
        };
        let exact = sieve.is_none();
        NearStream {
            config: config.clone(),
            near: exact.then(|| Box::new(Near::new(config))),
            running: exact,
            sieve,
            parked: 0,
            started: 0,
            hist: String::new(),
            base: 0,
            sieved: 0,
            cut: 0,
            tail_seen: 0,
            tail_risky: false,
            pos: 0,
        }
    }

    /// The loop found, if any.
    pub(crate) fn best(&self) -> Option<&Candidate> {
        self.near.as_ref().and_then(|n| n.best.as_ref())
    }

    /// Feeds valid text whose first byte is at stream offset `base`;
    /// stops after the first character that gives a verdict and returns
    /// the offset in `s` just after it.
    pub(crate) fn feed(&mut self, s: &str, base: usize) -> Option<usize> {
        self.pos = base + s.len();
        if self.sieve.is_none() {
            return self.near.as_mut().and_then(|n| n.feed(s, base));
        }
        self.hist.push_str(s);
        if let Some(k) = s.bytes().rposition(|c| matches!(c, b'\t'..=b'\r' | b' ')) {
            self.cut = base + k + 1;
            self.tail_seen = self.cut;
            self.tail_risky = false;
        }
        let cut = self.cut - self.base;
        while self.sieved - self.base < cut {
            let Some(sieve) = self.sieve.as_mut() else {
                break;
            };
            let mut i = self.sieved - self.base;
            let text = &self.hist[..cut];
            if self.running {
                let quiet = sieve.run::<QUIET>(text, self.base, &mut i);
                self.sieved = self.base + i;
                let Some(q) = quiet else {
                    break;
                };
                // The region ends: its detector reads up to here and
                // waits.
                if let Some(k) = self.catch_up(q, base) {
                    return Some(k);
                }
                self.running = false;
            } else {
                let flag = sieve.run::<FLAG>(text, self.base, &mut i);
                self.sieved = self.base + i;
                if flag.is_none() {
                    break;
                }
                if let Some(k) = self.start(base) {
                    return Some(k);
                }
            }
        }
        if self.running {
            if let Some(k) = self.catch_up(self.pos, base) {
                return Some(k);
            }
        }
        // The unread rest (only its new bytes are looked at).
        let seen = self.tail_seen.max(self.cut);
        self.tail_risky |= self.hist.as_bytes()[seen - self.base..]
            .iter()
            .any(|&c| c >= 0x80 || c == b'\\');
        self.tail_seen = self.pos;
        if !self.running {
            let long = self.sieve.as_ref().map_or(0, |sv| sv.plan.long_span);
            if self.pos - self.cut >= long || self.tail_risky {
                if let Some(k) = self.start(base) {
                    return Some(k);
                }
                if let Some(k) = self.catch_up(self.pos, base) {
                    return Some(k);
                }
            }
        }
        self.trim();
        if self.hist.len() > STREAM_CAP {
            self.read_exactly();
        }
        None
    }

    /// Starts an exact detector at the sieve's restart point (or goes on
    /// with the parked one) and catches it up with what the sieve read;
    /// returns where it fires, as an offset in the chunk that starts at
    /// `base`.
    fn start(&mut self, base: usize) -> Option<usize> {
        let (at, fence) = self.sieve.as_ref()?.restart();
        match self.near.as_mut() {
            Some(_) if at < self.parked => {}
            Some(near) => {
                near.restart(at, fence);
                self.parked = at;
                self.started = at;
            }
            None => {
                let mut near = Box::new(Near::new(&self.config));
                near.restart(at, fence);
                self.near = Some(near);
                self.parked = at;
                self.started = at;
            }
        }
        self.running = true;
        self.catch_up(self.sieved, base)
    }

    /// The exact detector reads the kept stream from where it stopped
    /// (`parked`) to `to`; returns where it fires, as an offset in the
    /// chunk that starts at `base`.
    fn catch_up(&mut self, to: usize, base: usize) -> Option<usize> {
        let near = self.near.as_mut()?;
        if let Some(sieve) = self.sieve.as_mut() {
            // A few-lines window flagged since the detector last read
            // starts before the detector did: it reads again from there
            // (the kept stream reaches back to it, see `needed`). Past
            // what the sieve read (the unread rest, one token in the
            // making) no window is flagged: a line can end there only at
            // a `\n` escape, and then the detector starts where any
            // window may.
            let mut low = sieve.take_lines_low();
            let rest = self.sieved.max(self.parked)..to;
            if !rest.is_empty()
                && self.hist.as_bytes()[rest.start - self.base..rest.end - self.base]
                    .contains(&b'\\')
            {
                low = low.min(sieve.lines_restart());
            }
            if low < self.started {
                near.restart(low, sieve.fence_at(low));
                self.parked = low;
                self.started = low;
            }
        }
        let from = self.parked;
        if to <= from {
            return None;
        }
        self.parked = to;
        let fired = near.feed(&self.hist[from - self.base..to - self.base], from);
        fired.map(|k| (from + k).saturating_sub(base))
    }

    /// Where the sieve or an exact detector may need the stream from: a
    /// running detector parks at the stream's end or later, and goes on
    /// from there or restarts at or after it.
    fn needed(&self) -> usize {
        let Some(sieve) = &self.sieve else {
            return self.pos;
        };
        // A few-lines window flagged later starts at or after this.
        let lines = sieve.lines_restart().min(sieve.lines_low);
        if self.running {
            return self.sieved.min(self.parked).min(lines);
        }
        let at = sieve.restart().0;
        let need = match &self.near {
            Some(_) if at < self.parked => self.parked,
            _ => at,
        };
        need.min(self.sieved).min(lines)
    }

    /// Drops the stream no restart can need.
    fn trim(&mut self) {
        let sieved = self.sieved;
        let Some(sieve) = self.sieve.as_mut() else {
            return;
        };
        sieve.lines.advance(self.hist.as_bytes(), self.base, sieved);
        let need = self.needed();
        let k = need - self.base;
        if k > 4096 && k > self.hist.len() / 2 {
            self.hist.drain(..k);
            self.base = need;
        }
    }

    /// Reads the rest of the stream exactly: an exact detector caught up
    /// to the stream's end (nothing fires while it catches up: the sieve
    /// did not flag, and the unread tail cannot complete a token).
    fn read_exactly(&mut self) {
        if !self.running {
            self.start(self.pos);
        }
        // No window is flagged from now on: the detector starts where the
        // earliest one that may still fire does, if that is earlier.
        if let Some(sieve) = self.sieve.as_mut() {
            sieve.lines_low = sieve.lines_low.min(sieve.lines_restart());
        }
        self.catch_up(self.pos, self.pos);
        self.sieve = None;
        self.running = true;
        self.hist = String::new();
    }

    /// Feeds one character of `len` bytes at `pos` (the replacement of an
    /// invalid sequence): the exact detector reads the rest.
    pub(crate) fn push(&mut self, c: char, pos: usize, len: usize) {
        self.pos = pos;
        if self.sieve.is_some() {
            self.read_exactly();
        }
        if let Some(n) = &mut self.near {
            n.push(c, pos, len);
        }
        self.pos = pos + len;
    }

    /// A byte offset no cut found from now on can fall before: the
    /// running detector's bound (it parks at the stream's end or later,
    /// and a later region goes on with it or starts after that); else
    /// the restart point of the next region, or the parked detector's
    /// bound if it may go on, and the lines of the code-block rule it
    /// carries.
    pub(crate) fn settled(&self, pos: usize) -> usize {
        let near = self.near.as_ref();
        let Some(sieve) = &self.sieve else {
            return near.map_or(pos, |n| n.settled(pos));
        };
        // A few-lines loop found later starts at or after this (a
        // detector that started later reads again from there).
        let lines = sieve.lines_restart().min(sieve.lines_low);
        if self.running {
            return near
                .map_or(pos, |n| n.settled(self.parked))
                .min(pos)
                .min(lines);
        }
        let at = sieve.restart().0;
        let bound = match near {
            None => usize::MAX,
            Some(n) if at < self.parked => n.settled(self.parked),
            Some(n) => n.code_bound(),
        };
        at.min(bound).min(pos).min(lines)
    }
}

/// Where the sieve's next look for a quiet point ends: just after an
/// ASCII white-space byte about 64 KiB past `i`, or the end of the text.
fn window_end(text: &str, i: usize) -> usize {
    const WINDOW: usize = 64 * 1024;
    let b = text.as_bytes();
    let from = i.saturating_add(WINDOW);
    if from >= b.len() {
        return b.len();
    }
    span_end(b, from).saturating_add(1).min(b.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// [`Near`] reading every character: the reference.
    fn exact(text: &str, config: &ClampConfig) -> Option<Candidate> {
        let mut n = Near::new(config);
        for (i, c) in text.char_indices() {
            n.push(c, i, c.len_utf8());
            if n.best.is_some() {
                break;
            }
        }
        n.best
    }

    /// Tokens of many lengths, marked and not, odd Unicode, escapes.
    const WORDS: [&str; 40] = [
        "the",
        "of",
        "a",
        "cell",
        "CELLS",
        "protein.",
        "was",
        "tumour,",
        "growth!",
        "why?",
        "x",
        "(n",
        "=",
        "p<0.05)",
        "12",
        "3.5",
        "1.",
        "2)",
        "a1b2",
        "#",
        "#3",
        "-",
        "|",
        "\\",
        "\\x",
        "é",
        "İstanbul",
        "STRASSE",
        "straße",
        "\u{212a}elvin",
        "kelvin",
        "高",
        "。",
        "ｂ",
        "e\u{301}",
        "\u{FFFD}",
        "immunohistochemistry",
        "e.g.",
        "etc.)",
        "😂",
    ];
    const SPACES: [&str; 12] = [
        " ", " ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u{a0}", "\u{2028}", "\\n",
    ];

    fn prose() -> impl Strategy<Value = String> {
        prop::collection::vec((0..WORDS.len(), 0..SPACES.len()), 1..160).prop_map(|v| {
            v.into_iter()
                .map(|(w, s)| format!("{}{}", WORDS[w], SPACES[s]))
                .collect()
        })
    }

    /// Sentences of similar lengths (runs the sieve follows), some
    /// near-duplicates (a word changed, one or two added), two sentences
    /// of different lengths alternating, some unrelated.
    fn sentences() -> impl Strategy<Value = String> {
        (1..12usize, 6..14usize, 0..4usize, any::<u64>(), 0..4usize).prop_map(
            |(copies, len, spread, seed, how)| {
                let mut out = String::new();
                let mut rng = fastrand::Rng::with_seed(seed);
                for c in 0..copies {
                    let n = match how {
                        3 if c % 2 == 1 => 2 * len + spread,
                        _ => len + (c * spread) % 3,
                    };
                    for t in 0..n {
                        let x = rng.u64(..);
                        let w = match how {
                            // Near-duplicates: one word changes (or
                            // only the length does).
                            0 if t == n / 2 && spread < 2 => format!("w{}", x % 7),
                            0 => format!("word{t}"),
                            // Two sentences alternating.
                            1 | 3 => format!("s{}t{t}", c % 2),
                            _ => format!("v{}", x % 50),
                        };
                        out.push_str(&w);
                        out.push(' ');
                    }
                    out.pop();
                    out.push_str(match rng.u64(..) % 5 {
                        0 => ".\n",
                        1 if c == 0 => ".\n",
                        2 => "? ",
                        _ => ". ",
                    });
                }
                out
            },
        )
    }

    /// Counted list items, empty markers, counters, long units, code
    /// blocks, tables: the other rules, often one copy short of firing.
    fn shapes() -> impl Strategy<Value = String> {
        (0..18usize, 1..24usize, 0..90usize, 1..9usize).prop_map(|(kind, n, k0, p)| {
            let mut out = String::new();
            for k in k0..k0 + n {
                match kind {
                    0 => out.push_str(&format!("{k}. Anise seed\n")),
                    1 => out.push_str(&format!("{k}.\n")),
                    2 => out.push_str(&format!("{}) item {}\n", k, k % p)),
                    3 => out.push_str(&format!("{k}:00 PM: ")),
                    4 => {
                        for t in 0..p {
                            out.push_str(&format!("tok{t} "));
                        }
                        out.push_str(&format!("n{k} "));
                    }
                    5 => out.push_str("resak-kasra-tomo-"),
                    6 => out.push_str(if k % 3 == 0 {
                        "```\nfoo(bar)\n"
                    } else {
                        "baz qux\n"
                    }),
                    7 => out.push_str(&format!("| {k} | a | a |\n")),
                    8 => out.push_str(&format!("step {k}\\nNetwork down.\\n")),
                    9 => out.push_str(&format!("高级牛肉{k}。")),
                    // A counter one token per line.
                    10 => out.push_str(&format!("tok\nn{k}\n")),
                    // Numbered near-duplicate sentences (not a list loop).
                    11 => out.push_str(&format!(
                        "{k}. The fridge {} uses a small fan to keep it cool.\n",
                        if k % 2 == 0 { "also" } else { "still" }
                    )),
                    // A list that starts again every `p + 2` items (the
                    // restarted-list rule), bodies too long for the
                    // counter rule's periods and of lengths too far
                    // apart for the sentence rule's.
                    12 => {
                        let i = k % (p + 2) + 1;
                        let tail = "and so on ".repeat(i % 3 * 3);
                        out.push_str(&format!(
                            "{i}. item number {i} is long enough for nine tokens {tail}\n"
                        ));
                    }
                    // Lines going round 1 to 4 values, short lines between.
                    13 => out.push_str(&format!(
                        "the line {} of words\n</code>\n",
                        ["alpha", "beta gamma", "delta", "epsilon"][(k * 7) % (p % 4 + 1)]
                    )),
                    // List items going round a few bodies of different
                    // lengths.
                    14 => out.push_str(&format!(
                        "{k}. add the {}\n",
                        ["salt now", "flour", "dry yeast here", "sugar"][(k * 5) % (p % 4 + 1)]
                    )),
                    // Codes going round a few values (the few-codes
                    // rule), with no fixed period; hex codes for `p` odd.
                    15 => {
                        let codes = if p % 2 == 0 {
                            ["802.11a,", "802.11b,", "802.11g,", "802.11a+,", "5GHz,"]
                        } else {
                            ["0x1f", "0xa0", "0x00", "0xff", "0x0b"]
                        };
                        out.push_str(codes[(k * k + k0) % (p % 5 + 1)]);
                        // Lines of one to three codes, so restart points
                        // (line starts) fall inside a run.
                        out.push(if (k + k0) % 3 == 0 { '\n' } else { ' ' });
                    }
                    // The same, one code per line, each a sentence: the
                    // window spans many lines and segments.
                    16 => {
                        let codes = ["802.11a", "802.11b", "802.11g", "5GHz", "802.11n"];
                        out.push_str(codes[(k * k + k0) % (p % 5 + 1)]);
                        out.push_str(".\n");
                    }
                    // A unit of exactly `p + 8` characters, `n` times.
                    _ => {
                        let unit: String = (0..p + 8)
                            .map(|i| char::from(b'a' + (i as u8 * 7 + k0 as u8) % 26))
                            .collect();
                        out.push(' ');
                        out.push_str(&unit.repeat(n));
                        out.push(' ');
                        break;
                    }
                }
            }
            out
        })
    }

    fn text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![4 => prose(), 3 => sentences(), 3 => shapes()];
        prop::collection::vec(piece, 1..24).prop_map(|v| v.concat())
    }

    /// Codes whose last value was last seen 9 or more tokens back: every
    /// counter period misses at the flagged token, so the counter rule's
    /// restart point is 8 tokens back while the window starts 15 back;
    /// only the few-codes restart point lets the region see the window
    /// (a restart at the later point fails this test).
    #[test]
    fn a_codes_window_older_than_the_counter_restart_is_seen() {
        let [a, b, c, d] = ["802.11a.\n", "802.11b.\n", "802.11g.\n", "5GHz.\n"];
        let codes = [a, d, b, d, c, a, b, c, a, a, b, c, b, a, c, d];
        let text = format!("Standards:\n{}", codes.concat());
        for config in configs() {
            assert_eq!(scan(&text, &config), exact(&text, &config));
        }
        let only = configs().pop().expect("the few-codes configuration");
        assert!(exact(&text, &only).is_some());
    }

    /// The default, and thresholds low enough that the sieve flags often
    /// and regions open and close many times in one text.
    fn configs() -> Vec<ClampConfig> {
        let mut low = ClampConfig::default();
        let n = &mut low.near;
        n.list_items = 3;
        n.empty_items = 3;
        n.list_copy_items = 2;
        n.token_window = 6;
        n.token_window_values = 3;
        n.sentence_copies = 3;
        n.sentence_min_tokens = 3;
        n.masked_min_run = 8;
        n.masked_run_per_period = 2;
        n.chain_min_unit = 5;
        n.chain_copies = 3;
        n.code_block_copies = 2;
        let mut high = ClampConfig::default();
        let n = &mut high.near;
        n.list_items = 9;
        n.list_copy_items = 12;
        n.token_window_values = 2;
        n.sentence_copies = 9;
        n.sentence_max_edits = 4;
        n.masked_min_run = 60;
        let mut sentences = ClampConfig::default();
        let n = &mut sentences.near;
        n.list_items = 50;
        n.empty_items = 50;
        n.sentence_copies = 3;
        n.chain_min_unit = 9;
        n.chain_copies = 2;
        // Only the few-codes rule (and the code-block rule) can fire, so
        // no other rule's flag or restart point covers its own.
        let mut codes = ClampConfig::default();
        let n = &mut codes.near;
        n.list_items = 10_000;
        n.empty_items = 10_000;
        n.list_copy_items = 0;
        n.line_window = 0;
        n.sentence_copies = 10_000;
        n.masked_min_run = 100_000;
        n.chain_min_unit = 64;
        vec![ClampConfig::default(), low, high, sentences, codes]
    }

    /// The exact detector over a stream: where it first fires (the
    /// offset just after that character) and what it found.
    fn exact_stream(
        pieces: &[(String, usize)],
        config: &ClampConfig,
    ) -> Option<(usize, Candidate)> {
        let mut n = Near::new(config);
        let mut pos = 0;
        for (text, bad) in pieces {
            for c in text.chars() {
                n.push(c, pos, c.len_utf8());
                pos += c.len_utf8();
                if let Some(b) = &n.best {
                    return Some((pos, b.clone()));
                }
            }
            if *bad > 0 {
                n.push('\u{FFFD}', pos, *bad);
                pos += bad;
                if let Some(b) = &n.best {
                    return Some((pos, b.clone()));
                }
            }
        }
        None
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            crate::repetition::test_cases::cases(256)
        ))]

        /// The sieved scan reports what the exact detector reading every
        /// character reports.
        #[test]
        fn sieved_scan_equals_the_exact_scan(text in text()) {
            for config in configs() {
                prop_assert_eq!(scan(&text, &config), exact(&text, &config));
            }
        }

        /// The sieved stream, in any chunking and with invalid bytes (as
        /// U+FFFD of their length) between pieces, fires after the same
        /// character as the exact detector, with the same loop, and no
        /// offset it calls settled is ever cut.
        #[test]
        fn sieved_stream_equals_the_exact_stream(
            pieces in prop::collection::vec((text(), prop_oneof![8 => Just(0usize), 1 => 1..4usize]), 1..4),
            size in 1..300usize,
        ) {
            for config in configs() {
                let expected = exact_stream(&pieces, &config);
                let mut w = NearStream::new(&config, true);
                let mut pos = 0;
                let mut got = None;
                let mut settled = Vec::new();
                'pieces: for (text, bad) in &pieces {
                    let mut rest = text.as_str();
                    while !rest.is_empty() {
                        let mut cut = size.min(rest.len());
                        while !rest.is_char_boundary(cut) {
                            cut += 1;
                        }
                        let (chunk, tail) = rest.split_at(cut);
                        if let Some(k) = w.feed(chunk, pos) {
                            got = w.best().cloned().map(|b| (pos + k, b));
                            break 'pieces;
                        }
                        pos += chunk.len();
                        let s = w.settled(pos);
                        prop_assert!(s <= pos);
                        settled.push(s);
                        rest = tail;
                    }
                    if *bad > 0 {
                        w.push('\u{FFFD}', pos, *bad);
                        pos += bad;
                        if let Some(b) = w.best() {
                            got = Some((pos, b.clone()));
                            break;
                        }
                        settled.push(w.settled(pos));
                    }
                }
                prop_assert_eq!(&got, &expected);
                if let Some((_, b)) = &got {
                    for s in settled {
                        prop_assert!(s <= b.keep, "settled {} past the cut {}", s, b.keep);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod edge_tests {
    use super::*;

    fn both(text: &str, config: &ClampConfig) -> Option<Candidate> {
        let mut n = Near::new(config);
        n.feed(text, 0);
        let sieved = scan(text, config);
        assert_eq!(sieved, n.best, "{text:?}");
        sieved
    }

    /// A long unit whose fourth copy ends the span: it fires on the
    /// span's last character, so the sieve must flag spans of exactly
    /// `chain_copies · chain_min_unit` bytes.
    #[test]
    fn a_long_unit_at_the_threshold() {
        let text = format!(
            "Some prose here. {} and more prose after it.",
            "abcdefghijklm".repeat(4)
        );
        assert!(both(&text, &ClampConfig::default()).is_some());
    }

    /// Near-duplicate sentences, each two words longer than the one
    /// before (so only the distance-1 comparison allows them).
    #[test]
    fn sentences_two_words_longer() {
        let mut text = String::from("An opening line of prose.\n");
        for k in 0..6 {
            let extra = " very".repeat(2 * k);
            text.push_str(&format!(
                "The quick brown fox{extra} jumps over the lazy dog again. "
            ));
        }
        text.push_str("Then something else entirely, much longer than any sentence before it was.");
        assert!(both(&text, &ClampConfig::default()).is_some());
    }
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    fn exact_fire(text: &str, config: &ClampConfig) -> Option<(usize, Candidate)> {
        let mut n = Near::new(config);
        for (i, c) in text.char_indices() {
            n.push(c, i, c.len_utf8());
            if let Some(b) = &n.best {
                return Some((i + c.len_utf8(), b.clone()));
            }
        }
        None
    }

    fn stream_fire(
        text: &str,
        config: &ClampConfig,
        size: usize,
    ) -> (Option<(usize, Candidate)>, NearStream) {
        let mut w = NearStream::new(config, true);
        let mut pos = 0;
        let mut rest = text;
        while !rest.is_empty() {
            let mut cut = size.min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let (chunk, tail) = rest.split_at(cut);
            if let Some(k) = w.feed(chunk, pos) {
                let best = w.best().cloned();
                return (best.map(|b| (pos + k, b)), w);
            }
            pos += chunk.len();
            rest = tail;
        }
        (None, w)
    }

    /// A line longer than the kept stream's cap (the restart point stays
    /// at its start) hands the rest of the stream to the exact detector:
    /// memory stays bounded, and the verdict is still the exact one.
    #[test]
    fn a_long_line_hands_the_stream_to_the_exact_detector() {
        let config = ClampConfig::default();
        // Words without digits or sentence ends: nothing flags, so the
        // restart point stays at the line's start.
        let syllables = ["ka", "lo", "mi", "ren", "tu", "sa", "vo", "qui"];
        let mut text = String::new();
        let mut rng = fastrand::Rng::with_seed(12345);
        while text.len() <= STREAM_CAP + 64 * 1024 {
            let x = rng.u64(..);
            let n = 1 + (x % 3) as usize;
            for k in 0..n {
                text.push_str(syllables[((x >> (8 * k)) % 8) as usize]);
            }
            text.push(' ');
        }
        assert!(text.len() > STREAM_CAP);
        for _ in 0..8 {
            text.push_str("The unit also uses a small fan to keep the air cool and dry. ");
        }
        let expected = exact_fire(&text, &config);
        assert!(expected.is_some());
        let (got, w) = stream_fire(&text, &config, 4096);
        assert_eq!(got, expected);
        assert!(w.sieve.is_none(), "the stream is read exactly for good");
    }

    /// Lines going round a few values whose window closes in the
    /// stream's unread rest (`\n` escapes inside one token): the exact
    /// detector reads that rest before the sieve flags anything, so it
    /// must start where the window does, eight lines before the counter
    /// and sentence rules' restart point.
    #[test]
    fn a_window_closing_in_the_unread_rest() {
        let config = ClampConfig::default();
        let mut text = String::from("Some words to begin with here.\n");
        for _ in 0..4 {
            text.push_str("one two three\nfour five six seven\n");
        }
        text.push_str("xa\\nyb\\nxa\\nyb\\nzz more words\n");
        let expected = exact_fire(&text, &config);
        assert!(expected.is_some(), "the window fires");
        for size in [8, 16, 64, 120, 140, text.len()] {
            let (got, _) = stream_fire(&text, &config, size);
            assert_eq!(got, expected, "chunks of {size}");
        }
        assert_eq!(scan(&text, &config), expected.map(|e| e.1));
    }

    /// Hostile inputs: nothing but white space, NULs, control bytes,
    /// invalid bytes, one huge token, escapes and marks at every offset.
    #[test]
    fn hostile_inputs_do_not_panic_and_agree() {
        let config = ClampConfig::default();
        let mut texts = vec![
            String::new(),
            " ".repeat(3000),
            "\n".repeat(3000),
            "\0".repeat(3000),
            "\u{1}\u{2}\u{7f} ".repeat(1000),
            "x".repeat(20_000),
            "\\".repeat(2000),
            "\\n".repeat(2000),
            "#".repeat(2000),
            "9".repeat(2000),
            ". ".repeat(2000),
            "1.\n".repeat(1000),
            "```\n".repeat(1000),
            "| a |\n".repeat(1000),
            "\u{a0}\u{2028}\u{3000}".repeat(1000),
            "高。".repeat(1000),
        ];
        texts.push(format!("{}{}", "word ".repeat(500), "\u{FFFD}".repeat(500)));
        for text in &texts {
            let e = exact_fire(text, &config);
            assert_eq!(
                scan(text, &config),
                e.as_ref().map(|(_, b)| b.clone()),
                "{:?}",
                &text[..text.len().min(40)]
            );
            for size in [1, 7, 4096] {
                assert_eq!(
                    stream_fire(text, &config, size).0,
                    e,
                    "{:?} {size}",
                    &text[..text.len().min(40)]
                );
            }
        }
        // Invalid bytes only, pushed as replacement characters.
        let mut w = NearStream::new(&config, true);
        for k in 0..5000 {
            w.push('\u{FFFD}', k, 1);
        }
        assert!(w.best().is_none());
        assert!(w.settled(5000) <= 5000);
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    /// The word-at-a-time masked key equals [`Near`]'s, character by
    /// character, for ASCII tokens of every shape.
    #[test]
    fn masked_keys_equal_the_detector_keys() {
        let tokens = [
            "a1",
            "A12b",
            "x9y99z999",
            "28:00",
            "29:00",
            "p<0.05)",
            "1234567890",
            "#",
            "#1",
            "abcdefgh1",
            "abcdefghijklmnop12qrstuvwx",
            "v1.2.3-RC4",
            "9",
            "99.",
            "e1e2e3e4e5e6e7e8",
        ];
        for t in tokens {
            // Near's masked key of `t`, as `Near::token_char` builds it.
            let mut n = Key::default();
            let mut in_digits = false;
            let mut digits = false;
            let mut raw = Key::default();
            for c in t.chars() {
                let l = fold(c);
                let d = c.is_ascii_digit();
                if d && !digits {
                    digits = true;
                    n = raw;
                }
                raw.push(l);
                if d {
                    if !in_digits {
                        n.push(u32::from(b'#'));
                    }
                } else if digits {
                    n.push(l);
                }
                in_digits = d;
            }
            let expected = if digits { n.value() } else { raw.value() };
            assert_eq!(masked_key(t.as_bytes()), expected, "{t}");
        }
    }
}
