//! Many identical calls in one reply: a model that asks, in a single turn,
//! for the same tool with the same arguments dozens of times is looping as
//! surely as one that repeats a sentence. The replay of a history cannot
//! see it (the calls have no results yet, so the detectors of
//! [`crate::loops::Guard`] only warn), so the calls of one reply are
//! counted here, as they complete: the [`IDENTICAL_REPLY_CALLS`]th copy of
//! one call (normalised tool name and canonical arguments,
//! [`call_digest`]) is critical, and that copy and everything after it
//! should be dropped (an agent runs the copies before it, which is what a
//! parallel batch may legitimately ask for).
//!
//! ```
//! use deloop_core::loops::reply_calls::{ReplyCalls, IDENTICAL_REPLY_CALLS};
//! use serde_json::json;
//!
//! let mut calls = ReplyCalls::new(IDENTICAL_REPLY_CALLS);
//! assert!(calls.push("read", &json!({"path": "/a"})).is_none());
//! assert!(calls.push("read", &json!({"path": "/b"})).is_none());
//! let mut verdict = None;
//! for _ in 1..IDENTICAL_REPLY_CALLS {
//!     verdict = verdict.or(calls.push("read", &json!({"path": "/a"})));
//! }
//! let v = verdict.expect("the 10th copy is a loop");
//! assert!(v.is_critical());
//! assert_eq!(v.count, Some(IDENTICAL_REPLY_CALLS));
//! ```

use std::collections::HashMap;

use serde_json::Value;

use super::hashing::{call_digest, Digest};
use super::{Detector, Level, Verdict};

/// Copies of one call in one reply that make it a loop (the default).
/// Parallel batches repeat a call with other arguments (read these ten
/// files), rarely with the same ones twice; ten identical copies are not a
/// batch.
pub const IDENTICAL_REPLY_CALLS: u32 = 10;

/// Distinct calls counted per reply; later new ones are not counted (a
/// reply that long is cut by other limits first).
pub const MAX_COUNTED_CALLS: usize = 4096;

/// Counts the calls of one reply (see the module docs).
#[derive(Debug, Clone)]
pub struct ReplyCalls {
    threshold: u32,
    counts: HashMap<Digest, u32, foldhash::fast::RandomState>,
    fired: bool,
}

impl ReplyCalls {
    /// A counter that fires at `threshold` copies (at least 2).
    pub fn new(threshold: u32) -> Self {
        ReplyCalls {
            threshold: threshold.max(2),
            counts: HashMap::default(),
            fired: false,
        }
    }

    /// Counts one completed call. Returns a critical verdict when this call
    /// is the threshold's copy of an earlier one (once per reply: the
    /// reply is to end there).
    pub fn push(&mut self, tool: &str, args: &Value) -> Option<Verdict> {
        if self.fired {
            return None;
        }
        let digest = call_digest(&super::hashing::normalize_tool_name(tool), args);
        if !self.counts.contains_key(&digest) && self.counts.len() >= MAX_COUNTED_CALLS {
            return None;
        }
        let n = self.counts.entry(digest).or_insert(0);
        *n += 1;
        if *n < self.threshold {
            return None;
        }
        self.fired = true;
        Some(Verdict {
            level: Level::Critical,
            detector: Some(Detector::IdenticalReplyCalls),
            count: Some(*n),
            message: format!(
                "CRITICAL: one reply asked for `{tool}` {n} times with identical arguments; \
                 the copies from the {n}th on are dropped. Run the call once and use its result."
            ),
            fingerprint: None,
            key: Some(format!("identical_reply_calls:{}", digest.short(16))),
            terminate_run: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_tool_case_do_not_hide_a_copy() {
        let mut c = ReplyCalls::new(3);
        assert!(c.push("Read", &json!({"a": 1, "b": 2})).is_none());
        assert!(c.push("read", &json!({"b": 2, "a": 1})).is_none());
        let v = c.push("read", &json!({"a": 1, "b": 2})).unwrap();
        assert_eq!(v.detector, Some(Detector::IdenticalReplyCalls));
        // Once per reply.
        assert!(c.push("read", &json!({"a": 1, "b": 2})).is_none());
    }

    #[test]
    fn distinct_calls_never_fire_and_the_count_is_bounded() {
        let mut c = ReplyCalls::new(2);
        for i in 0..(MAX_COUNTED_CALLS + 10) {
            assert!(c.push("read", &json!({"path": i})).is_none());
        }
        assert!(c.counts.len() <= MAX_COUNTED_CALLS);
    }
}
