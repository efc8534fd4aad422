//! Shared by the property tests of the repetition engine.

/// Cases per property test: `PROPTEST_CASES` when set (a longer hunt),
/// else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One step of a xorshift generator (13, 7, 17) on `x` (never 0), for
/// the generated texts' fillers: deterministic from a proptest seed.
pub(crate) fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}
