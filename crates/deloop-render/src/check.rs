//! `deloop check`'s output formats, as [`CheckSink`]s of the check flow
//! (`deloop_check::run`): [`JsonLines`] and [`HumanTimeline`].
//!
//! JSON lines (`--json`): one object per call event, in order,
//! `{"index", "tool", "level", "detector", "count", "message", "fingerprint"}`
//! ([`CheckCallLine`]; `detector`, `count` and `fingerprint` are `null` when
//! the call is ok), then one `{"summary": {...}}` line ([`CheckSummaryLine`]).
//!
//! Both outputs stream: each call is written as soon as the flow hands
//! over its verdict, so memory does not grow with the transcript. The
//! human timeline holds back at most [`LOOKBACK`] calls until the first
//! blocked call, so that it can mark where that loop started.
//!
//! ```
//! use deloop_check::{run, CheckOptions};
//! use deloop_render::check::JsonLines;
//!
//! let mut transcript = String::new();
//! for i in 0..25 {
//!     transcript += &format!("{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{}}}}\n");
//!     transcript += &format!("{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":\"same\"}}\n");
//! }
//! let mut out = Vec::new();
//! let summary = run(transcript.as_bytes(), &CheckOptions::default(), &mut JsonLines::new(&mut out)).unwrap();
//! assert_eq!(summary.calls, 25);
//! assert!(summary.criticals > 0);
//! let text = String::from_utf8(out).unwrap();
//! assert_eq!(text.lines().count(), 26); // 25 calls and the summary
//! ```

use std::io::{self, Write};

use deloop_check::{CheckSink, Summary};
use deloop_core::loops::replay::CallVerdict;
use serde::Serialize;

mod timeline;

pub use timeline::{HumanTimeline, LOOKBACK};

/// The last JSON line of `deloop check --json`: `{"summary": {...}}`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CheckSummaryLine<'a> {
    /// Totals over the transcript.
    pub summary: &'a Summary,
}

/// One call's JSON line of `deloop check --json`, in transcript order.
/// [`write_json_call`] writes exactly the bytes `serde_json` writes for
/// this value (a test holds it to that), without building it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CheckCallLine<'a> {
    /// 0-based index of the call in the transcript.
    pub index: usize,
    /// The tool called.
    pub tool: &'a str,
    /// `ok`, `warning` or `critical`.
    #[cfg_attr(feature = "openapi", schema(value_type = deloop_core::loops::Level))]
    pub level: &'static str,
    /// The detector that fired (null when ok).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<deloop_core::loops::Detector>, required))]
    pub detector: Option<&'static str>,
    /// The detector's count (null when ok).
    #[cfg_attr(feature = "openapi", schema(required))]
    pub count: Option<u32>,
    /// A message for the model or the operator (empty when ok).
    pub message: &'a str,
    /// `AGENT::<agent>::<operation>::<context>::<result-hash>` (null when ok).
    #[cfg_attr(feature = "openapi", schema(required))]
    pub fingerprint: Option<&'a str>,
}

impl<'a> CheckCallLine<'a> {
    /// The line of one call.
    pub fn new(c: &'a CallVerdict) -> Self {
        let v = &c.verdict;
        CheckCallLine {
            index: c.index,
            tool: &c.tool,
            level: v.level.as_str(),
            detector: v.detector.map(|d| d.as_str()),
            count: v.count,
            message: &v.message,
            fingerprint: v.fingerprint.as_deref(),
        }
    }
}

/// A whole check at once, `{"verdicts": [...], "summary": {...}}`: the
/// lines of `deloop check --json` gathered into one value (the answer of
/// the MCP `check_transcript` tool).
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport<'a> {
    /// One [`CheckCallLine`] per call, in transcript order.
    pub verdicts: Vec<CheckCallLine<'a>>,
    /// Totals over the transcript.
    pub summary: &'a Summary,
}

impl<'a> CheckReport<'a> {
    /// The report of `verdicts` (every call, in order) and their `summary`.
    pub fn new(verdicts: &'a [CallVerdict], summary: &'a Summary) -> Self {
        CheckReport {
            verdicts: verdicts.iter().map(CheckCallLine::new).collect(),
            summary,
        }
    }
}

/// Writes a JSON string literal exactly as `serde_json` does (the common
/// case, nothing to escape, is copied as is).
fn json_str(out: &mut (impl Write + ?Sized), s: &str) -> io::Result<()> {
    if s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        serde_json::to_writer(&mut *out, s)?;
        return Ok(());
    }
    out.write_all(b"\"")?;
    out.write_all(s.as_bytes())?;
    out.write_all(b"\"")
}

/// Writes an unsigned integer in decimal without allocating.
fn json_uint(out: &mut (impl Write + ?Sized), v: u64) -> io::Result<()> {
    out.write_all(itoa::Buffer::new().format(v).as_bytes())
}

/// Writes one call's JSON line: the same bytes `serde_json` writes for
/// [`CheckCallLine`] (`{"index","tool","level","detector","count","message","fingerprint"}`).
pub fn write_json_call(out: &mut impl Write, c: &CallVerdict) -> io::Result<()> {
    let v = &c.verdict;
    out.write_all(b"{\"index\":")?;
    json_uint(out, c.index as u64)?;
    out.write_all(b",\"tool\":")?;
    json_str(out, &c.tool)?;
    out.write_all(b",\"level\":\"")?;
    out.write_all(v.level.as_str().as_bytes())?;
    out.write_all(b"\",\"detector\":")?;
    match v.detector {
        Some(d) => json_str(out, d.as_str())?,
        None => out.write_all(b"null")?,
    }
    out.write_all(b",\"count\":")?;
    match v.count {
        Some(n) => json_uint(out, u64::from(n))?,
        None => out.write_all(b"null")?,
    }
    out.write_all(b",\"message\":")?;
    json_str(out, &v.message)?;
    out.write_all(b",\"fingerprint\":")?;
    match &v.fingerprint {
        Some(f) => json_str(out, f)?,
        None => out.write_all(b"null")?,
    }
    out.write_all(b"}\n")
}

/// Writes the final `{"summary": {...}}` line.
pub fn write_json_summary(out: &mut impl Write, summary: &Summary) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &CheckSummaryLine { summary })?;
    out.write_all(b"\n")
}
/// The JSON lines of `deloop check --json`, written to `W` as verdicts
/// come: one [`CheckCallLine`] per call, then the [`CheckSummaryLine`].
#[derive(Debug)]
pub struct JsonLines<W: Write> {
    out: W,
}

impl<W: Write> JsonLines<W> {
    /// JSON lines written to `out`.
    pub fn new(out: W) -> Self {
        JsonLines { out }
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> CheckSink for JsonLines<W> {
    fn call(&mut self, c: CallVerdict) -> io::Result<()> {
        write_json_call(&mut self.out, &c)
    }

    fn summary(&mut self, summary: &Summary) -> io::Result<()> {
        write_json_summary(&mut self.out, summary)?;
        self.out.flush()
    }

    fn stopped(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use deloop_core::loops::{Detector, Level, Verdict};

    /// The hand-written JSON line is byte for byte what `serde_json`
    /// writes for the same fields, whatever the strings hold.
    #[test]
    fn json_line_matches_serde_json() {
        let strings = [
            "",
            "read",
            "quote \" backslash \\ slash /",
            "new\nline\ttab\rcr\u{8}\u{c}",
            "ctrl \u{0}\u{1}\u{1f} del \u{7f}",
            "ünïcödé ☃ 𝄞",
            "\u{2028}\u{2029}",
        ];
        for (i, s) in strings.iter().enumerate() {
            for critical in [false, true] {
                let verdict = if critical {
                    Verdict {
                        level: Level::Critical,
                        detector: Some(Detector::PingPong),
                        count: Some(u32::MAX),
                        message: s.to_string(),
                        fingerprint: Some(format!("AGENT::{s}")),
                        key: None,
                        terminate_run: true,
                    }
                } else {
                    Verdict::ok()
                };
                let c = CallVerdict {
                    index: usize::MAX - i,
                    tool: std::sync::Arc::from(*s),
                    verdict,
                    from_outcome: false,
                };
                let mut ours = Vec::new();
                write_json_call(&mut ours, &c).unwrap();
                let mut theirs = serde_json::to_vec(&CheckCallLine::new(&c)).unwrap();
                theirs.push(b'\n');
                assert_eq!(
                    String::from_utf8(ours).unwrap(),
                    String::from_utf8(theirs).unwrap()
                );
            }
        }
    }
}
