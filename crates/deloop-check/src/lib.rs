//! # deloop-check
//!
//! The flow of `deloop check`, as a library: a transcript's bytes in, one
//! typed verdict per call out, then the totals. The command line, the
//! HTTP server (`POST /v1/check`), the MCP `check_transcript` tool, the
//! web console and the Python and Node packages all run this one flow and
//! differ only in the [`CheckSink`] they hand it (the role of ripgrep's
//! `Sink`): deloop-render's JSON lines and human timeline write the
//! verdicts out, [`Collect`] keeps them.
//!
//! The pure parts (format detection, parsing a line into events, the
//! replay's decisions, UTF-8 decoding) are `deloop_core::loops::transcript`
//! and `deloop_core::loops::replay`; this crate adds what is not pure:
//! reading the input, and parsing the events format on a second thread.
//! It formats nothing.
//!
//! ```
//! use deloop_check::{run, CheckOptions, Collect};
//! use deloop_core::loops::Level;
//!
//! let mut transcript = String::new();
//! for i in 0..25 {
//!     transcript += &format!("{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{}}}}\n");
//!     transcript += &format!("{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":\"same\"}}\n");
//! }
//! let mut verdicts = Collect::default();
//! let summary = run(transcript.as_bytes(), &CheckOptions::default(), &mut verdicts).unwrap();
//! assert_eq!((summary.format, summary.calls), ("events", 25));
//! assert!(summary.criticals > 0);
//! let verdicts = verdicts.into_verdicts();
//! assert_eq!(verdicts.len(), 25);
//! assert_eq!(verdicts[0].verdict.level, Level::Ok);
//! assert_eq!(summary.first_critical.map(|i| verdicts[i].verdict.level), Some(Level::Critical));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::io;

use deloop_core::loops::replay::CallVerdict;
use deloop_core::loops::transcript::TranscriptFormat;
use deloop_core::loops::Profile;

mod flow;
mod summary;

pub use flow::{run, CheckError, CheckOptions};
pub use summary::Summary;

/// Where [`run`] hands what it finds, as it finds it: the format once it
/// is known, each call's verdict as soon as it is settled (in transcript
/// order), then the totals, or word that bad input stopped the replay.
///
/// An error from the sink (a closed pipe, an output limit) stops the
/// replay; [`run`] returns it as [`CheckError::Io`].
pub trait CheckSink {
    /// The replay begins: its profile and the transcript's format (never
    /// [`TranscriptFormat::Auto`]). Called once, before any verdict.
    fn begin(&mut self, profile: Profile, format: TranscriptFormat) -> io::Result<()> {
        let _ = (profile, format);
        Ok(())
    }

    /// One call's settled verdict.
    fn call(&mut self, verdict: CallVerdict) -> io::Result<()>;

    /// The end of the transcript: the totals. Called once, after the last
    /// verdict, unless the replay stopped.
    fn summary(&mut self, summary: &Summary) -> io::Result<()>;

    /// Bad input (or a failed read) stopped the replay: every verdict
    /// settled before it has been handed over, and no summary follows.
    /// A sink that holds verdicts back writes them out here.
    fn stopped(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<S: CheckSink + ?Sized> CheckSink for &mut S {
    fn begin(&mut self, profile: Profile, format: TranscriptFormat) -> io::Result<()> {
        (**self).begin(profile, format)
    }

    fn call(&mut self, verdict: CallVerdict) -> io::Result<()> {
        (**self).call(verdict)
    }

    fn summary(&mut self, summary: &Summary) -> io::Result<()> {
        (**self).summary(summary)
    }

    fn stopped(&mut self) -> io::Result<()> {
        (**self).stopped()
    }
}

/// A sink that keeps every verdict, in order, for callers that answer
/// with them all at once (MCP, the console, the bindings). Memory grows
/// with the transcript; [`Collect::with_limit`] caps it.
#[derive(Debug, Clone, Default)]
pub struct Collect {
    verdicts: Vec<CallVerdict>,
    limit: Option<usize>,
}

impl Collect {
    /// A sink that keeps at most `limit` verdicts: one more is an error
    /// that stops the replay.
    pub fn with_limit(limit: usize) -> Self {
        Collect {
            verdicts: Vec::new(),
            limit: Some(limit),
        }
    }

    /// The verdicts kept so far, in transcript order.
    pub fn verdicts(&self) -> &[CallVerdict] {
        &self.verdicts
    }

    /// The verdicts kept, in transcript order.
    pub fn into_verdicts(self) -> Vec<CallVerdict> {
        self.verdicts
    }
}

impl CheckSink for Collect {
    fn call(&mut self, verdict: CallVerdict) -> io::Result<()> {
        if self.limit.is_some_and(|l| self.verdicts.len() >= l) {
            return Err(io::Error::other(format!(
                "the transcript has more than {} calls",
                self.verdicts.len()
            )));
        }
        self.verdicts.push(verdict);
        Ok(())
    }

    fn summary(&mut self, _: &Summary) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(n: usize) -> String {
        (0..n)
            .map(|i| {
                format!(
                    "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"t{i}\",\"args\":{{}}}}\n\
                     {{\"type\":\"result\",\"id\":\"c{i}\",\"result\":{i}}}\n"
                )
            })
            .collect()
    }

    #[test]
    fn collect_keeps_every_verdict_in_order() {
        let mut sink = Collect::default();
        let s = run(calls(5).as_bytes(), &CheckOptions::default(), &mut sink).unwrap();
        assert_eq!(s.calls, 5);
        let tools: Vec<_> = sink.verdicts().iter().map(|c| &*c.tool).collect();
        assert_eq!(tools, ["t0", "t1", "t2", "t3", "t4"]);
    }

    #[test]
    fn collect_limit_stops_the_replay() {
        let mut sink = Collect::with_limit(3);
        let err = run(calls(5).as_bytes(), &CheckOptions::default(), &mut sink).unwrap_err();
        assert!(matches!(err, CheckError::Io(_)), "{err}");
        assert!(err.to_string().contains("more than 3 calls"), "{err}");
        assert_eq!(sink.verdicts().len(), 3);
    }
}
