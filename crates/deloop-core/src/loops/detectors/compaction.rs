//! The post-compaction guard: a compaction arms it for the next
//! `windowSize` outcomes of the scope; if `windowSize` of them are the same
//! (tool, arguments, result) triple, compaction did not break the loop and
//! the run is aborted (`compaction_loop_persisted`). Changing results never
//! abort. The guard runs unless `enabled` is explicitly `false`.

use crate::loops::hashing::Digest;

/// Armed window state of one scope.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Window {
    remaining: u32,
    size: u32,
    seen: Vec<(Digest, Digest)>,
}

impl Window {
    /// Arms the guard for `size` outcomes.
    pub(crate) fn arm(&mut self, size: u32) {
        self.remaining = size;
        self.size = size;
        self.seen.clear();
    }

    /// Is the guard armed?
    pub(crate) fn armed(&self) -> bool {
        self.remaining > 0
    }

    /// Observes one outcome; returns the number of identical triples when
    /// the loop persisted.
    pub(crate) fn observe(&mut self, call: Digest, result: Digest) -> Option<u32> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        self.seen.push((call, result));
        let matches = self.seen.iter().filter(|p| **p == (call, result)).count() as u32;
        if matches >= self.size {
            self.remaining = 0;
            self.seen.clear();
            return Some(matches);
        }
        if self.remaining == 0 {
            self.seen.clear();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_on_identical_window_only() {
        let (a, b, r) = (Digest(1), Digest(2), Digest(9));
        let mut w = Window::default();
        w.arm(3);
        assert_eq!(w.observe(a, r), None);
        assert_eq!(w.observe(a, r), None);
        assert_eq!(w.observe(a, r), Some(3));
        w.arm(3);
        assert_eq!(w.observe(a, r), None);
        assert_eq!(w.observe(b, r), None);
        assert_eq!(w.observe(a, r), None);
        assert!(!w.armed());
        assert_eq!(w.observe(a, r), None);
    }
}
