//! The word detector's pre-filter for batch scans: a cheap pass over the
//! tokens that proves most of a healthy text loop-free, so the exact
//! detector ([`Words`]) reads only regions around possible loops.
//!
//! # What the sieve computes per token
//!
//! * A **sieve key**: the bytes of the token's case fold up to its last
//!   character that is not trailing punctuation (none when all of it is),
//!   each OR-ed with `0x20`, summed eight at a time with a multiplier per
//!   word. ASCII words of up to eight bytes take one load and a mask. It
//!   is a function of the string the exact key hashes, so two tokens with
//!   equal exact keys have equal sieve keys (the converse need not hold:
//!   the sieve only ever errs towards "maybe").
//! * Whether its **shingle** (the last [`SHINGLE`] sieve keys, as a
//!   rolling hash) occurred among the shingles of the tokens before it,
//!   as far back as the longest period (short or long): a counting filter
//!   over a sliding window, where a count of zero proves absence.
//!
//! A run of `L` exact matches at any distance `d` within the window
//! repeats, `d` tokens back, the shingles of its last `L - 7` tokens: a
//! streak of seen shingles that long.
//!
//! # Flags and quiet tokens
//!
//! A token **flags** when the streak reaches 7 less than the fewest
//! matches any loop needs, the smaller of `min_run` and
//! the matches a long period of `max_period + 1` needs (a configuration whose loops
//! can need fewer than 8 matches is not sieved at all). At the end of the
//! text the tail rule may need fewer (`words.tail_last_copy_percent`, and
//! a last token cut off mid-word counts without matching): the fewest
//! counts those too ([`Periods::long_fewest`]). Until the first flag, the
//! exact detector cannot report anything.
//!
//! A token `q` is **quiet** when its sieve key differs from those of the
//! `max_period` tokens before it and its shingle was not seen. After a
//! quiet token the exact detector has no short run (no match) and no long
//! run: a long run going on at `q` was adopted on a whole repeated shingle
//! and matched every token since, so the shingle ending at `q` repeats too
//! (and a new adoption at `q` needs that shingle in its table). Its other
//! state (the shingle table's live entries, the last tokens) depends only
//! on the last `long_max_period + 8` tokens, because the table has a fixed
//! size and a stale entry (further back than `long_max_period`) acts as an
//! empty one.
//!
//! So a fresh exact detector started `long_max_period + 8` tokens before a
//! quiet token is, from that token on, in the state of one that read the
//! whole text, and it stays so, provided nothing between its start and
//! that token could fire. On a flag, the scan looks back for the last
//! quiet token, reads on (sieve only) to the next quiet token, and runs a
//! fresh exact detector over that region. A region that would start
//! inside the previous one goes on with the previous region's detector
//! instead (a fresh one could see a loop there that the whole-text scan
//! does not). When a region's detector reports a loop, the scan reads on
//! exactly, as the plain scan would, until the verdict is settled.
//!
//! The tests compare this scan with the exact detector reading every
//! token, and check the sieve's tokens and keys against the exact rules.

use crate::repetition::substring::Candidate;
use crate::repetition::text::fold::fold_char;
use crate::repetition::text::healthy::{is_cjk, is_trailing_punct, LineCtx, Lines, Src};
use crate::repetition::text::swar;
use crate::repetition::words::{is_ascii_ws, Periods, Stop, Words, ROLL, SHINGLE, W};
use crate::repetition::ClampConfig;

/// Multiplier of the `k`-th eight bytes of a sieve key (its `k`-th power).
const WORD_MUL: u64 = 0xff51_afd7_ed55_8ccd;
/// OR-ed into every byte of a sieve key (ASCII letters to lowercase).
const LOW: u64 = 0x2020_2020_2020_2020;

/// ASCII trailing punctuation `. , ; : ! ?` (as `is_trailing_punct`).
#[inline(always)]
fn is_punct(b: u8) -> bool {
    matches!(b, b'.' | b',' | b';' | b':' | b'!' | b'?')
}

/// The sieve key of a string built byte by byte (the general path): the
/// same function as the ASCII path computes eight bytes at a time.
#[derive(Debug, Clone, Copy)]
struct KeyAcc {
    acc: u64,
    buf: u64,
    n: u32,
    mul: u64,
}

impl Default for KeyAcc {
    fn default() -> Self {
        KeyAcc {
            acc: 0,
            buf: 0,
            n: 0,
            mul: 1,
        }
    }
}

impl KeyAcc {
    #[inline]
    fn push(&mut self, b: u8) {
        self.buf |= u64::from(b | 0x20) << (8 * self.n);
        self.n += 1;
        if self.n == 8 {
            self.acc = self.acc.wrapping_add(self.buf.wrapping_mul(self.mul));
            self.mul = self.mul.wrapping_mul(WORD_MUL);
            self.buf = 0;
            self.n = 0;
        }
    }

    #[inline]
    fn value(&self) -> u64 {
        self.acc.wrapping_add(self.buf.wrapping_mul(self.mul))
    }
}

/// What [`Sieve::run`] stops at: a token that flags, or a quiet token.
const FLAG: u8 = 1;
const QUIET: u8 = 2;

/// The settings the sieve reads on every token.
#[derive(Debug, Clone)]
struct Fixed {
    /// Largest short period.
    max_p: usize,
    /// Shingles seen in a row that flag.
    streak_flag: usize,
    roll_pow: u64,
    /// The bucket is the top bits of the rolling shingle hash.
    shift: u32,
    lookback: usize,
    split_cjk: bool,
}

/// The state that changes on every token (kept in registers while
/// [`Sieve::run`] reads).
#[derive(Debug, Clone, Copy, Default)]
struct Hot {
    roll: u64,
    /// Tokens in a row whose shingle was seen in the window.
    streak: usize,
    /// Tokens read.
    j: usize,
}

/// The sieve's tables.
#[derive(Debug, Clone)]
struct Tables {
    /// Sieve keys of the last tokens (a ring).
    keys: Vec<u64>,
    /// Start offsets of the last tokens, shifted left by one, with the
    /// low bit set when the token's shingle was seen in the window.
    starts: Vec<usize>,
    /// Stream offset of the text [`Sieve::run`] reads.
    base: usize,
    /// Shingles per bucket among the last `window.len() - 1` tokens.
    count: Vec<u16>,
    window: Vec<u16>,
    /// Every token's start and sieve key (tests only).
    #[cfg(test)]
    trace: Vec<(usize, u64)>,
}

/// A sieve's settings and table sizes, before its tables exist.
#[derive(Debug, Clone)]
struct Plan {
    fixed: Fixed,
    ring: usize,
    buckets: usize,
    win: usize,
}

/// The pre-filter's state (see the module docs).
#[derive(Debug, Clone)]
struct Sieve {
    fixed: Fixed,
    hot: Hot,
    tables: Tables,
}

impl Sieve {
    /// The settings and table sizes for `config`, or `None` when a loop
    /// could complete without an eight-token shingle repeating (a
    /// threshold below [`SHINGLE`]); the exact detector then reads
    /// everything.
    fn plan(config: &ClampConfig) -> Option<Plan> {
        let p = Periods::of(config);
        let short_min = p.thr[..p.max_p].iter().copied().min().unwrap_or(u32::MAX) as usize;
        let long_min = if p.long_max > 0 {
            p.long_fewest(p.max_p + 1)
        } else {
            usize::MAX
        };
        let fewest = short_min.min(long_min);
        if fewest < SHINGLE {
            return None;
        }
        let streak_flag = (fewest - (SHINGLE - 1)).max(1);
        // The window holds the shingles of the `win - 1` tokens before the
        // current one: every distance, short or long.
        let reach = p.long_max.max(p.max_p);
        let win = (reach + 1).next_power_of_two();
        let buckets = (8 * win).max(1 << 11);
        let lookback = if p.long_max > 0 {
            p.long_max + SHINGLE
        } else {
            W
        };
        let ring = (lookback + 512).next_power_of_two();
        let mut roll_pow = 1u64;
        for _ in 0..SHINGLE {
            roll_pow = roll_pow.wrapping_mul(ROLL);
        }
        Some(Plan {
            fixed: Fixed {
                max_p: p.max_p,
                streak_flag,
                roll_pow,
                shift: 64 - buckets.trailing_zeros(),
                lookback,
                split_cjk: config.words.split_cjk,
            },
            ring,
            buckets,
            win,
        })
    }

    /// A sieve with fresh tables.
    fn new(config: &ClampConfig) -> Option<Self> {
        Self::plan(config).map(Self::from_plan)
    }

    fn from_plan(plan: Plan) -> Self {
        Sieve {
            fixed: plan.fixed,
            hot: Hot::default(),
            tables: Tables {
                keys: vec![0; plan.ring],
                starts: vec![0; plan.ring],
                count: vec![0; plan.buckets],
                window: vec![0; plan.win],
                base: 0,
                #[cfg(test)]
                trace: Vec::new(),
            },
        }
    }

    /// Where a fresh exact detector may start, as (byte offset, token
    /// index): `lookback` tokens before the last quiet token, or the
    /// text's start; `None` when no quiet token is within reach.
    fn restart(&self) -> Option<(usize, usize)> {
        self.restart_since(0)
    }

    /// [`Sieve::restart`] for a quiet token among the tokens from index
    /// `since` on.
    fn restart_since(&self, since: usize) -> Option<(usize, usize)> {
        let f = &self.fixed;
        let t = &self.tables;
        let j = self.hot.j;
        let ring = t.keys.len();
        let oldest = (j + f.lookback).saturating_sub(ring).max(since);
        let mut q = j;
        while q > oldest {
            q -= 1;
            if quiet(f, t, q) {
                return Some(match q.checked_sub(f.lookback) {
                    Some(s) => (t.starts[s & (ring - 1)] >> 1, s),
                    None => (0, 0),
                });
            }
        }
        None
    }

    /// Reads tokens from byte `*i` of `s` until one that flags (`WANT`
    /// is [`FLAG`]) or is quiet ([`QUIET`]): returns the byte offset
    /// where that token ends (`*i` is then at or past it), or `None` at
    /// the end of `s`.
    fn run<const WANT: u8>(&mut self, s: &str, i: &mut usize) -> Option<usize> {
        let b = s.as_bytes();
        let n = b.len();
        let f = &self.fixed;
        let t = &mut self.tables;
        let mut h = self.hot;
        let mut p = *i;
        let found = loop {
            if p >= n {
                break None;
            }
            let mut x = load(b, p);
            let mut stop = swar::stop(x);
            if stop & 0x80 != 0 {
                if b[p] < 0x80 {
                    // White space (eight bytes at most per step).
                    p += ((!swar::ws(x) & swar::HI).trailing_zeros() / 8) as usize;
                    continue;
                }
                match general::<WANT>(f, &mut h, t, s, &mut p) {
                    Some(e) => break Some(e),
                    None => continue,
                }
            }
            let start = p;
            let mut acc = 0u64;
            let mut mul = 1u64;
            while stop == 0 {
                acc = acc.wrapping_add((x | LOW).wrapping_mul(mul));
                mul = mul.wrapping_mul(WORD_MUL);
                p += 8;
                x = load(b, p);
                stop = swar::stop(x);
            }
            let k = (stop.trailing_zeros() / 8) as usize;
            let end = p + k;
            if end < n && b[end] >= 0x80 {
                // The token goes on with a character that is not ASCII.
                p = start;
                match general::<WANT>(f, &mut h, t, s, &mut p) {
                    Some(e) => break Some(e),
                    None => continue,
                }
            }
            // The key's bytes in the last eight: the token's, minus one
            // trailing punctuation byte; other shapes byte by byte.
            let core = if !is_punct(b[end - 1]) {
                Some(k)
            } else if k >= 2 && !is_punct(b[end - 2]) {
                Some(k - 1)
            } else {
                None
            };
            let key = match core {
                Some(c) => {
                    acc.wrapping_add(((x | LOW) & ((1u64 << (8 * c)) - 1)).wrapping_mul(mul))
                }
                None => ascii_key(&b[start..end]),
            };
            // `b[end]` is white space (or past the end): skip it.
            p = end + 1;
            if hit::<WANT>(f, &mut h, t, key, start) {
                break Some(end);
            }
        };
        self.hot = h;
        *i = p;
        found
    }
}

/// Takes a token and tells whether [`Sieve::run`] stops after it.
#[inline(always)]
fn hit<const WANT: u8>(f: &Fixed, h: &mut Hot, t: &mut Tables, key: u64, start: usize) -> bool {
    let flag = token(f, h, t, key, start);
    if WANT == FLAG {
        flag
    } else {
        quiet(f, t, h.j - 1)
    }
}

/// Is token `q` (still in the ring) quiet: its shingle unseen in the
/// window, and its sieve key unlike those of the `max_period` tokens
/// before it?
fn quiet(f: &Fixed, t: &Tables, q: usize) -> bool {
    let mask = t.keys.len() - 1;
    if t.starts[q & mask] & 1 != 0 {
        return false;
    }
    let key = t.keys[q & mask];
    (1..=f.max_p.min(q)).all(|p| t.keys[(q - p) & mask] != key)
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

/// The sieve key of an ASCII token, byte by byte (the rare shapes the
/// eight-byte path leaves out).
fn ascii_key(tok: &[u8]) -> u64 {
    let core = tok.iter().rposition(|&c| !is_punct(c)).map_or(0, |i| i + 1);
    let mut k = KeyAcc::default();
    for &c in &tok[..core] {
        k.push(c);
    }
    k.value()
}

/// Takes one token: its sieve key and where it starts. Returns whether
/// it flags.
#[inline(always)]
fn token(f: &Fixed, h: &mut Hot, t: &mut Tables, key: u64, start: usize) -> bool {
    #[cfg(test)]
    t.trace.push((t.base + start, key));
    let j = h.j;
    h.j = j + 1;
    let mask = t.keys.len() - 1;
    // The ring starts zeroed, so the key "8 tokens before" the first
    // ones is 0 and the hash holds only real keys.
    let old = t.keys[j.wrapping_sub(SHINGLE) & mask];
    t.keys[j & mask] = key;
    h.roll = h
        .roll
        .wrapping_mul(ROLL)
        .wrapping_add(key)
        .wrapping_sub(old.wrapping_mul(f.roll_pow));
    let mut seen = false;
    if j + 1 >= SHINGLE {
        let wmask = t.window.len() - 1;
        if j >= t.window.len() + SHINGLE - 1 {
            let gone = t.window[j & wmask] as usize;
            t.count[gone] -= 1;
        }
        // The top bits of the rolling hash depend on every key in it.
        let b = (h.roll >> f.shift) as usize;
        seen = t.count[b] != 0;
        t.count[b] += 1;
        t.window[j & wmask] = b as u16;
    }
    t.starts[j & mask] = (t.base + start) << 1 | usize::from(seen);
    h.streak = if seen { h.streak + 1 } else { 0 };
    h.streak >= f.streak_flag
}

/// Reads the tokens of the span from `*i` to the next ASCII white space
/// (or the end) character by character, with the exact detector's rules
/// (Unicode white space, CJK characters as tokens). Stops after a token
/// [`hit`] stops at, returning where it ends.
fn general<const WANT: u8>(
    f: &Fixed,
    h: &mut Hot,
    t: &mut Tables,
    s: &str,
    i: &mut usize,
) -> Option<usize> {
    let b = s.as_bytes();
    let mut end = *i;
    while end < b.len() && !is_ascii_ws(b[end]) {
        end += 1;
    }
    let mut active: Option<usize> = None;
    let mut all = KeyAcc::default();
    let mut core = all;
    let base = *i;
    for (k, c) in s[base..end].char_indices() {
        let pos = base + k;
        let cjk = f.split_cjk && is_cjk(c);
        if c.is_whitespace() || cjk {
            if let Some(start) = active.take() {
                if hit::<WANT>(f, h, t, core.value(), start) {
                    *i = pos;
                    return Some(pos);
                }
            }
            if c.is_whitespace() {
                continue;
            }
        }
        if active.is_none() {
            active = Some(pos);
            all = KeyAcc::default();
            core = all;
        }
        let mut enc = [0u8; 4];
        fold_char(c, |l| {
            for &x in l.encode_utf8(&mut enc).as_bytes() {
                all.push(x);
            }
        });
        if !is_trailing_punct(c) {
            core = all;
        }
        if cjk {
            let start = active.take().unwrap_or(pos);
            let after = pos + c.len_utf8();
            if hit::<WANT>(f, h, t, core.value(), start) {
                *i = after;
                return Some(after);
            }
        }
    }
    *i = end;
    if let Some(start) = active {
        if hit::<WANT>(f, h, t, core.value(), start) {
            return Some(end);
        }
    }
    None
}

/// The word detector's batch verdict on `text` (the leftmost loop, as
/// [`Words`] reading every token finds it), with the sieve in front.
pub(crate) fn scan_words(
    text: &str,
    config: &ClampConfig,
    lx: &mut LineCtx<'_>,
) -> Option<Candidate> {
    let sieve = if text.len() >= sieve_min() {
        Sieve::new(config)
    } else {
        None
    };
    let Some(mut sieve) = sieve else {
        let mut w = Words::new(config, false);
        return exact_from(&mut w, text, 0, lx);
    };
    let mut i = 0;
    // The last region's detector, in step with a whole-text scan up to
    // where the region ended.
    let mut last: Option<(Words, usize)> = None;
    loop {
        sieve.run::<FLAG>(text, &mut i)?;
        let (mut from, first) = sieve.restart().unwrap_or((0, 0));
        // A fresh detector must not start inside the last region (it
        // could see a loop there that the whole-text scan does not): go
        // on with that region's detector instead.
        let mut w = match last.take() {
            Some((w, end)) if from < end => {
                from = end;
                w
            }
            _ => Words::starting_at(config, false, first),
        };
        // The region runs to the next quiet token. The sieve looks for it
        // a window at a time, so a loop that goes on to the end of the
        // text is settled by the exact detector without the sieve reading
        // all of it first.
        loop {
            let lim = window_end(text, i);
            let quiet = sieve.run::<QUIET>(&text[..lim], &mut i);
            let upto = quiet.unwrap_or(lim).max(from);
            if w.feed(&text[from..upto], from, lx, Stop::Settled).is_some() {
                return w.best;
            }
            from = upto;
            if w.best.is_some() {
                if quiet.is_some() && upto < text.len() {
                    w.finish(upto, lx);
                }
                return exact_from(&mut w, text, upto, lx);
            }
            if let Some(q) = quiet {
                if q == text.len() {
                    // The quiet token is the text's last: the text ends
                    // here (the tail rule may fire on a token cut off
                    // mid-word).
                    w.end_text(q, lx);
                    return w.best;
                }
                w.finish(q, lx);
                if w.best.is_some() {
                    return exact_from(&mut w, text, q, lx);
                }
                last = Some((w, q));
                break;
            }
            if lim >= text.len() {
                w.end_text(text.len(), lx);
                return w.best;
            }
        }
    }
}

/// Texts shorter than this skip the sieve (its tables cost more to set
/// up than the exact detector spends on them). The tests sieve every
/// text, however short, to exercise the sieve.
fn sieve_min() -> usize {
    if cfg!(test) {
        0
    } else {
        4096
    }
}

/// Where the sieve's next look for a quiet token ends: just after an
/// ASCII white space byte about 64 KiB past `i` (so no token is cut), or
/// the end of the text.
fn window_end(text: &str, i: usize) -> usize {
    const WINDOW: usize = 64 * 1024;
    let b = text.as_bytes();
    let mut k = i.saturating_add(WINDOW);
    while k < b.len() {
        if is_ascii_ws(b[k]) {
            return k + 1;
        }
        k += 1;
    }
    b.len()
}

/// History kept for restarts beyond which the stream is read exactly for
/// good (a stretch with no quiet token, or no token boundary, this long).
const STREAM_CAP: usize = 256 * 1024;

/// Streams shorter than this are read by the exact detector alone (the
/// sieve's tables cost more to set up than it saves); the tests start
/// the sieve early, so both phases and the switch are exercised.
const STREAM_MIN: usize = if cfg!(test) { 100 } else { 4096 };

/// The sieve in front of the streaming word detector.
///
/// The stream's text is kept from the last restart point on. The sieve
/// reads complete tokens only (up to the last white space or CJK
/// character seen). While no exact detector runs, it flags one match
/// earlier than in batch mode, so an exact detector is running before any
/// token in which a loop could complete, partially read or not; the
/// exact detector is started at the restart point and catches up on the
/// history. A stretch without a restart point or token boundary longer
/// than [`STREAM_CAP`] ends the sieve: the exact detector then reads the
/// rest of the stream.
#[derive(Debug, Clone)]
pub(crate) struct SieveStream {
    plan: Plan,
    /// The sieve, once the stream is long enough ([`STREAM_MIN`]): it
    /// starts at a token boundary, `t0` tokens into the stream, and the
    /// exact detector that reads the stream from its start runs on until
    /// the sieve has read `warm` tokens (its window is then full).
    sieve: Option<Sieve>,
    t0: usize,
    warm: usize,
    /// A fresh exact detector, cloned for each region.
    proto: Words,
    /// The stream from `base` to the engine's position.
    hist: String,
    base: usize,
    /// The sieve has read the tokens before this offset.
    sieved: usize,
    /// The last token boundary seen: every token before it is complete.
    cut: usize,
    /// Where an exact detector may start (offset, token index).
    anchor: (usize, usize),
    /// Tokens the anchor search has looked at.
    anchored: usize,
    /// While an exact detector runs: where it started (a bound for
    /// [`SieveStream::settled`]).
    region_from: usize,
    /// The last region's detector and its position.
    last: Option<(Words, usize)>,
}

impl SieveStream {
    /// `None` when the configuration cannot be sieved in a stream.
    pub(crate) fn new(config: &ClampConfig, first: &Words) -> Option<Self> {
        let mut plan = Sieve::plan(config)?;
        // A loop can complete inside the token being read: flag one
        // match earlier.
        if plan.fixed.streak_flag < 2 {
            return None;
        }
        plan.fixed.streak_flag -= 1;
        let warm = plan.win + plan.fixed.lookback + SHINGLE;
        Some(SieveStream {
            plan,
            sieve: None,
            t0: 0,
            warm,
            proto: first.clone(),
            hist: String::new(),
            base: 0,
            sieved: 0,
            cut: 0,
            anchor: (0, 0),
            anchored: 0,
            region_from: 0,
            last: None,
        })
    }

    /// Takes the next text `s` (at stream offset `base`), after `words`
    /// (the exact detector, if one runs) has read it. Reads the complete
    /// tokens with the sieve, starting and stopping exact detectors, and
    /// returns the end of the first prefix with a verdict when a started
    /// detector finds one while catching up. `past_min`: the stream has
    /// enough characters for the word guard.
    pub(crate) fn advance(
        &mut self,
        s: &str,
        base: usize,
        words: &mut Option<Words>,
        lines: &mut Lines,
        past_min: bool,
    ) -> Option<usize> {
        let end = base + s.len();
        let split_cjk = self.plan.fixed.split_cjk;
        let Some((i, c)) = s
            .char_indices()
            .rev()
            .find(|&(_, c)| c.is_whitespace() || (split_cjk && is_cjk(c)))
        else {
            return self.read(end, words, lines, past_min, false);
        };
        self.cut = base + i + c.len_utf8();
        if self.sieve.is_none() {
            // Start the sieve at this boundary once the stream is long
            // enough: the exact detector has read every token before it.
            let w = words.as_ref().filter(|_| end >= STREAM_MIN)?;
            self.sieve = Some(Sieve::from_plan(self.plan.clone()));
            self.t0 = w.tokens_read();
            // From here on the line tracker is read lazily from the
            // history, which starts at the boundary.
            lines.advance(s.as_bytes(), base, self.cut);
            self.hist = s[self.cut - base..].to_string();
            self.base = self.cut;
            self.sieved = self.cut;
            self.anchor = (self.cut, self.t0);
            self.anchored = self.warm;
            return None;
        }
        self.read(end, words, lines, past_min, false)
    }

    /// The sieve's loop over `sieved..cut`; `end` is the engine's
    /// position. With `at_end`, a detector that starts reads to the end
    /// without stopping at a verdict (the stream is finishing).
    fn read(
        &mut self,
        end: usize,
        words: &mut Option<Words>,
        lines: &mut Lines,
        past_min: bool,
        at_end: bool,
    ) -> Option<usize> {
        self.sieve.as_ref()?;
        while self.sieved < self.cut {
            let Some(sieve) = self.sieve.as_mut() else {
                break;
            };
            let text = &self.hist[self.sieved - self.base..self.cut - self.base];
            sieve.tables.base = self.sieved;
            let mut i = 0;
            if words.is_some() {
                let hit = sieve.run::<QUIET>(text, &mut i);
                self.sieved = (self.sieved + i).min(self.cut);
                if hit.is_none() {
                    break;
                }
                if past_min && sieve.hot.j > self.warm {
                    // In step with the whole-stream detector again.
                    self.last = words.take().map(|w| (w, end));
                    self.anchored = sieve.hot.j - 1;
                    if let Some((at, t)) = sieve.restart() {
                        self.anchor = (at, self.t0 + t);
                    }
                }
                continue;
            }
            let hit = sieve.run::<FLAG>(text, &mut i);
            self.sieved = (self.sieved + i).min(self.cut);
            if hit.is_none() {
                break;
            }
            if let Some(at) = self.start_exact(end, words, lines, at_end) {
                return Some(at);
            }
        }
        if words.is_none() {
            self.find_anchor();
            lines.advance(self.hist.as_bytes(), self.base, self.sieved);
        }
        self.trim(lines);
        None
    }

    /// Starts an exact detector at the last restart point (or goes on with
    /// the last region's) and catches it up to `end`.
    fn start_exact(
        &mut self,
        end: usize,
        words: &mut Option<Words>,
        lines: &mut Lines,
        at_end: bool,
    ) -> Option<usize> {
        self.find_anchor();
        let (from, first) = self.anchor;
        let (mut w, from) = match self.last.take() {
            Some((w, at)) if from < at => (w, at),
            _ => (self.proto.clone().at_token(first), from),
        };
        self.region_from = self.anchor.0;
        let mut lx = LineCtx {
            lines,
            src: self.src(),
        };
        let stop = if at_end { Stop::Never } else { Stop::Verdict };
        let fired = w
            .feed(
                &self.hist[from - self.base..end - self.base],
                from,
                &mut lx,
                stop,
            )
            .map(|k| from + k);
        *words = Some(w);
        fired
    }

    /// Moves the anchor to the last quiet token read since the last look.
    fn find_anchor(&mut self) {
        let Some(sieve) = &self.sieve else {
            return;
        };
        let j = sieve.hot.j;
        if j > self.anchored {
            if let Some((at, t)) = sieve.restart_since(self.anchored) {
                self.anchor = (at, self.t0 + t);
            }
            self.anchored = j;
        }
    }

    /// Drops history no restart can need.
    fn trim(&mut self, lines: &Lines) {
        let mut need = self.anchor.0;
        if let Some((_, at)) = &self.last {
            need = need.max(*at);
        }
        let need = need.min(lines.done()).min(self.sieved);
        if need > self.base + 4096 && need - self.base > self.hist.len() / 2 {
            let mut k = need - self.base;
            while !self.hist.is_char_boundary(k) {
                k -= 1;
            }
            self.hist.drain(..k);
            self.base += k;
        }
    }

    /// True when the history outgrew [`STREAM_CAP`]: the caller then
    /// reads exactly for good ([`SieveStream::into_exact`]).
    pub(crate) fn over_cap(&self) -> bool {
        self.hist.len() > STREAM_CAP
    }

    /// Ends the sieve: an exact detector caught up to `end` (the engine's
    /// position), with the line tracker caught up too.
    pub(crate) fn into_exact(mut self, end: usize, words: &mut Option<Words>, lines: &mut Lines) {
        if words.is_none() {
            // Nothing can fire before the next flag: catching up finds no
            // verdict.
            self.start_exact(end, words, lines, true);
        }
        lines.advance(self.hist.as_bytes(), self.base, end);
    }

    /// True once the sieve reads the stream (before, the exact detector
    /// reads it alone and the engine keeps the line tracker).
    pub(crate) fn started(&self) -> bool {
        self.sieve.is_some()
    }

    /// The stream ends at `end`: the last token is complete, so the sieve
    /// reads it (an exact detector may start on it). The caller then ends
    /// the exact detector, if one runs, reading lines from [`Self::src`].
    /// A detector parked on the last token (a quiet one) is handed back:
    /// it read the whole stream in step with a whole-stream detector, and
    /// the tail rule ([`Words::end_text`]) looks at the run before a last
    /// token cut off mid-word.
    pub(crate) fn read_to_end(&mut self, end: usize, words: &mut Option<Words>, lines: &mut Lines) {
        self.cut = end;
        self.read(end, words, lines, true, true);
        if words.is_none() && self.last.as_ref().is_some_and(|(_, at)| *at == end) {
            *words = self.last.take().map(|(w, _)| w);
        }
    }

    /// Text the exact detector reads through the line tracker while it
    /// runs (the history, from the tracker's position on).
    pub(crate) fn src(&self) -> Src<'_> {
        Src {
            bytes: self.hist.as_bytes(),
            base: self.base,
        }
    }

    /// Appends the next text to the history (kept once the sieve runs).
    pub(crate) fn push(&mut self, s: &str) {
        if self.sieve.is_some() {
            self.hist.push_str(s);
        }
    }

    /// A byte offset no future word cut can fall before: a loop found
    /// later starts after the last quiet token, at most
    /// `long_max_period` tokens before the next one (see the module docs).
    pub(crate) fn settled(&self, words: Option<&Words>) -> usize {
        match words {
            Some(w) if self.sieve.is_none() => w.settled(),
            Some(w) => self.region_from.max(w.settled()),
            None => self.anchor.0,
        }
    }
}

/// Reads `text[from..]` with `w` until its verdict is settled.
fn exact_from(w: &mut Words, text: &str, from: usize, lx: &mut LineCtx<'_>) -> Option<Candidate> {
    if w.feed(&text[from..], from, lx, Stop::Settled).is_none() {
        w.end_text(text.len(), lx);
    }
    w.best.take()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repetition::text::healthy::{Lines, Src};
    use proptest::prelude::*;

    /// `scan` over the whole of `text`, with a fresh line tracker.
    fn with_lines<R>(text: &str, scan: impl FnOnce(&mut LineCtx<'_>) -> R) -> R {
        let mut lines = Lines::default();
        let mut lx = LineCtx {
            lines: &mut lines,
            src: Src {
                bytes: text.as_bytes(),
                base: 0,
            },
        };
        scan(&mut lx)
    }

    fn plain(text: &str, config: &ClampConfig) -> Option<Candidate> {
        with_lines(text, |lx| {
            exact_from(&mut Words::new(config, false), text, 0, lx)
        })
    }

    fn sieved(text: &str, config: &ClampConfig) -> Option<Candidate> {
        with_lines(text, |lx| scan_words(text, config, lx))
    }

    /// Spellings with equal exact keys (case, trailing punctuation,
    /// folds to ASCII), so a loop can change spelling from copy to copy.
    const VARIANTS: [&[&str]; 6] = [
        &["de", "De,", "DE…", "de.", "dE;"],
        &["straße", "STRASSE", "Strasse!"],
        &["so", "ſo", "SO?"],
        &["σοφος", "ΣΟΦΟΣ", "σοφοσ"],
        &["高", "高。"],
        &["the", "The", "THE:"],
    ];

    /// Long texts: filler with a large vocabulary (many quiet tokens)
    /// around loops of every period up to 300 tokens, near-loops one
    /// copy short, spelling variants, CJK, Unicode white space and
    /// structure.
    fn text() -> impl Strategy<Value = String> {
        let filler = (1..400usize, any::<u64>()).prop_map(|(n, seed)| {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut out = String::new();
            for _ in 0..n {
                let x = rng.u64(..);
                match x % 16 {
                    0 => out.push_str("the "),
                    1 => out.push_str("of "),
                    2 => out.push_str("é高 "),
                    3 => out.push_str("x\u{a0}y "),
                    _ => out.push_str(&format!("v{} ", x % 5000)),
                }
            }
            out
        });
        // A part of one more copy (`extra` per mille of it, cut inside a
        // word or not): a long tail when the piece ends the text.
        let unit = (
            1..300usize,
            1..5usize,
            any::<u64>(),
            any::<bool>(),
            0..1000usize,
        )
            .prop_map(|(k, times, seed, vary, extra)| {
                let mut out = String::new();
                let mut last = 0;
                for copy in 0..=times {
                    if copy == times {
                        last = out.len();
                    }
                    let mut rng = fastrand::Rng::with_seed(seed);
                    for t in 0..k {
                        let x = rng.u64(..);
                        let v = VARIANTS[(x >> 8) as usize % VARIANTS.len()];
                        if x.is_multiple_of(3) {
                            let pick = if vary { (copy + t) % v.len() } else { 0 };
                            out.push_str(v[pick]);
                        } else {
                            out.push_str(&format!("u{}", x % 997));
                        }
                        out.push(if t % 11 == 10 { '\n' } else { ' ' });
                    }
                }
                let mut end = last + (out.len() - last) * extra / 1000;
                while !out.is_char_boundary(end) {
                    end -= 1;
                }
                out.truncate(end);
                out
            });
        // Short loops of variant spellings only.
        let spelled = (1..4usize, 10..40usize, any::<u64>()).prop_map(|(k, times, seed)| {
            let mut out = String::new();
            for copy in 0..times {
                for t in 0..k {
                    let v = VARIANTS[(seed as usize + t) % VARIANTS.len()];
                    // No period in the spellings either.
                    let h = (seed ^ (copy * 31 + t) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    out.push_str(v[(h >> 60) as usize % v.len()]);
                    out.push(' ');
                }
            }
            out
        });
        let structure = prop::sample::select(vec![
            "\n```\n",
            "\n| a | a | a | a | a | a | a | a | a | a | a | a | a | a | a | a | a | a | a |\n",
            "\n",
            ". . . . . . . . . . . . . . . . . . . . . . . . . .",
            "高高高高高高高高高高高高高高高高高高高高",
        ])
        .prop_map(str::to_string);
        let piece = prop_oneof![6 => filler, 4 => unit, 1 => spelled, 1 => structure];
        prop::collection::vec(piece, 0..30).prop_map(|v| v.concat())
    }

    fn configs() -> Vec<ClampConfig> {
        let mut short = ClampConfig::default();
        short.words.long_max_period = 40;
        let mut eager = ClampConfig::default();
        eager.words.min_run = 3;
        eager.words.run_per_period = 1;
        eager.words.long_run_per_period = 1;
        let mut small = ClampConfig::default();
        small.words.max_period = 4;
        small.words.long_max_period = 300;
        small.words.ignore_trailing_punctuation = false;
        small.words.split_cjk = false;
        // Long tails need fewer matches than any other loop: the sieve
        // must flag for them.
        let mut tail = ClampConfig::default();
        tail.words.min_run = 60;
        tail.words.long_max_period = 120;
        tail.words.tail_last_copy_percent = 1;
        vec![
            ClampConfig::default(),
            ClampConfig::seed_compat(),
            short,
            eager,
            small,
            tail,
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            crate::repetition::test_cases::cases(48)
        ))]

        /// The sieve's scan reports exactly what the exact detector
        /// reports reading every token.
        #[test]
        fn sieve_equals_the_exact_scan(text in text()) {
            for config in configs() {
                prop_assert_eq!(sieved(&text, &config), plain(&text, &config));
            }
        }
    }

    /// Long tails at the end of the text, every unit length around the
    /// shortest long period and every cut of the last copy, with words
    /// that keep the last, cut-off token quiet (so a region ends on it):
    /// the sieved scan equals the exact one, and the tail rule fires.
    #[test]
    fn long_tails_sieve_like_the_exact_scan() {
        let filler: String = (0..300).map(|i| format!("f{i} ")).collect();
        let mut tail = ClampConfig::default();
        tail.words.min_run = 60;
        tail.words.long_max_period = 120;
        tail.words.tail_last_copy_percent = 1;
        let mut fired = 0;
        for config in [ClampConfig::default(), tail] {
            for d in 17..40 {
                for name in ["línea", "u"] {
                    let unit: String = (0..d).map(|i| format!("{name}{i} ")).collect();
                    for times in 1..3 {
                        for cut in (1..unit.len()).step_by(3) {
                            let mut cut = cut;
                            while !unit.is_char_boundary(cut) {
                                cut -= 1;
                            }
                            let text = format!("{filler}{}{}", unit.repeat(times), &unit[..cut]);
                            let got = sieved(&text, &config);
                            assert_eq!(got, plain(&text, &config), "{d} {times} {cut}");
                            fired += usize::from(got.is_some());
                        }
                    }
                }
            }
        }
        assert!(fired > 500, "{fired}");
    }

    /// The tokens as the exact detector reads them: split at Unicode
    /// white space, CJK characters alone (with `split_cjk`); with the
    /// string its key hashes (the case fold, trailing punctuation
    /// dropped unless that leaves nothing).
    fn spec_tokens(text: &str, split_cjk: bool) -> Vec<(usize, String)> {
        let mut out: Vec<(usize, Vec<char>)> = Vec::new();
        let mut open = false;
        for (i, c) in text.char_indices() {
            if c.is_whitespace() {
                open = false;
                continue;
            }
            let cjk = split_cjk && is_cjk(c);
            if !open || cjk {
                out.push((i, Vec::new()));
            }
            if let Some(last) = out.last_mut() {
                last.1.push(c);
            }
            open = !cjk;
        }
        out.into_iter()
            .map(|(i, cs)| {
                let mut n = cs.len();
                while n > 0 && is_trailing_punct(cs[n - 1]) {
                    n -= 1;
                }
                let core = if n == 0 { &cs[..] } else { &cs[..n] };
                let mut folded = String::new();
                for &c in core {
                    fold_char(c, |l| folded.push(l));
                }
                (i, folded)
            })
            .collect()
    }

    fn sieve_tokens(text: &str, config: &ClampConfig) -> Vec<(usize, u64)> {
        let mut sv = Sieve::new(config).expect("the default rules can be sieved");
        let mut i = 0;
        while sv.run::<FLAG>(text, &mut i).is_some() {}
        sv.tables.trace
    }

    /// Same tokens as the exact detector, and equal key strings give
    /// equal sieve keys (both read paths: ASCII words and characters).
    fn check_tokens(text: &str, split_cjk: bool) -> Result<(), TestCaseError> {
        let mut config = ClampConfig::default();
        config.words.split_cjk = split_cjk;
        let spec = spec_tokens(text, split_cjk);
        let got = sieve_tokens(text, &config);
        let starts: Vec<usize> = got.iter().map(|t| t.0).collect();
        let want: Vec<usize> = spec.iter().map(|t| t.0).collect();
        prop_assert_eq!(starts, want);
        let mut by_string = std::collections::HashMap::new();
        for ((_, key), (_, string)) in got.iter().zip(&spec) {
            let first = *by_string.entry(string.clone()).or_insert(*key);
            prop_assert_eq!(first, *key, "{:?}", string);
        }
        Ok(())
    }

    #[test]
    fn variant_spellings_share_a_sieve_key() {
        // (`高。` is two tokens when CJK characters are split.)
        let mut whole = ClampConfig::default();
        whole.words.split_cjk = false;
        for group in VARIANTS {
            let text = group.join(" ");
            let keys: Vec<u64> = sieve_tokens(&text, &whole).iter().map(|t| t.1).collect();
            assert_eq!(keys.len(), group.len(), "{text}");
            assert!(keys.iter().all(|&k| k == keys[0]), "{text}");
        }
        // Different words keep different keys.
        let keys = sieve_tokens("de del ed d e", &ClampConfig::default());
        let mut distinct: Vec<u64> = keys.iter().map(|t| t.1).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 5);
    }

    proptest! {
        #[test]
        fn sieve_tokens_follow_the_exact_rules(
            words in prop::collection::vec(
                "[a-cA-C.,;:!?…。高é ſßΣσς\u{a0}\u{3000}\t\n]{0,12}", 0..40),
            split_cjk in any::<bool>(),
        ) {
            check_tokens(&words.join(" "), split_cjk)?;
        }
    }
}
