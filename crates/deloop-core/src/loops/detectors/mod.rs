//! The detectors, and the decision table that combines them.
//!
//! The table reads top to bottom; the first matching rule wins:
//!
//! | # | rule | level |
//! |---|---|---|
//! | 1 | `unknown_tool_repeat`: the last `unknownToolThreshold` outcomes of this tool named the same unavailable tool | critical |
//! | 2 | `global_circuit_breaker`: no-progress streak ≥ `globalCircuitBreakerThreshold` | critical |
//! | 3 | `known_poll_no_progress`: poll call, streak ≥ `criticalThreshold` | critical |
//! | 4 | `known_poll_no_progress`: poll call, streak ≥ `warningThreshold` | warning |
//! | 5 | `ping_pong`: alternation ≥ `criticalThreshold` with stable results on both sides | critical |
//! | 6 | `ping_pong`: alternation ≥ `warningThreshold` | warning |
//! | 7 | `generic_repeat`: not a poll, streak ≥ `criticalThreshold` | critical |
//! | 8 | `argument_churn`: ≥ `warningThreshold` calls cycling through stable variants | warning |
//! | 9 | `generic_repeat`: not a poll, ≥ `warningThreshold` identical calls in history | warning |
//!
//! The `default` and `strict` profiles then add the back-to-back streak and
//! `cycle` rule (see [`cycle`]), then `no_progress` (one tool returning the
//! same result whatever its arguments, see [`same_result`]); each can only
//! raise the level.

pub mod argument_churn;
pub mod compaction;
pub mod cycle;
pub mod generic_repeat;
pub mod no_progress;
pub mod ping_pong;
pub mod same_result;
pub mod unknown_tool;

use std::collections::VecDeque;

use super::config::Settings;
use super::hashing::Digest;
use super::outcome::CallKind;
use super::{Detector, Level};

/// What is known about a recorded call's outcome.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum State {
    /// Not answered yet.
    Pending,
    /// Blocked by the guard (or the runtime reported the guard's veto).
    Veto,
    /// Answered.
    Done(Done),
}

/// A normalised outcome.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Done {
    pub hash: Digest,
    pub no_progress: bool,
    pub error: bool,
    pub failure: Option<Digest>,
    pub unknown: Option<Box<str>>,
    /// A success that says nothing (an empty output, `OK`): see [`same_result`].
    #[serde(default)]
    pub blank: bool,
    /// An error with its quoted spans masked (see [`same_result`]).
    #[serde(default)]
    pub error_shape: Option<Digest>,
}

/// One call in a scope's history.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Record {
    pub tool: std::sync::Arc<str>,
    /// The run id (trimmed), which filters a shared window (`openclaw`).
    pub run: Option<std::sync::Arc<str>>,
    pub call: Digest,
    /// The strict-protocol procedure digest (equivalent arguments collapse).
    pub procedure: Digest,
    pub call_id: Option<Box<str>>,
    pub kind: CallKind,
    /// The call may change state (see [`same_result::may_change_state`]).
    #[serde(default)]
    pub changes: bool,
    pub state: State,
    pub seq: u64,
    /// `AGENT::<agent>::<operation>::<context>` (strict profile only).
    pub fp_prefix: Option<Box<str>>,
}

impl Record {
    pub(crate) fn done(&self) -> Option<&Done> {
        match &self.state {
            State::Done(d) => Some(d),
            _ => None,
        }
    }

    pub(crate) fn result(&self) -> Option<Digest> {
        self.done().map(|d| d.hash)
    }
}

/// The records of a history that count for the call being judged: all of
/// them (a window of its own per scope), or those of its run (OpenClaw's
/// one window per session, filtered by run id). `idx` lists positions in
/// `records`, oldest first.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View<'a> {
    records: &'a VecDeque<Record>,
    idx: &'a [usize],
}

impl<'a> View<'a> {
    /// A view of `records` at positions `idx` (oldest first).
    pub(crate) fn new(records: &'a VecDeque<Record>, idx: &'a [usize]) -> Self {
        View { records, idx }
    }

    /// Number of records in view.
    pub(crate) fn len(&self) -> usize {
        self.idx.len()
    }

    /// The `i`-th record in view, oldest first (panics out of range).
    pub(crate) fn get(&self, i: usize) -> &'a Record {
        &self.records[self.idx[i]]
    }

    /// The newest record in view.
    pub(crate) fn back(&self) -> Option<&'a Record> {
        self.idx.last().map(|&i| &self.records[i])
    }

    /// The records in view, oldest first.
    pub(crate) fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = &'a Record> + ExactSizeIterator + Clone + 'a {
        let records = self.records;
        self.idx.iter().map(move |&i| &records[i])
    }
}

/// The call being judged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Current<'a> {
    pub tool: &'a str,
    pub call: Digest,
    pub kind: CallKind,
    /// The sequence number of the scope's latest user turn: records older
    /// than it happened before the human spoke.
    pub turn_seq: u64,
}

/// A detector's finding.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub level: Level,
    pub detector: Detector,
    pub count: u32,
    pub key: String,
    pub message: String,
    /// The result hash the finding is about (for the fingerprint).
    pub latest: Option<Digest>,
}

/// Rule variations between profiles.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    /// Vetoes extend unknown-tool and ping-pong streaks (deloop's sticky blocks).
    pub sticky: bool,
    /// Back-to-back streaks and cycles.
    pub cycles: bool,
    /// `no_progress`: one tool, the same result, whatever the arguments.
    pub no_progress: bool,
}

/// Runs the decision table over a scope's history.
pub(crate) fn decide(
    history: View<'_>,
    cur: Current<'_>,
    s: &Settings,
    rules: Rules,
) -> Option<Finding> {
    let d = &s.detectors;
    let mut best = openclaw_table(history, cur, s, rules);
    let raise = |best: &mut Option<Finding>, f: Option<Finding>| {
        if let Some(f) = f {
            if best.as_ref().is_none_or(|b| f.level > b.level) {
                *best = Some(f);
            }
        }
    };
    if rules.cycles && d.cycle && !cur.kind.is_poll() && !is_critical(&best) {
        raise(&mut best, cycle::detect(history, cur, s));
    }
    if rules.no_progress && d.no_progress && !is_critical(&best) {
        raise(&mut best, same_result::detect(history, cur, s));
    }
    best
}

fn is_critical(f: &Option<Finding>) -> bool {
    f.as_ref().is_some_and(|f| f.level == Level::Critical)
}

fn openclaw_table(
    history: View<'_>,
    cur: Current<'_>,
    s: &Settings,
    rules: Rules,
) -> Option<Finding> {
    let d = &s.detectors;
    let poll = cur.kind.is_poll();
    if d.unknown_tool_repeat {
        if let Some(f) = unknown_tool::detect(history, cur, s, rules.sticky) {
            return Some(f);
        }
    }
    let streak = no_progress::streak(history, cur.tool, cur.call);
    if d.global_circuit_breaker && streak.count >= s.global_circuit_breaker_threshold {
        return Some(no_progress::global_finding(cur, &streak));
    }
    if poll && d.known_poll_no_progress {
        if streak.count >= s.critical_threshold {
            return Some(no_progress::poll_finding(Level::Critical, cur, &streak));
        }
        if streak.count >= s.warning_threshold {
            return Some(no_progress::poll_finding(Level::Warning, cur, &streak));
        }
    }
    if d.ping_pong {
        if let Some(f) = ping_pong::detect(history, cur, s, rules.sticky) {
            return Some(f);
        }
    }
    if !poll && d.generic_repeat && streak.count >= s.critical_threshold {
        return Some(generic_repeat::critical(cur, &streak));
    }
    if d.argument_churn {
        if let Some(f) = argument_churn::detect(history, cur, s) {
            return Some(f);
        }
    }
    if !poll && d.generic_repeat {
        return generic_repeat::warning(history, cur, s);
    }
    None
}

/// Short hex of a digest for keys.
pub(crate) fn hx(d: Digest) -> String {
    d.short(16)
}
