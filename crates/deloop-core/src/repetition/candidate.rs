//! The verdict every detector returns.

use crate::repetition::Detector;

/// A loop found by a detector: what every detector reports, and what the
/// engine turns into a [`ClampReport`](crate::repetition::ClampReport).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub detector: Detector,
    pub period: usize,
    /// Byte offset where the loop starts.
    pub start: usize,
    /// Byte offset where the kept source text ends.
    pub keep: usize,
    /// Number of tokens kept (words only; used to re-join in seed mode).
    pub keep_tokens: u64,
    /// The unit as it last appeared (a preview).
    pub unit: String,
}

impl Candidate {
    #[inline]
    pub(crate) fn better_than(&self, other: &Candidate) -> bool {
        (self.start, self.period) < (other.start, other.period)
    }
}
