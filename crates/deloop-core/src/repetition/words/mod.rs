//! The word-period detector: whitespace tokens, compared by a 64-bit key of
//! their case fold, repeating with a short period (1..=`max_period`, exact
//! run counters per period) or a long one (up to `long_max_period`, found
//! through shingles).
//!
//! Per token the short rule costs `max_period` comparisons and the long
//! rule O(1) (a rolling shingle hash and one table probe), so the whole
//! detector is O(n·P) with no re-scanning. Memory is a ring of the last
//! tokens' keys and offsets, bounded by the configuration, never by the
//! text.

mod ascii;
mod connectors;
mod flood;
mod runs;
pub(crate) mod sieve;
#[cfg(test)]
mod tests;
mod verdict;

pub(crate) use flood::FLOOD_TOKEN_MIN;

use ascii::{hash_ascii, scan_ascii};
use connectors::Connectors;

use crate::repetition::candidate::Candidate;
use crate::repetition::text::fold::{fold_char, KeyHasher};
use crate::repetition::text::healthy::{is_cjk, is_trailing_punct, LineCtx};
use crate::repetition::text::swar;
use crate::repetition::{ClampConfig, Detector};

/// Tokens in a long-period shingle.
pub(crate) const SHINGLE: usize = 8;
/// Slots of the shingle table (direct-mapped, a power of two) once the
/// text is long enough; it starts at `TABLE_START` and doubles when the
/// text's token count (counted from the text's start, also by a detector
/// that starts mid-text) reaches four times its size, so short texts stay
/// cheap. Doubling keeps every entry (an entry's new slot is its old slot
/// or that plus the old size), so which live entries a detector holds
/// depends only on the tokens it read and the text's token count: a
/// detector started `long_max_period + 8` tokens back (see
/// [`crate::repetition::words::sieve`]) holds the same live entries as one that read
/// everything.
const TABLE: usize = 2048;
const TABLE_START: usize = 64;
/// Tokens the ring holds at first; it doubles up to the configured need.
const RING_START: usize = 64;
/// Bytes of each token kept for the unit preview.
const PREVIEW: usize = 24;
/// Multiplier of the rolling shingle hash.
pub(crate) const ROLL: u64 = 0x9e37_79b9_7f4a_7c15;

#[derive(Debug, Clone, Copy, Default)]
struct Tok {
    key: u64,
    start: usize,
    end: usize,
    prev_end: usize,
    connector: bool,
    /// A line break lies between the token before and this one.
    nl: bool,
    preview: [u8; PREVIEW],
    plen: u8,
    ptrunc: bool,
}

/// The token being read.
#[derive(Debug, Clone, Copy, Default)]
struct Build {
    active: bool,
    start: usize,
    all: KeyHasher,
    /// Hash state after the last character that is not trailing
    /// punctuation (valid when `has_core`).
    core: KeyHasher,
    has_core: bool,
    letters: u32,
    preview: [u8; PREVIEW],
    plen: u8,
    ptrunc: bool,
}

impl Build {
    /// Starts a token at byte offset `start`.
    #[inline(always)]
    fn start_at(&mut self, start: usize) {
        self.active = true;
        self.start = start;
        self.all = KeyHasher::default();
        self.has_core = false;
        self.letters = 0;
        self.plen = 0;
        self.ptrunc = false;
    }

    /// Adds an ASCII character that is not white space (never CJK, folds
    /// to its ASCII lowercase).
    #[inline(always)]
    fn push_ascii(&mut self, c: u8) {
        let letter = hash_ascii(c, &mut self.all, &mut self.core, &mut self.has_core);
        self.letters = self.letters.saturating_add(letter);
        if (self.plen as usize) < PREVIEW {
            self.preview[self.plen as usize] = c;
            self.plen += 1;
        } else {
            self.ptrunc = true;
        }
    }

    #[inline]
    fn key(&self, ignore_punct: bool) -> u64 {
        if ignore_punct && self.has_core {
            self.core.finish()
        } else {
            self.all.finish()
        }
    }
}

/// Short periods tracked (lane `i` is period `i + 1`).
pub(crate) const W: usize = 16;

/// The period rules of a configuration, as the detector applies them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Periods {
    /// Largest short period (1..=`W`).
    pub max_p: usize,
    /// Lane `i`: matches needed for period `i + 1` (`u32::MAX` if unused).
    pub thr: [u32; W],
    /// Largest long period (0: no long periods).
    pub long_max: usize,
    /// `long_mult * d` matches bound a long period's run from above.
    pub long_mult: usize,
    /// Percent of the last copy a long loop needs (1–100).
    pub long_pct: usize,
    /// Percent of the last copy a long loop that reaches the end of the
    /// text needs (1–100; at or above `long_pct` it adds nothing).
    pub tail_pct: usize,
}

impl Periods {
    /// Matches a long period `d` needs: `long_mult - 1` whole copies
    /// after the first, and `long_pct` percent of one more (at most
    /// `long_mult * d`, at least `d + 1`).
    pub(crate) fn long_need(&self, d: usize) -> usize {
        long_need(self.long_mult, self.long_pct, d)
    }

    /// Fewest matching tokens, before the text's last token, with which
    /// a long period `d` can fire: `long_need`, or at the end of the text
    /// the tail rule's need less one (the last token may be a cut-off
    /// prefix of its copy, which counts without being equal).
    pub(crate) fn long_fewest(&self, d: usize) -> usize {
        let need = self.long_need(d);
        if self.tail_pct < self.long_pct {
            need.min(long_need(self.long_mult, self.tail_pct, d) - 1)
        } else {
            need
        }
    }
}

#[inline]
fn long_need(mult: usize, pct: usize, d: usize) -> usize {
    (mult - 1) * d + (d * pct).div_ceil(100)
}

impl Periods {
    pub(crate) fn of(config: &ClampConfig) -> Self {
        let w = &config.words;
        let max_p = w.max_period.clamp(1, W);
        let long_max = if w.long_max_period > max_p {
            w.long_max_period
                .min(crate::repetition::bounds::MAX_RUN_WORDS)
        } else {
            0
        };
        let mut thr = [u32::MAX; W];
        for (i, t) in thr[..max_p].iter_mut().enumerate() {
            *t = w
                .min_run
                .max(w.run_per_period.saturating_mul(i + 1))
                .clamp(1, crate::repetition::bounds::MAX_RUN_WORDS) as u32;
        }
        Periods {
            max_p,
            thr,
            long_max,
            long_mult: w
                .long_run_per_period
                .clamp(1, crate::repetition::bounds::MAX_COPIES),
            long_pct: w.long_last_copy_percent.clamp(1, 100),
            tail_pct: w.tail_last_copy_percent.clamp(1, 100),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Run {
    /// Matching tokens in the run (token `t` equal to token `t - p`).
    len: usize,
    start: usize,
    keep: usize,
    keep_tokens: u64,
    accepted: bool,
}

#[derive(Debug, Clone, Copy)]
struct LongRun {
    d: usize,
    run: Run,
}

/// Incremental word-period detector.
#[derive(Debug, Clone)]
pub(crate) struct Words {
    max_p: usize,
    /// Lane `i`: matches needed for period `i + 1` (`u32::MAX` if unused).
    thr: [u32; W],
    /// One byte of each of the last `W` keys (the top byte), newest
    /// first: byte `i` of `fp[0]` (`fp[1]`) is token `j - 1 - i`
    /// (`j - 9 - i`). A match there is confirmed on the full key.
    fp: [u64; 2],
    /// Bit `i`: token `j - 1` equals token `j - 2 - i` (periods tracked
    /// only), i.e. a run at period `i + 1` is going on.
    m: u32,
    /// Bits of the periods tracked.
    lane_mask: u32,
    /// Lane `i`: the first matching token of the run going on.
    since: [usize; W],
    /// Smallest threshold.
    min_thr: u32,
    /// Lane `i`: where the run starts, once it reached its threshold.
    info: [Run; W],
    long_max: usize,
    long_mult: usize,
    long_pct: usize,
    /// The tail rule's percent, applied by [`Words::end_text`] (at or
    /// above `long_pct`: off).
    tail_pct: usize,
    ignore_punct: bool,
    split_cjk: bool,
    connectors: Connectors,
    protect: bool,
    fences: bool,
    tables: bool,
    max_exempt: usize,
    /// A fenced word loop on one line fires at this many bytes (0: never).
    code_line: usize,
    /// A long token repeated back to back fires once its copies cover
    /// this many bytes (`usize::MAX`: off; see `flood.rs`).
    flood: usize,
    /// The period-1 run the flood rule follows.
    flood_run: flood::FloodRun,
    /// A line break was read since the last finished token.
    nl: bool,
    min_word_letters: u32,
    ring: Vec<Tok>,
    mask: usize,
    /// The ring's final size (a power of two).
    max_cap: usize,
    /// Index of the next token.
    j: usize,
    long: Option<LongRun>,
    /// Shingle table: (tag, token index) as 32-bit values; the slot is the
    /// tag's low bits. A hit is only a hint: `adopt` verifies the keys.
    table: Vec<(u32, u32)>,
    roll: u64,
    roll_pow: u64,
    last_word: Option<usize>,
    build: Build,
    last_end: usize,
    armed: bool,
    pub(crate) best: Option<Candidate>,
    /// A loop that ends in the token still being read (valid for the
    /// current prefix only).
    pub(crate) partial: Option<Candidate>,
    /// Compute `partial` (streaming); batch mode only needs finished tokens.
    track_partial: bool,
    /// Tokens of the text before the first one this detector reads (it
    /// may start mid-text, behind the sieve).
    token_base: usize,
}

/// When [`Words::feed`] returns before the end of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Read everything.
    Never,
    /// After the first character that leaves a verdict (`best` or
    /// `partial`): the stream's first firing prefix.
    Verdict,
    /// Once `best` can no longer change (batch mode).
    Settled,
}

/// `char::is_whitespace` on an ASCII byte: U+0009..=U+000D and U+0020.
#[inline(always)]
pub(crate) fn is_ascii_ws(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}

impl Words {
    pub(crate) fn new(config: &ClampConfig, track_partial: bool) -> Self {
        let w = &config.words;
        let Periods {
            max_p,
            thr,
            long_max,
            long_mult,
            long_pct,
            tail_pct,
        } = Periods::of(config);
        let max_thr = thr[..max_p].iter().copied().max().unwrap_or(1) as usize;
        let need = (max_p + max_thr).max(4 * long_max) + 64;
        let cap = need.next_power_of_two();
        let h = &config.healthy;
        let mut roll_pow = 1u64;
        for _ in 0..SHINGLE {
            roll_pow = roll_pow.wrapping_mul(ROLL);
        }
        Words {
            max_p,
            thr,
            fp: [0; 2],
            m: 0,
            lane_mask: if max_p >= 32 {
                u32::MAX
            } else {
                (1u32 << max_p) - 1
            },
            since: [0; W],
            min_thr: thr[..max_p].iter().copied().min().unwrap_or(1),
            info: [Run::default(); W],
            long_max,
            long_mult,
            long_pct,
            tail_pct,
            ignore_punct: w.ignore_trailing_punctuation,
            split_cjk: w.split_cjk,
            connectors: Connectors::new(&w.connectors),
            protect: h.enabled,
            fences: h.skip_code_fences,
            tables: h.skip_table_rows,
            max_exempt: h.max_exempt_run_bytes,
            code_line: if h.code_line_run_bytes == 0 {
                usize::MAX
            } else {
                h.code_line_run_bytes
            },
            flood: h.token_flood(),
            flood_run: flood::FloodRun::default(),
            nl: false,
            min_word_letters: h.min_word_letters.min(u32::MAX as usize) as u32,
            ring: vec![Tok::default(); RING_START.min(cap)],
            mask: RING_START.min(cap) - 1,
            max_cap: cap,
            j: 0,
            long: None,
            table: if long_max > 0 {
                vec![(0, 0); TABLE_START]
            } else {
                Vec::new()
            },
            roll: 0,
            roll_pow,
            last_word: None,
            build: Build::default(),
            last_end: 0,
            armed: false,
            best: None,
            partial: None,
            track_partial,
            token_base: 0,
        }
    }

    /// A detector that starts reading at token `first` of the text.
    pub(crate) fn starting_at(config: &ClampConfig, track_partial: bool, first: usize) -> Self {
        Words::new(config, track_partial).at_token(first)
    }

    /// Tokens of the text this detector has finished (counting those
    /// before it started).
    pub(crate) fn tokens_read(&self) -> usize {
        self.j + self.token_base
    }

    /// This fresh detector, to start reading at token `first` of the text.
    pub(crate) fn at_token(mut self, first: usize) -> Self {
        debug_assert_eq!(self.j, 0);
        self.token_base = first;
        self
    }

    #[inline]
    fn stop_now(&self, stop: Stop) -> bool {
        match stop {
            Stop::Never => false,
            Stop::Verdict => self.best.is_some() || self.partial.is_some(),
            Stop::Settled => self
                .best
                .as_ref()
                .is_some_and(|b| !self.could_improve(b.start)),
        }
    }

    /// Feeds the text `s`, whose first byte is at offset `base`, token by
    /// token: runs of ASCII are read in a tight loop, other characters go
    /// through [`Words::push`]'s general path. The result is the same as
    /// pushing every character. Returns `Some(i)` when `stop` holds after
    /// the character that ends at `s[..i]`, `None` once all of `s` is read.
    pub(crate) fn feed(
        &mut self,
        s: &str,
        base: usize,
        lines: &mut LineCtx<'_>,
        stop: Stop,
    ) -> Option<usize> {
        let b = s.as_bytes();
        let n = b.len();
        let mut i = 0;
        while i < n {
            let c = b[i];
            if c >= 0x80 {
                let ch = s[i..].chars().next().unwrap_or('\u{FFFD}');
                let len = ch.len_utf8();
                self.push_general(ch, base + i, len, lines);
                i += len;
                if self.stop_now(stop) {
                    return Some(i);
                }
                continue;
            }
            if is_ascii_ws(c) {
                i += 1;
                if self.build.active {
                    self.finalize(base + i - 1, lines);
                    self.nl = c == b'\n';
                    if self.stop_now(stop) {
                        return Some(i);
                    }
                } else {
                    self.nl |= c == b'\n';
                }
                continue;
            }
            if self.track_partial && self.armed {
                if !self.build.active {
                    self.build.start_at(base + i);
                }
                // Each character may complete a loop: one at a time.
                loop {
                    self.build.push_ascii(b[i]);
                    i += 1;
                    self.check_partial(base + i, lines);
                    if self.stop_now(stop) {
                        return Some(i);
                    }
                    if i >= n || b[i] >= 0x80 || is_ascii_ws(b[i]) {
                        break;
                    }
                }
                continue;
            }
            // The run of ASCII token characters, eight bytes at a time.
            let from = i;
            if !self.build.active {
                // A new token: read it whole in locals and, when white
                // space ends it here, finish it without going through
                // `Build`.
                let mut all = KeyHasher::default();
                let mut core = all;
                let mut has_core = false;
                let (end, letters) = scan_ascii(b, i, &mut all, &mut core, &mut has_core);
                i = end;
                if i < n && is_ascii_ws(b[i]) {
                    let len = i - from;
                    let plen = len.min(PREVIEW);
                    let mut preview = [0u8; PREVIEW];
                    preview[..plen].copy_from_slice(&b[from..from + plen]);
                    let key = if self.ignore_punct && has_core {
                        core.finish()
                    } else {
                        all.finish()
                    };
                    self.finish_token(
                        Fin {
                            key,
                            start: base + from,
                            end: base + i,
                            word: letters >= self.min_word_letters,
                            folded_len: len as u64,
                            preview,
                            plen: plen as u8,
                            ptrunc: len > PREVIEW,
                        },
                        lines,
                    );
                    self.nl = b[i] == b'\n';
                    i += 1;
                    if self.stop_now(stop) {
                        return Some(i);
                    }
                    continue;
                }
                let t = &mut self.build;
                t.start_at(base + from);
                t.all = all;
                t.core = core;
                t.has_core = has_core;
                t.letters = letters;
                let take = (i - from).min(PREVIEW);
                t.preview[..take].copy_from_slice(&b[from..from + take]);
                t.plen = take as u8;
                t.ptrunc = i - from > take;
                continue;
            }
            let mut all = self.build.all;
            let mut core = self.build.core;
            let mut has_core = self.build.has_core;
            let (end, letters) = scan_ascii(b, i, &mut all, &mut core, &mut has_core);
            i = end;
            let t = &mut self.build;
            t.all = all;
            t.core = core;
            t.has_core = has_core;
            t.letters = t.letters.saturating_add(letters);
            let plen = t.plen as usize;
            let take = (i - from).min(PREVIEW - plen);
            t.preview[plen..plen + take].copy_from_slice(&b[from..from + take]);
            t.plen = (plen + take) as u8;
            if i - from > take {
                t.ptrunc = true;
            }
        }
        None
    }

    #[inline]
    fn tok(&self, t: usize) -> &Tok {
        &self.ring[t & self.mask]
    }

    /// Feeds character `c` (of `len` bytes) found at byte offset `pos`.
    #[inline(always)]
    pub(crate) fn push(&mut self, c: char, pos: usize, len: usize, lines: &mut LineCtx<'_>) {
        if c.is_ascii() {
            self.push_ascii(c as u8, pos, lines);
            return;
        }
        self.push_general(c, pos, len, lines);
    }

    /// [`Words::push`] for any character (the ASCII path's reference).
    #[inline]
    fn push_general(&mut self, c: char, pos: usize, len: usize, lines: &mut LineCtx<'_>) {
        if c.is_whitespace() {
            if self.build.active {
                self.finalize(pos, lines);
            }
            self.nl |= c == '\n';
            return;
        }
        let cjk = self.split_cjk && is_cjk(c);
        if cjk && self.build.active {
            self.finalize(pos, lines);
        }
        let b = &mut self.build;
        if !b.active {
            b.start_at(pos);
        }
        if c.is_alphabetic() {
            b.letters = b.letters.saturating_add(1);
        }
        if cjk {
            // A CJK character is a whole word: count it as one.
            b.letters = b.letters.max(self.min_word_letters);
        }
        // The preview holds the character's UTF-8, whose length differs
        // from `len` for the U+FFFD of an invalid sequence.
        let mut buf = [0u8; 4];
        let enc = c.encode_utf8(&mut buf).as_bytes();
        let plen = b.plen as usize;
        match b.preview.get_mut(plen..plen + enc.len()) {
            Some(dst) => {
                dst.copy_from_slice(enc);
                b.plen += enc.len() as u8;
            }
            None => b.ptrunc = true,
        }
        // Hash in a local copy: reading back fields just stored stalls.
        let mut all = b.all;
        fold_char(c, |l| all.push(l));
        b.all = all;
        if !is_trailing_punct(c) {
            b.core = all;
            b.has_core = true;
        }
        if cjk {
            self.finalize(pos + len, lines);
        } else if self.armed && self.track_partial {
            self.check_partial(pos + len, lines);
        } else {
            self.partial = None;
        }
    }

    /// [`Words::push`] for an ASCII character (one byte): the same steps
    /// with the Unicode tables and the UTF-8 encoding left out (ASCII is
    /// never CJK, folds to its ASCII lowercase, and is alphabetic, white
    /// space or trailing punctuation exactly as tested below).
    #[inline(always)]
    fn push_ascii(&mut self, c: u8, pos: usize, lines: &mut LineCtx<'_>) {
        // `char::is_whitespace` on ASCII: U+0009..=U+000D and U+0020.
        if is_ascii_ws(c) {
            if self.build.active {
                self.finalize(pos, lines);
            }
            self.nl |= c == b'\n';
            return;
        }
        let b = &mut self.build;
        if !b.active {
            b.start_at(pos);
        }
        b.push_ascii(c);
        if self.armed && self.track_partial {
            self.check_partial(pos + 1, lines);
        } else {
            self.partial = None;
        }
    }

    /// Ends the detector's input at `pos`: the token being read becomes
    /// final. Behind the sieve a region ends this way mid-text; the end
    /// of the text itself is [`Words::end_text`].
    pub(crate) fn finish(&mut self, pos: usize, lines: &mut LineCtx<'_>) {
        if self.build.active {
            self.finalize(pos, lines);
        }
        self.partial = None;
    }

    #[inline]
    fn is_connector(&self, key: u64, folded_bytes: u64) -> bool {
        self.connectors.contains(key, folded_bytes)
    }

    /// Start, kept end and kept token count of a run of period `p` whose
    /// first matching token is `a`: the loop starts at token `a - p` and
    /// one copy (tokens `a-p..a`) is kept, minus dangling connectors.
    fn run_info(&self, a: usize, p: usize) -> Run {
        let i = a - p;
        let mut t = a;
        while t > i && self.tok(t - 1).connector {
            t -= 1;
        }
        let keep = if t > i {
            self.tok(t - 1).end
        } else {
            self.tok(i).prev_end
        };
        Run {
            len: 0,
            start: self.tok(i).start,
            keep,
            keep_tokens: (t + self.token_base) as u64,
            accepted: false,
        }
    }

    fn finalize(&mut self, end: usize, lines: &mut LineCtx<'_>) {
        self.build.active = false;
        let b = &self.build;
        let fin = Fin {
            key: b.key(self.ignore_punct),
            start: b.start,
            end,
            word: b.letters >= self.min_word_letters,
            folded_len: b.all.len(),
            preview: b.preview,
            plen: b.plen,
            ptrunc: b.ptrunc,
        };
        self.finish_token(fin, lines);
    }
}

/// A finished token, as [`Words::finish_token`] takes it.
struct Fin {
    key: u64,
    start: usize,
    end: usize,
    word: bool,
    /// Bytes of its case fold (for the connector lookup).
    folded_len: u64,
    preview: [u8; PREVIEW],
    plen: u8,
    ptrunc: bool,
}
