//! The sieve's reading loops: the token loop ([`Sieve::run`]) and the
//! eight-bytes-at-a-time skim over plain words ([`Sieve::skim`]).

use super::*;

impl Sieve {
    /// Reads `s` (the text from offset `base`) from byte `*i` until a
    /// point where a rule may fire (`WANT` is [`FLAG`]) or where none can
    /// before the next flag ([`QUIET`]): returns that offset (`*i` is
    /// there), or `None` at the end of `s`. `s` ends just after ASCII
    /// white space, or at the end of the text (its last token is then
    /// left unfinished, as [`Near`] leaves it).
    pub(super) fn run<const WANT: u8>(
        &mut self,
        s: &str,
        base: usize,
        i: &mut usize,
    ) -> Option<usize> {
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
    pub(super) fn skim<const WANT: u8>(
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
    pub(super) fn plain(&self) -> bool {
        self.line_active
            && self.seg_active
            && !self.line_fence
            && !self.line_table
            && self.real_recorded
            && !self.tok.active
            && self.pending_bs.is_none()
    }

    /// A newline at `pos`, with no token going on.
    pub(super) fn newline(&mut self, pos: usize) {
        self.end_line();
        self.real_line = pos + 1;
        self.real_recorded = false;
    }

    /// An ASCII token `t` at `pos` (no backslash or `#`, no white space)
    /// followed by the white space `after`: [`Near`]'s `token_char` for
    /// each byte, then the white space.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ascii_token(
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
pub(super) fn word(w: &[u8]) -> u64 {
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
pub(super) fn skim_words(
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
pub(super) const SPECIAL_WINDOW: usize = 64 * 1024;

/// The offset of the next backslash, `#`, `!` or `?` in `b` from `p`, or
/// the end of the window looked through: a token that holds one of the
/// first two is read character by character, and [`Sieve::skim`] leaves
/// all four to the token loop (the next look starts past it).
pub(super) fn next_special(b: &[u8], p: usize) -> usize {
    let end = b.len().min(p.saturating_add(SPECIAL_WINDOW));
    let from = p.min(end);
    let w = &b[from..end];
    let a = memchr::memchr3(b'\\', b'#', b'!', w).unwrap_or(w.len());
    let q = memchr::memchr(b'?', &w[..a]).unwrap_or(a);
    from + q
}
