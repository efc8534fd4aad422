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

use crate::repetition::candidate::Candidate;
mod stream;
#[cfg(test)]
mod tests;

pub(crate) use stream::SieveStream;

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
    /// A token of this many bytes equal to the one before flags (the
    /// flood rule, `words/flood.rs`; `usize::MAX`: off).
    flood_min: usize,
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
                flood_min: if config.healthy.token_flood() != usize::MAX {
                    crate::repetition::words::FLOOD_TOKEN_MIN
                } else {
                    usize::MAX
                },
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
            if hit::<WANT>(f, &mut h, t, key, start, end - start) {
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
fn hit<const WANT: u8>(
    f: &Fixed,
    h: &mut Hot,
    t: &mut Tables,
    key: u64,
    start: usize,
    len: usize,
) -> bool {
    let flag = token(f, h, t, key, start, len);
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

/// Takes one token: its sieve key, where it starts and its length in
/// bytes. Returns whether it flags: a streak of seen shingles, or a long
/// token equal to the one before (a flood of one token can fire from its
/// third copy on, before any shingle repeats).
#[inline(always)]
fn token(f: &Fixed, h: &mut Hot, t: &mut Tables, key: u64, start: usize, len: usize) -> bool {
    #[cfg(test)]
    t.trace.push((t.base + start, key));
    let j = h.j;
    h.j = j + 1;
    let mask = t.keys.len() - 1;
    let flood = len >= f.flood_min && j > 0 && t.keys[(j - 1) & mask] == key;
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
    h.streak >= f.streak_flag || flood
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
                if hit::<WANT>(f, h, t, core.value(), start, pos - start) {
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
            if hit::<WANT>(f, h, t, core.value(), start, after - start) {
                *i = after;
                return Some(after);
            }
        }
    }
    *i = end;
    if let Some(start) = active {
        if hit::<WANT>(f, h, t, core.value(), start, end - start) {
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

/// Reads `text[from..]` with `w` until its verdict is settled.
fn exact_from(w: &mut Words, text: &str, from: usize, lx: &mut LineCtx<'_>) -> Option<Candidate> {
    if w.feed(&text[from..], from, lx, Stop::Settled).is_none() {
        w.end_text(text.len(), lx);
    }
    w.best.take()
}
