//! The fast path of [`Near::feed`]: runs of plain bytes read without the
//! per-character step (see the module docs of [`super`] for why the verdict
//! is the same).

use super::*;

impl Near {
    /// How many bytes from `i` the word-at-a-time path may take: plain
    /// token bytes (ASCII, not white space, not a digit, not a
    /// backslash) inside a line and a segment already open, in a token
    /// that is not a list marker in the making, while the run of
    /// non-white-space stays shorter than [`CHAIN_START`] characters.
    #[inline]
    pub(super) fn plain_run(&self, bytes: &[u8], i: usize) -> usize {
        if !self.line_active || !self.seg_active {
            return 0;
        }
        if self.build.active && !self.build.marker.is_other() {
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
    pub(super) fn plain_bytes(&mut self, bytes: &[u8], base: usize, i: usize, m: usize) {
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
        if !b.letter_seen {
            // The first letter of the token: a capital (a name) or, at
            // its very start, a quote (a string value).
            if b.start == pos && matches!(bytes[i], b'"' | b'\'') {
                b.shape = SLOT_QUOTE;
            }
            if let Some(&c) = bytes[i..i + m].iter().find(|c| c.is_ascii_alphabetic()) {
                if b.shape == 0 && c.is_ascii_uppercase() {
                    b.shape = SLOT_CAP;
                }
                b.letter_seen = true;
            }
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
        b.marker = MarkerShape::OTHER;
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
    pub(super) fn materialize(&mut self, bytes: &[u8], base: usize) {
        if !self.lazy {
            return;
        }
        self.lazy = false;
        for k in self.lazy_k..self.chain_len {
            let p = self.lazy_from + (k - self.lazy_k);
            self.chain_chars[k % CHAIN_RING] = (u32::from(bytes[p - base]), p);
        }
    }
}
