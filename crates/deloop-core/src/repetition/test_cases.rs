//! Shared by the property tests of the repetition engine.

/// Cases per property test: `PROPTEST_CASES` when set (a longer hunt),
/// else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
