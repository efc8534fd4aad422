//! No-progress streaks: how many of the latest outcomes of this exact call
//! were identical (and, for `exec`, how many consecutive terminal failures
//! of any command share one failure identity). Also the global breaker.
//!
//! Vetoes count once an older concrete outcome anchors them, so a block is
//! sticky: a vetoed call extends the streak instead of resetting it.

use super::{hx, Current, Finding, Record, State, View};
use crate::loops::hashing::Digest;
use crate::loops::{Detector, Level};

/// A streak and the result it is about.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Streak {
    pub count: u32,
    pub latest: Option<Digest>,
}

/// The longer of the same-call streak and (for `exec`) the terminal-failure streak.
pub(crate) fn streak(history: View<'_>, tool: &str, call: Digest) -> Streak {
    let same = count(history, tool, call, false);
    if tool != "exec" {
        return same;
    }
    let failures = count(history, tool, call, true);
    if failures.count > same.count {
        failures
    } else {
        same
    }
}

fn count(history: View<'_>, tool: &str, call: Digest, failures_only: bool) -> Streak {
    let mut streak = 0u32;
    let mut latest: Option<&Record> = None;
    let mut crossed = false;
    let mut pending_vetoes = 0u32;
    for r in history.iter().rev() {
        // The call digest covers the tool name, so the cheap digest test
        // comes first in the same-call pass.
        if !failures_only && r.call != call {
            continue;
        }
        if failures_only && &*r.tool != tool {
            break;
        }
        let done = match &r.state {
            State::Veto => {
                pending_vetoes += 1;
                continue;
            }
            State::Pending => continue,
            State::Done(d) => d,
        };
        if failures_only && done.failure.is_none() {
            break;
        }
        let Some(l) = latest else {
            latest = Some(r);
            crossed = r.call != call;
            streak = pending_vetoes + 1;
            pending_vetoes = 0;
            continue;
        };
        if failures_only {
            if crossed && r.call == call {
                break;
            }
            if r.call != call {
                crossed = true;
            }
        }
        let ld = l.done().expect("latest is always a concrete outcome");
        let same_failure = failures_only && done.failure.is_some() && done.failure == ld.failure;
        if done.hash != ld.hash && !same_failure {
            break;
        }
        streak += pending_vetoes + 1;
        pending_vetoes = 0;
    }
    match latest {
        Some(l) => Streak {
            count: streak,
            latest: l.result(),
        },
        None => Streak {
            count: if failures_only { 0 } else { pending_vetoes },
            latest: None,
        },
    }
}

pub(crate) fn global_finding(cur: Current<'_>, s: &Streak) -> Finding {
    Finding {
        level: Level::Critical,
        detector: Detector::GlobalCircuitBreaker,
        count: s.count,
        key: format!(
            "global:{}:{}:{}",
            cur.tool,
            hx(cur.call),
            s.latest.map(hx).unwrap_or_else(|| "none".into())
        ),
        message: format!(
            "CRITICAL: `{}` produced the same no-progress outcome {} times; the global circuit breaker blocks it.",
            cur.tool, s.count
        ),
        latest: s.latest,
    }
}

pub(crate) fn poll_finding(level: Level, cur: Current<'_>, s: &Streak) -> Finding {
    let message = if level == Level::Critical {
        format!(
            "CRITICAL: polled `{}` {} times with identical arguments and nothing changed; the poll is blocked. Report the job as stuck.",
            cur.tool, s.count
        )
    } else {
        format!(
            "WARNING: polled `{}` {} times with identical arguments and nothing changed. Wait longer between checks, or report the job as stuck.",
            cur.tool, s.count
        )
    };
    Finding {
        level,
        detector: Detector::KnownPollNoProgress,
        count: s.count,
        key: format!(
            "poll:{}:{}:{}",
            cur.tool,
            hx(cur.call),
            s.latest.map(hx).unwrap_or_else(|| "none".into())
        ),
        message,
        latest: s.latest,
    }
}
