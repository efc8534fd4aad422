//! The ASCII fast path of token reading: eight bytes at a time into the
//! token hashers.

use super::*;

/// One ASCII token byte (not white space) into the hashers: its lowercase
/// goes into `all`, and `core` follows `all` unless the byte is trailing
/// punctuation. Returns 1 for a letter, 0 otherwise.
#[inline(always)]
pub(super) fn hash_ascii(
    c: u8,
    all: &mut KeyHasher,
    core: &mut KeyHasher,
    has_core: &mut bool,
) -> u32 {
    all.push_byte(c.to_ascii_lowercase());
    if !matches!(c, b'.' | b',' | b';' | b':' | b'!' | b'?') {
        *core = *all;
        *has_core = true;
    }
    u32::from(c.is_ascii_alphabetic())
}

/// Reads the run of ASCII token bytes that starts at `b[i]` (a token
/// byte) into the hashers, eight bytes at a time: the same steps as
/// [`hash_ascii`] byte by byte. Returns where the run ends and the
/// letters it holds.
#[inline(always)]
pub(super) fn scan_ascii(
    b: &[u8],
    mut i: usize,
    all: &mut KeyHasher,
    core: &mut KeyHasher,
    has_core: &mut bool,
) -> (usize, u32) {
    let n = b.len();
    let mut letters = 0u32;
    loop {
        if let Some(x) = b.get(i..i + 8).and_then(|s| <[u8; 8]>::try_from(s).ok()) {
            let x = u64::from_le_bytes(x);
            let stop = swar::stop(x);
            // b[i] is a token byte, so k >= 1.
            let k = if stop == 0 {
                8
            } else {
                (stop.trailing_zeros() / 8) as usize
            };
            let keep = if k == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * k)) - 1
            };
            let t = x & keep;
            let lower = t | (swar::upper(t) >> 2);
            letters += swar::count(swar::lower_alpha(lower));
            let punct = swar::punct(t);
            if punct == 0 {
                all.push_word(lower, k);
                *core = *all;
                *has_core = true;
            } else {
                let content = !punct & keep & swar::HI;
                if content == 0 {
                    all.push_word(lower, k);
                } else {
                    // Bytes up to the last one that is not punctuation
                    // make the core.
                    let c = ((63 - content.leading_zeros()) / 8) as usize + 1;
                    let cm = if c == 8 {
                        u64::MAX
                    } else {
                        (1u64 << (8 * c)) - 1
                    };
                    all.push_word(lower & cm, c);
                    *core = *all;
                    *has_core = true;
                    if c < k {
                        all.push_word(lower >> (8 * c), k - c);
                    }
                }
            }
            i += k;
            if k < 8 || i >= n || b[i] >= 0x80 || is_ascii_ws(b[i]) {
                return (i, letters);
            }
            continue;
        }
        letters += hash_ascii(b[i], all, core, has_core);
        i += 1;
        if i >= n || b[i] >= 0x80 || is_ascii_ws(b[i]) {
            return (i, letters);
        }
    }
}
