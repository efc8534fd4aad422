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

/// Length of the case fold of `s`, in characters.
pub(crate) fn fold_len(s: &str) -> u64 {
    let mut n = 0;
    for c in s.chars() {
        fold_char(c, |_| n += 1);
    }
    n
}

/// The key of a whole string, as the word detector computes it for a token
/// (used for connector lists).
pub(crate) fn key_str(s: &str) -> u64 {
    let mut h = KeyHasher::default();
    for c in s.chars() {
        fold_char(c, |l| h.push(l));
    }
    h.finish()
}

const SEED: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// An incremental 64-bit hash of a sequence of characters (FNV-1a over
/// scalar values, finished with a splitmix64 mix and the length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyHasher {
    h: u64,
    len: u64,
}

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher { h: SEED, len: 0 }
    }
}

impl KeyHasher {
    #[inline]
    pub(crate) fn push(&mut self, c: char) {
        self.h = (self.h ^ c as u64).wrapping_mul(PRIME);
        self.len += 1;
    }

    /// The raw state, to snapshot cheaply.
    #[inline]
    pub(crate) fn state(&self) -> (u64, u64) {
        (self.h, self.len)
    }

    /// The key of a snapshot taken with [`KeyHasher::state`].
    #[inline]
    pub(crate) fn finish_state(h: u64, len: u64) -> u64 {
        mix(h ^ len.rotate_left(47))
    }

    #[inline]
    pub(crate) fn finish(&self) -> u64 {
        Self::finish_state(self.h, self.len)
    }
}

/// splitmix64 finaliser.
#[inline]
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
