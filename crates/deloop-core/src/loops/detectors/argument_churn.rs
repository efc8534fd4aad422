//! `argument_churn` (warning only): one tool cycling through a few argument
//! variants that all end in the same no-progress outcome (errors, unchanged
//! writes). Every call in the tail must belong to a variant seen at least
//! three times, and the call being judged must continue one of them.

use super::{Current, Finding, Record, State, View};
use crate::loops::config::Settings;
use crate::loops::hashing::Digest;
use crate::loops::{Detector, Level};

const MIN_CALLS_PER_VARIANT: u32 = 3;

pub(crate) fn measure(history: View<'_>, cur: Current<'_>) -> (u32, usize) {
    // (args digest, result digest, count); a tool rarely has many variants.
    let mut variants: Vec<(Digest, Digest, u32)> = Vec::new();
    for r in history.iter().rev() {
        if &*r.tool != cur.tool {
            break;
        }
        let d = match &r.state {
            State::Done(d) => d,
            _ => continue,
        };
        if !d.no_progress {
            break;
        }
        match variants.iter_mut().find(|v| v.0 == r.call) {
            Some(v) if v.1 != d.hash => break,
            Some(v) => v.2 += 1,
            None => variants.push((r.call, d.hash, 1)),
        }
    }
    let total: u32 = variants.iter().map(|v| v.2).sum();
    let stable: Vec<&(Digest, Digest, u32)> = variants
        .iter()
        .filter(|v| v.2 >= MIN_CALLS_PER_VARIANT)
        .collect();
    let stable_total: u32 = stable.iter().map(|v| v.2).sum();
    let shared = stable.windows(2).all(|w| w[0].1 == w[1].1) && !stable.is_empty();
    let current_ok = variants
        .iter()
        .find(|v| v.0 == cur.call)
        .is_some_and(|v| v.2 >= MIN_CALLS_PER_VARIANT);
    if stable.len() > 1 && stable_total == total && shared && current_ok {
        (total, stable.len())
    } else {
        (0, 0)
    }
}

pub(crate) fn detect(history: View<'_>, cur: Current<'_>, s: &Settings) -> Option<Finding> {
    let (count, variants) = measure(history, cur);
    if count < s.warning_threshold {
        return None;
    }
    Some(Finding {
        level: Level::Warning,
        detector: Detector::ArgumentChurn,
        count,
        key: format!("argument-churn:{}", cur.tool),
        message: format!(
            "WARNING: `{}` has cycled through {variants} argument variants with the same no-progress outcome {count} times. Changing arguments is not helping; verify the situation before retrying.",
            cur.tool
        ),
        latest: history.back().and_then(Record::result),
    })
}
