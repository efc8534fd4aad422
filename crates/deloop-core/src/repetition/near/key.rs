//! Token keys: case-folded characters packed eight ASCII bytes to a
//! word, so the per-character and the word-at-a-time paths agree.

/// The eight bytes of `bytes` from `i` as a little-endian word; bytes past
/// the end read as spaces (which end a token).
#[inline(always)]
pub(super) fn load8(bytes: &[u8], i: usize) -> u64 {
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
pub(super) fn mix(h: u64, x: u64) -> u64 {
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
