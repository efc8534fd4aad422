//! Back-to-back streaks and cycles (deloop's `default` and `strict` profiles).
//!
//! For every period `k` from 1 to `maxCycleLength`, the call being judged
//! continues a cycle when it is the same call as the one `k` calls ago. The
//! periodic tail is then measured: `r` is the number of consecutive most
//! recent calls that repeat the call `k` positions earlier **with an
//! identical result** (a block counts as identical; a pending call or any
//! changed result ends the tail). The loop region holds `r + k` calls.
//!
//! * critical when `r + k >= streakThreshold` and `r >= 2k` (at least three
//!   laps seen);
//! * warning when `r + k >= ceil(streakThreshold / 2)` and `r >= k` (two laps).
//!
//! With the default `streakThreshold` of 8: the 9th identical back-to-back
//! call with identical results is blocked (`k = 1`, reported as
//! `generic_repeat`), an A/B alternation on its 9th call, a 3-cycle on its
//! 10th, an 8-cycle on its 25th. A cycle whose results change on any lap is
//! progress and never fires. Polls are left to `known_poll_no_progress`.

use super::{hx, Current, Finding, Record, State, View};
use crate::loops::config::Settings;
use crate::loops::{Detector, Level};

fn same_outcome(a: &Record, b: &Record) -> bool {
    match (&a.state, &b.state) {
        (State::Done(x), State::Done(y)) => x.hash == y.hash,
        (State::Veto, State::Veto)
        | (State::Veto, State::Done(_))
        | (State::Done(_), State::Veto) => true,
        _ => false,
    }
}

/// Length of the periodic tail for period `k` (0 when the current call does
/// not continue it).
pub(crate) fn tail(history: View<'_>, cur: Current<'_>, k: usize) -> usize {
    let n = history.len();
    if k == 0 || k > n || history.get(n - k).call != cur.call {
        return 0;
    }
    let mut r = 0;
    let mut j = n;
    while j > k {
        let a = history.get(j - 1);
        let b = history.get(j - 1 - k);
        if a.call != b.call || !same_outcome(a, b) {
            break;
        }
        r += 1;
        j -= 1;
    }
    r
}

pub(crate) fn detect(history: View<'_>, cur: Current<'_>, s: &Settings) -> Option<Finding> {
    let t = s.streak_threshold as usize;
    let half = t.div_ceil(2);
    let mut warning: Option<(usize, usize)> = None;
    for k in 1..=s.max_cycle_length.min(history.len()) {
        let r = tail(history, cur, k);
        if r == 0 {
            continue;
        }
        if r + k >= t && r >= 2 * k {
            return Some(finding(Level::Critical, history, cur, k, r));
        }
        if warning.is_none() && r + k >= half && r >= k {
            warning = Some((k, r));
        }
    }
    warning.map(|(k, r)| finding(Level::Warning, history, cur, k, r))
}

fn finding(level: Level, history: View<'_>, cur: Current<'_>, k: usize, r: usize) -> Finding {
    let count = (r + k) as u32;
    let latest = history
        .iter()
        .rev()
        .filter(|r| r.call == cur.call)
        .find_map(Record::result);
    let (detector, what) = if k == 1 {
        (
            Detector::GenericRepeat,
            format!(
                "`{}` returned the identical result {count} times in a row",
                cur.tool
            ),
        )
    } else {
        (
            Detector::Cycle,
            format!(
                "the same sequence of {k} calls repeated with identical results ({count} calls, {} laps)",
                (r + k) / k
            ),
        )
    };
    let message = match level {
        Level::Critical => format!(
            "CRITICAL: {what}; the call is blocked. Change approach or report the task as failed."
        ),
        _ => format!("WARNING: {what}. Nothing is changing; try something different."),
    };
    Finding {
        level,
        detector,
        count,
        key: format!("cycle:{k}:{}", hx(cur.call)),
        message,
        latest,
    }
}
