//! Byte-parallel predicates on eight bytes packed in a `u64`: each
//! returns the high bit of every byte that satisfies it.

pub(crate) const HI: u64 = 0x8080_8080_8080_8080;
const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

#[inline(always)]
pub(crate) const fn rep(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// Bytes `>= lo` and `<= hi` among bytes below 0x80 (`hi < 0x80`).
#[inline(always)]
fn range7(y: u64, lo: u8, hi: u8) -> u64 {
    (y.wrapping_add(rep(0x80 - lo)) & !y.wrapping_add(rep(0x7f - hi))) & HI
}

/// Bytes equal to zero.
#[inline(always)]
pub(crate) fn zero(z: u64) -> u64 {
    !((z & LO7).wrapping_add(LO7) | z) & HI
}

/// Bit `i` set when byte `i` of `x` equals `b`.
#[inline(always)]
pub(crate) fn eq_bits(x: u64, b: u8) -> u32 {
    let z = zero(x ^ rep(b)) >> 7;
    (z.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
}

/// How many bytes a predicate's result marks.
#[inline(always)]
pub(crate) fn count(m: u64) -> u32 {
    ((m >> 7).wrapping_mul(0x0101_0101_0101_0101) >> 56) as u32
}

/// Bytes that end a run of ASCII token characters: non-ASCII bytes
/// and ASCII white space (U+0009..=U+000D, U+0020).
#[inline(always)]
pub(crate) fn stop(x: u64) -> u64 {
    let y = x & LO7;
    (x & HI) | range7(y, 0x09, 0x0d) | zero(y ^ rep(b' '))
}

/// ASCII white space (U+0009..=U+000D, U+0020).
#[inline(always)]
pub(crate) fn ws(x: u64) -> u64 {
    let y = x & LO7;
    (range7(y, 0x09, 0x0d) | zero(y ^ rep(b' '))) & !x & HI
}

/// ASCII capitals (bytes below 0x80).
#[inline(always)]
pub(crate) fn upper(t: u64) -> u64 {
    range7(t, b'A', b'Z')
}

/// ASCII small letters (bytes below 0x80).
#[inline(always)]
pub(crate) fn lower_alpha(t: u64) -> u64 {
    range7(t, b'a', b'z')
}

/// ASCII digits (bytes below 0x80).
#[inline(always)]
pub(crate) fn digit(t: u64) -> u64 {
    range7(t, b'0', b'9')
}

/// ASCII control bytes, U+0000..=U+001F (bytes below 0x80).
#[inline(always)]
pub(crate) fn control(t: u64) -> u64 {
    !t.wrapping_add(rep(0x60)) & HI
}

/// `.`, `/` and the ASCII digits, U+002E..=U+0039 (bytes below 0x80).
#[inline(always)]
pub(crate) fn dot_or_digit(t: u64) -> u64 {
    range7(t, b'.', b'9')
}

/// Trailing punctuation `. , ; : ! ?` (bytes below 0x80).
#[inline(always)]
pub(crate) fn punct(t: u64) -> u64 {
    if range7(t, b'!', b'?') == 0 {
        return 0;
    }
    zero(t ^ rep(b'.'))
        | zero(t ^ rep(b','))
        | zero(t ^ rep(b';'))
        | zero(t ^ rep(b':'))
        | zero(t ^ rep(b'!'))
        | zero(t ^ rep(b'?'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every predicate agrees with its scalar definition on every
    /// byte value, in every lane.
    #[test]
    fn predicates_match_scalar_definitions() {
        for v in 0u8..=255 {
            for lane in 0..8 {
                let x = u64::from(v) << (8 * lane) | rep(b'a') & !(0xff << (8 * lane));
                let bit = |m: u64| m >> (8 * lane + 7) & 1 == 1;
                assert_eq!(bit(stop(x)), v >= 0x80 || matches!(v, 9..=13 | 32), "{v}");
                assert_eq!(count(stop(x)), stop(x).count_ones(), "{v}");
                assert_eq!(bit(ws(x)), matches!(v, 9..=13 | 32), "{v}");
                let expect: u32 = (0..8)
                    .filter(|&l| (x >> (8 * l)) as u8 == b'a')
                    .map(|l| 1 << l)
                    .sum();
                assert_eq!(eq_bits(x, b'a'), expect, "{v}");
                if v < 0x80 {
                    assert_eq!(bit(upper(x)), v.is_ascii_uppercase(), "{v}");
                    assert_eq!(bit(lower_alpha(x)), v.is_ascii_lowercase(), "{v}");
                    assert_eq!(bit(digit(x)), v.is_ascii_digit(), "{v}");
                    assert_eq!(bit(control(x)), v < 0x20, "{v}");
                    assert_eq!(bit(dot_or_digit(x)), (b'.'..=b'9').contains(&v), "{v}");
                    assert_eq!(
                        bit(punct(x)),
                        matches!(v, b'.' | b',' | b';' | b':' | b'!' | b'?'),
                        "{v}"
                    );
                }
            }
        }
    }
}
