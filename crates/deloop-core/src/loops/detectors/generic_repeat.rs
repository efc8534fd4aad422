//! `generic_repeat`: identical calls (warning by how often the call occurs
//! in history) and identical no-progress outcomes (critical by streak).

use super::no_progress::Streak;
use super::{hx, Current, Finding, Record, View};
use crate::loops::config::Settings;
use crate::loops::{Detector, Level};

pub(crate) fn critical(cur: Current<'_>, s: &Streak) -> Finding {
    Finding {
        level: Level::Critical,
        detector: Detector::GenericRepeat,
        count: s.count,
        key: format!(
            "generic:{}:{}:{}",
            cur.tool,
            hx(cur.call),
            s.latest.map(hx).unwrap_or_else(|| "none".into())
        ),
        message: format!(
            "CRITICAL: `{}` was called with identical arguments and got the identical outcome {} times; the call is blocked. Change approach or report the task as failed.",
            cur.tool, s.count
        ),
        latest: s.latest,
    }
}

/// Number of records of this exact call in the history.
pub(crate) fn recent_count(history: View<'_>, cur: Current<'_>) -> u32 {
    history.iter().filter(|r| r.call == cur.call).count() as u32
}

pub(crate) fn warning(history: View<'_>, cur: Current<'_>, s: &Settings) -> Option<Finding> {
    let n = recent_count(history, cur);
    if n < s.warning_threshold {
        return None;
    }
    Some(Finding {
        level: Level::Warning,
        detector: Detector::GenericRepeat,
        count: n,
        key: format!("generic:{}:{}", cur.tool, hx(cur.call)),
        message: format!(
            "WARNING: `{}` has been called {} times with identical arguments. If it is not making progress, stop and report the task as failed.",
            cur.tool, n
        ),
        latest: history.iter().rev().filter(|r| r.call == cur.call).find_map(Record::result),
    })
}
