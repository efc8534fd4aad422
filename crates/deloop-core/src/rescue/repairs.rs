//! The set of repairs applied while reading one input.

use super::Repair;

/// The repairs applied so far, each kind once, in first-seen order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Repairs {
    seen: u64,
    pub(crate) list: Vec<Repair>,
}

impl Repairs {
    /// Records a repair kind (once).
    #[inline]
    pub(crate) fn note(&mut self, r: Repair) {
        let bit = 1u64 << (r as u32);
        if self.seen & bit == 0 {
            self.seen |= bit;
            self.list.push(r);
        }
    }

    /// Whether a repair kind was recorded.
    #[inline]
    pub(crate) fn has(&self, r: Repair) -> bool {
        self.seen & (1u64 << (r as u32)) != 0
    }

    /// Records every repair of `other`.
    pub(crate) fn extend(&mut self, other: &Repairs) {
        for r in &other.list {
            self.note(*r);
        }
    }
}
