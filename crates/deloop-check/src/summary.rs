//! The totals of a replayed transcript.

use std::collections::BTreeMap;

use deloop_core::loops::replay::CallVerdict;
use deloop_core::loops::transcript::TranscriptFormat;
use deloop_core::loops::{Level, Profile};
use serde::Serialize;

/// Totals over a transcript: what [`run`](crate::run) returns and hands to
/// [`CheckSink::summary`](crate::CheckSink::summary). Serialised, it is the
/// `summary` object of `deloop check --json`'s last line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = CheckSummary))]
pub struct Summary {
    /// Profile used.
    #[cfg_attr(feature = "openapi", schema(value_type = deloop_core::loops::Profile))]
    pub profile: &'static str,
    /// Transcript format read (`events`, `openai` or `anthropic`).
    #[cfg_attr(feature = "openapi", schema(value_type = deloop_core::loops::transcript::TranscriptFormat))]
    pub format: &'static str,
    /// Number of call events.
    pub calls: usize,
    /// Calls with a warning verdict.
    pub warnings: usize,
    /// Calls with a critical verdict.
    pub criticals: usize,
    /// Index of the first critical call, if any.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub first_critical: Option<usize>,
    /// Index of the first call where the guard says to end the run, if any.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub terminate_at: Option<usize>,
    /// Non-ok verdicts per detector (keys: the detectors' names).
    pub detectors: BTreeMap<&'static str, usize>,
    /// Calls settled without their result, still waiting for it
    /// [`DEFAULT_MAX_OPEN`] calls later (not in the JSON summary line).
    ///
    /// [`DEFAULT_MAX_OPEN`]: deloop_core::loops::replay::DEFAULT_MAX_OPEN
    #[serde(skip)]
    pub forgotten_calls: usize,
    /// Late results of those calls, ignored (not in the JSON summary line).
    #[serde(skip)]
    pub ignored_results: usize,
}

impl Summary {
    /// Totals of no call yet. `format` is the format read:
    /// [`TranscriptFormat::Auto`] counts as `events`.
    pub fn empty(profile: Profile, format: TranscriptFormat) -> Self {
        Summary {
            profile: profile.name(),
            format: match format {
                TranscriptFormat::Auto => TranscriptFormat::Events.as_str(),
                f => f.as_str(),
            },
            calls: 0,
            warnings: 0,
            criticals: 0,
            first_critical: None,
            terminate_at: None,
            detectors: BTreeMap::new(),
            forgotten_calls: 0,
            ignored_results: 0,
        }
    }

    /// Counts one more call.
    pub fn add(&mut self, c: &CallVerdict) {
        self.calls += 1;
        let v = &c.verdict;
        match v.level {
            Level::Ok => return,
            Level::Warning => self.warnings += 1,
            Level::Critical => {
                self.criticals += 1;
                self.first_critical.get_or_insert(c.index);
            }
        }
        if v.terminate_run {
            self.terminate_at.get_or_insert(c.index);
        }
        if let Some(d) = v.detector {
            *self.detectors.entry(d.as_str()).or_default() += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deloop_core::loops::{Detector, Verdict};

    fn cv(index: usize, level: Level, terminate_run: bool) -> CallVerdict {
        let mut verdict = Verdict::ok();
        if level != Level::Ok {
            verdict.level = level;
            verdict.detector = Some(Detector::PingPong);
            verdict.terminate_run = terminate_run;
        }
        CallVerdict {
            index,
            tool: std::sync::Arc::from("read"),
            verdict,
            from_outcome: false,
        }
    }

    #[test]
    fn counts_levels_firsts_and_detectors() {
        let mut s = Summary::empty(Profile::Strict, TranscriptFormat::Auto);
        assert_eq!((s.profile, s.format), ("strict", "events"));
        for c in [
            cv(0, Level::Ok, false),
            cv(1, Level::Warning, false),
            cv(2, Level::Critical, false),
            cv(3, Level::Critical, true),
            cv(4, Level::Critical, true),
        ] {
            s.add(&c);
        }
        assert_eq!((s.calls, s.warnings, s.criticals), (5, 1, 3));
        assert_eq!((s.first_critical, s.terminate_at), (Some(2), Some(3)));
        assert_eq!(s.detectors.get("ping_pong"), Some(&4));
    }
}
