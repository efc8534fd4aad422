//! Case folding and token keys.

/// Calls `f` with the case fold of `c`.
///
/// ASCII is lowercased directly. Other characters are mapped to the
/// lowercase of their uppercase (`ß` → `SS` → `ss`, `ς` → `Σ` → `σ`), which
/// equates the same pairs as Unicode full case folding for the cased letters
/// of every living script; a few oddities (dotless `ı` equals `i`) differ.
#[inline]
pub(crate) fn fold_char(c: char, mut f: impl FnMut(char)) {
    if c.is_ascii() {
        f(c.to_ascii_lowercase());
        return;
    }
    for u in c.to_uppercase() {
        for l in u.to_lowercase() {
            f(l);
        }
    }
}

/// Length of the case fold of `s`, in UTF-8 bytes.
#[cfg(test)]
fn fold_len(s: &str) -> u64 {
    let mut n = 0;
    for c in s.chars() {
        fold_char(c, |l| n += l.len_utf8() as u64);
    }
    n
}

/// [`key_str`] and [`fold_len`] of `s` in one pass, ASCII byte by byte
/// (a guard is built per call, and its connector list is hashed each time:
/// this is a tenth of a short text's whole cost otherwise).
pub(crate) fn key_and_len(s: &str) -> (u64, u64) {
    let mut h = KeyHasher::default();
    if s.is_ascii() {
        for &b in s.as_bytes() {
            h.push_byte(b.to_ascii_lowercase());
        }
    } else {
        for c in s.chars() {
            fold_char(c, |l| h.push(l));
        }
    }
    (h.finish(), h.len())
}

/// [`key_and_len`]'s key of lowercase ASCII bytes, at compile time.
pub(crate) const fn ascii_key(s: &[u8]) -> u64 {
    let mut h = KeyHasher {
        h: SEED,
        buf: 0,
        len: 0,
    };
    let mut i = 0;
    while i < s.len() {
        let n = h.len % 8;
        h.buf |= (s[i] as u64) << (8 * n);
        h.len += 1;
        if n == 7 {
            h.h = KeyHasher::step(h.h, h.buf);
            h.buf = 0;
        }
        i += 1;
    }
    h.finish()
}

/// The key of a whole string, as the word detector computes it for a token
/// (the reference [`key_and_len`] is checked against).
#[cfg(test)]
fn key_str(s: &str) -> u64 {
    let mut h = KeyHasher::default();
    for c in s.chars() {
        fold_char(c, |l| h.push(l));
    }
    h.finish()
}

const SEED: u64 = 0xcbf2_9ce4_8422_2325;
const K: u64 = 0x9fb2_1c65_1e98_df25;

/// An incremental 64-bit hash of the UTF-8 bytes of a character sequence.
/// Bytes are packed eight at a time (little-endian) and each full word is
/// folded in with a multiply; the finish mixes in the last, partial word
/// and the length. Pushing characters, single bytes or whole words of
/// bytes gives the same hash, so the word detector's byte loop and its
/// per-character path agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyHasher {
    h: u64,
    /// Bytes pushed since the last full word (`len % 8` of them).
    buf: u64,
    len: u64,
}

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher {
            h: SEED,
            buf: 0,
            len: 0,
        }
    }
}

impl KeyHasher {
    #[inline]
    const fn step(h: u64, w: u64) -> u64 {
        (h ^ w).wrapping_mul(K).rotate_left(29)
    }

    /// Pushes a character (already folded).
    #[inline]
    pub(crate) fn push(&mut self, c: char) {
        if c.is_ascii() {
            self.push_byte(c as u8);
            return;
        }
        let mut enc = [0u8; 4];
        for &b in c.encode_utf8(&mut enc).as_bytes() {
            self.push_byte(b);
        }
    }

    /// Pushes one byte.
    #[inline(always)]
    pub(crate) fn push_byte(&mut self, b: u8) {
        let n = self.len % 8;
        self.buf |= u64::from(b) << (8 * n);
        self.len += 1;
        if n == 7 {
            self.h = Self::step(self.h, self.buf);
            self.buf = 0;
        }
    }

    /// Pushes `k` bytes (1..=8) packed little-endian in `w`, whose other
    /// bytes are zero.
    #[inline(always)]
    pub(crate) fn push_word(&mut self, w: u64, k: usize) {
        debug_assert!((1..=8).contains(&k));
        let n = (self.len % 8) as usize;
        self.buf |= w << (8 * n);
        self.len += k as u64;
        if n + k >= 8 {
            self.h = Self::step(self.h, self.buf);
            self.buf = if n == 0 { 0 } else { w >> (8 * (8 - n)) };
        }
    }

    /// Bytes pushed.
    #[inline]
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The key: the last word and the length folded in, then one more
    /// multiply and a shift so both halves of the key depend on every
    /// byte.
    #[inline]
    pub(crate) const fn finish(&self) -> u64 {
        let z = Self::step(self.h, self.buf ^ self.len.rotate_left(47)).wrapping_mul(K);
        z ^ (z >> 32)
    }
}

/// The splitmix64 finaliser.
#[inline]
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_and_len_is_key_str_and_fold_len() {
        for s in [
            "",
            "de",
            "The",
            "AND",
            "más",
            "Straße",
            "ΣΊΣΥΦΟΣ",
            "x1_Y2-z3😀",
            "abcdefghijKLMNOPQ",
        ] {
            assert_eq!(key_and_len(s), (key_str(s), fold_len(s)), "{s:?}");
            if s.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
                assert_eq!(ascii_key(s.as_bytes()), key_str(s), "{s:?}");
            }
        }
    }

    fn key(s: &str) -> u64 {
        let mut h = KeyHasher::default();
        for c in s.chars() {
            fold_char(c, |l| h.push(l));
        }
        h.finish()
    }

    #[test]
    fn folding_equates_cases() {
        assert_eq!(key("Automatización"), key("automatización"));
        assert_eq!(key("STRASSE"), key("straße"));
        assert_eq!(key("ΣΟΦΟΣ"), key("σοφος"));
        assert_ne!(key("de"), key("del"));
        assert_ne!(key("ab"), key("ba"));
        assert_ne!(key("a"), key("a\0"));
    }

    /// Bytes, words and characters give the same hash, whatever the split.
    #[test]
    fn word_pushes_equal_byte_pushes() {
        let texts = [
            "",
            "a",
            "abcdefgh",
            "abcdefghi",
            "naïve straße 高い",
            "0123456789abcdefghijklmnopq",
        ];
        for t in texts {
            let b = t.as_bytes();
            let mut bytes = KeyHasher::default();
            for &x in b {
                bytes.push_byte(x);
            }
            let mut chars = KeyHasher::default();
            for c in t.chars() {
                chars.push(c);
            }
            assert_eq!(bytes, chars, "{t}");
            for split in [1usize, 3, 5, 8] {
                let mut words = KeyHasher::default();
                for chunk in b.chunks(split) {
                    let mut w = [0u8; 8];
                    w[..chunk.len()].copy_from_slice(chunk);
                    words.push_word(u64::from_le_bytes(w), chunk.len());
                }
                assert_eq!(bytes, words, "{t} by {split}");
                assert_eq!(bytes.finish(), words.finish());
            }
        }
    }
}
