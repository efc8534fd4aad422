//! `ping_pong`: strict alternation between two calls A, B, A, B, … where
//! the call being judged continues the alternation. Critical only with
//! stable results on both sides (every A identical, every B identical).

use super::{hx, Current, Finding, Record, State, View};
use crate::loops::config::Settings;
use crate::loops::hashing::Digest;
use crate::loops::{Detector, Level};

/// Alternation length (including the current call), the other signature,
/// and whether every result in the tail is stable per side.
pub(crate) struct PingPong {
    pub count: u32,
    pub other: Digest,
    pub evidence: bool,
}

pub(crate) fn measure(history: View<'_>, current: Digest, sticky: bool) -> Option<PingPong> {
    let last = history.back()?;
    let a = last.call;
    let other = history.iter().rev().skip(1).find(|r| r.call != a)?.call;
    let mut tail = 0usize;
    for r in history.iter().rev() {
        let expected = if tail.is_multiple_of(2) { a } else { other };
        if r.call != expected {
            break;
        }
        tail += 1;
    }
    if tail < 2 || current != other {
        return None;
    }
    let start = history.len() - tail;
    let mut hash_a: Option<Digest> = None;
    let mut hash_b: Option<Digest> = None;
    let mut evidence = true;
    for r in history.iter().skip(start) {
        let h = match &r.state {
            State::Done(d) => d.hash,
            State::Veto if sticky => continue,
            _ => {
                evidence = false;
                break;
            }
        };
        let slot = if r.call == a {
            &mut hash_a
        } else {
            &mut hash_b
        };
        match slot {
            Some(prev) if *prev != h => {
                evidence = false;
                break;
            }
            _ => *slot = Some(h),
        }
    }
    if hash_a.is_none() || hash_b.is_none() {
        evidence = false;
    }
    Some(PingPong {
        count: tail as u32 + 1,
        other: a,
        evidence,
    })
}

pub(crate) fn detect(
    history: View<'_>,
    cur: Current<'_>,
    s: &Settings,
    sticky: bool,
) -> Option<Finding> {
    let pp = measure(history, cur.call, sticky)?;
    let (lo, hi) = if cur.call <= pp.other {
        (cur.call, pp.other)
    } else {
        (pp.other, cur.call)
    };
    let key = format!("pingpong:{}|{}", hx(lo), hx(hi));
    let latest = history
        .iter()
        .rev()
        .filter(|r| r.call == cur.call)
        .find_map(Record::result);
    if pp.count >= s.critical_threshold && pp.evidence {
        return Some(Finding {
            level: Level::Critical,
            detector: Detector::PingPong,
            count: pp.count,
            key,
            message: format!(
                "CRITICAL: {} consecutive calls alternate between the same two calls with unchanged results; the call is blocked.",
                pp.count
            ),
            latest,
        });
    }
    if pp.count >= s.warning_threshold {
        return Some(Finding {
            level: Level::Warning,
            detector: Detector::PingPong,
            count: pp.count,
            key,
            message: format!(
                "WARNING: {} consecutive calls alternate between the same two calls. If this is not making progress, stop and report the task as failed.",
                pp.count
            ),
            latest,
        });
    }
    None
}
