//! `deloop check`: the whole flow ([`run`]: transcript bytes in, verdicts
//! out, shared by the command line and the server) and its output formats.
//!
//! JSON lines (`--json`): one object per call event, in order,
//! `{"index", "tool", "level", "detector", "count", "message", "fingerprint"}`
//! (`detector`, `count` and `fingerprint` are `null` when the call is ok),
//! then one `{"summary": {...}}` line.
//!
//! Both outputs stream: each call is written as soon as its verdict is
//! settled ([`Sink::drain`]), so memory does not grow with the transcript.
//! The human timeline holds back at most [`LOOKBACK`] calls until the first
//! blocked call, so that it can mark where that loop started.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Write};

use deloop_core::loops::replay::{CallVerdict, Replay};
use deloop_core::loops::{Level, Profile};
use serde::Serialize;

mod flow;

pub use flow::{run, CheckError, CheckOptions};

/// Calls the human timeline holds back before the first critical verdict.
pub const LOOKBACK: usize = 1024;

/// Distinct warning keys remembered beyond [`LOOKBACK`] (memory bound).
const RELEASED_KEYS: usize = 4096;

/// Totals over a transcript.
#[derive(Debug, Clone, Serialize)]
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
    /// [`DEFAULT_MAX_OPEN`] calls later (set by [`run`]; not in the JSON
    /// summary line).
    ///
    /// [`DEFAULT_MAX_OPEN`]: deloop_core::loops::replay::DEFAULT_MAX_OPEN
    #[serde(skip)]
    pub forgotten_calls: usize,
    /// Late results of those calls, ignored (set by [`run`]; not in the
    /// JSON summary line).
    #[serde(skip)]
    pub ignored_results: usize,
}

impl Summary {
    /// Totals of no call yet.
    pub fn empty(profile: Profile, format: &'static str) -> Self {
        Summary {
            profile: profile.name(),
            format,
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

/// Where the loop that led to the critical verdict `at` began: the first
/// call the detector counted (an estimate for interleaved patterns), or the
/// first earlier non-ok verdict of the same pattern. `held` are the calls
/// before `at` still held back (at most [`LOOKBACK`]); the start is never
/// placed before them, and is the oldest of them when the pattern already
/// warned before them (`warned_earlier`).
fn loop_start(held: &VecDeque<CallVerdict>, at: &CallVerdict, warned_earlier: bool) -> usize {
    let v = &at.verdict;
    let count = v.count.unwrap_or(0) as usize;
    let back = match v.detector.map(|d| d.as_str()) {
        Some("ping_pong") | Some("compaction_loop_persisted") | Some("anti_loop_protocol") => {
            count.saturating_sub(1)
        }
        _ => count,
    };
    let key = v.key.as_deref();
    let first_same = held
        .iter()
        .find(|c| c.verdict.level != Level::Ok && c.verdict.key.as_deref() == key)
        .map(|c| c.index);
    let by_count = at.index.saturating_sub(back);
    let start = first_same.map_or(by_count, |f| f.min(by_count));
    let oldest = held.front().map_or(at.index, |c| c.index);
    if warned_earlier {
        return oldest;
    }
    start.max(oldest)
}

/// A group of consecutive non-ok calls with the same level and detector.
struct Group {
    level: Level,
    detector: &'static str,
    first: usize,
    last: usize,
    lo: u32,
    hi: u32,
    terminate: bool,
}

/// The human timeline, written as it goes: runs of ok calls collapsed,
/// every warning and critical on its own line (consecutive ones of one
/// detector grouped), the start of the first blocked loop marked.
struct Timeline {
    /// Calls held back until the first critical verdict (at most [`LOOKBACK`]).
    held: VecDeque<CallVerdict>,
    /// Keys of non-ok verdicts written before the first critical one (capped).
    released_keys: std::collections::HashSet<String>,
    seen_critical: bool,
    ok_run: Option<(usize, usize)>,
    group: Option<Group>,
}

impl Timeline {
    fn new() -> Self {
        Timeline {
            held: VecDeque::new(),
            released_keys: std::collections::HashSet::new(),
            seen_critical: false,
            ok_run: None,
            group: None,
        }
    }

    fn push(&mut self, out: &mut dyn Write, c: CallVerdict) -> io::Result<()> {
        if self.seen_critical {
            return self.line(out, &c);
        }
        if c.verdict.level == Level::Critical {
            self.seen_critical = true;
            let earlier = c
                .verdict
                .key
                .as_ref()
                .is_some_and(|k| self.released_keys.contains(k));
            let start = loop_start(&self.held, &c, earlier);
            while let Some(h) = self.held.pop_front() {
                if h.index == start {
                    self.mark(out, start)?;
                }
                self.line(out, &h)?;
            }
            if c.index == start {
                self.mark(out, start)?;
            }
            return self.line(out, &c);
        }
        self.held.push_back(c);
        if self.held.len() > LOOKBACK {
            if let Some(h) = self.held.pop_front() {
                if let Some(k) = &h.verdict.key {
                    if h.verdict.level != Level::Ok && self.released_keys.len() < RELEASED_KEYS {
                        self.released_keys.insert(k.clone());
                    }
                }
                self.line(out, &h)?;
            }
        }
        Ok(())
    }

    fn mark(&mut self, out: &mut dyn Write, at: usize) -> io::Result<()> {
        self.flush_ok(out)?;
        self.end_group(out)?;
        writeln!(out, "  ---- the loop starts here (call #{at}) ----")
    }

    fn flush_ok(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if let Some((a, b)) = self.ok_run.take() {
            if a == b {
                writeln!(out, "  #{a:<5} ok")?;
            } else {
                writeln!(out, "  #{a}-#{b}  {} calls ok", b - a + 1)?;
            }
        }
        Ok(())
    }

    fn end_group(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if let Some(g) = self.group.take() {
            if g.last > g.first {
                let what = if g.level == Level::Critical {
                    "blocked"
                } else {
                    "warned"
                };
                writeln!(
                    out,
                    "  #{}-#{}  {} more calls {what} by {} (count {}..{})",
                    g.first + 1,
                    g.last,
                    g.last - g.first,
                    g.detector,
                    g.lo,
                    g.hi
                )?;
            }
        }
        Ok(())
    }

    fn line(&mut self, out: &mut dyn Write, c: &CallVerdict) -> io::Result<()> {
        let v = &c.verdict;
        if v.level == Level::Ok {
            self.end_group(out)?;
            self.ok_run = match self.ok_run {
                Some((a, _)) => Some((a, c.index)),
                None => Some((c.index, c.index)),
            };
            return Ok(());
        }
        self.flush_ok(out)?;
        let det = v.detector.map(|d| d.as_str()).unwrap_or("-");
        let count = v.count.unwrap_or(0);
        if let Some(g) = self.group.as_mut() {
            if g.level == v.level
                && g.detector == det
                && g.last + 1 == c.index
                && g.terminate == v.terminate_run
            {
                g.last = c.index;
                g.lo = g.lo.min(count);
                g.hi = g.hi.max(count);
                return Ok(());
            }
        }
        self.end_group(out)?;
        self.group = Some(Group {
            level: v.level,
            detector: det,
            first: c.index,
            last: c.index,
            lo: count,
            hi: count,
            terminate: v.terminate_run,
        });
        let mark = if v.level == Level::Critical {
            "BLOCK"
        } else {
            "warn "
        };
        writeln!(
            out,
            "  #{:<5} {mark} {:<16} {det} x{count}{}",
            c.index,
            truncate(&c.tool, 16),
            if v.terminate_run {
                "  [end the run]"
            } else {
                ""
            }
        )?;
        writeln!(out, "          {}", v.message)?;
        if let Some(fp) = &v.fingerprint {
            writeln!(out, "          fingerprint {fp}")?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut dyn Write) -> io::Result<()> {
        while let Some(h) = self.held.pop_front() {
            self.line(out, &h)?;
        }
        self.end_group(out)?;
        self.flush_ok(out)
    }
}

/// Where settled verdicts go: JSON lines or the human timeline, written as
/// they come, with the totals kept on the way.
pub struct Sink<'a, W: Write> {
    out: &'a mut W,
    json: bool,
    summary: Summary,
    timeline: Timeline,
    started: bool,
}

impl<'a, W: Write> Sink<'a, W> {
    /// A sink writing to `out` (`json`: JSON lines, else the human timeline).
    pub fn new(out: &'a mut W, json: bool, profile: Profile, format: &'static str) -> Self {
        Sink {
            out,
            json,
            summary: Summary::empty(profile, format),
            timeline: Timeline::new(),
            started: false,
        }
    }

    /// Writes one settled verdict.
    pub fn push(&mut self, c: CallVerdict) -> io::Result<()> {
        self.summary.add(&c);
        if self.json {
            return write_json_call(self.out, &c);
        }
        if !self.started {
            self.started = true;
            writeln!(
                self.out,
                "deloop check: {} format, profile {}",
                self.summary.format, self.summary.profile
            )?;
        }
        self.timeline.push(self.out, c)
    }

    /// Writes every verdict the replay has settled, in order.
    pub fn drain(&mut self, replay: &mut Replay) -> io::Result<()> {
        while let Some(c) = replay.pop_settled() {
            self.push(c)?;
        }
        Ok(())
    }

    /// Flushes what was written so far (before an error is reported).
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.json {
            self.timeline.finish(self.out)?;
        }
        self.out.flush()
    }

    /// Ends the output (the rest of the timeline, or the summary line) and
    /// returns the totals.
    pub fn finish(mut self) -> io::Result<Summary> {
        let s = &self.summary;
        if self.json {
            write_json_summary(self.out, s)?;
        } else {
            if !self.started {
                writeln!(
                    self.out,
                    "deloop check: {} format, profile {}",
                    s.format, s.profile
                )?;
            }
            self.timeline.finish(self.out)?;
            match s.first_critical {
                Some(at) => writeln!(
                    self.out,
                    "result: LOOP - {} calls, {} critical, {} warning; first blocked call #{at}{}",
                    s.calls,
                    s.criticals,
                    s.warnings,
                    s.terminate_at
                        .map(|t| format!(", run should end at #{t}"))
                        .unwrap_or_default()
                )?,
                None => writeln!(
                    self.out,
                    "result: ok - {} calls, no critical verdict ({} warning)",
                    s.calls, s.warnings
                )?,
            }
        }
        self.out.flush()?;
        Ok(self.summary)
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('~');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deloop_core::loops::{Detector, Verdict};

    fn cv(index: usize, level: Level, key: &str, count: u32) -> CallVerdict {
        let mut verdict = Verdict::ok();
        if level != Level::Ok {
            verdict.level = level;
            verdict.detector = Some(Detector::GenericRepeat);
            verdict.count = Some(count);
            verdict.key = Some(key.into());
            verdict.message = "m".into();
        }
        CallVerdict {
            index,
            tool: std::sync::Arc::from("read"),
            verdict,
            from_outcome: false,
        }
    }

    fn timeline(verdicts: Vec<CallVerdict>) -> String {
        let mut out = Vec::new();
        let mut sink = Sink::new(&mut out, false, Profile::Default, "events");
        for c in verdicts {
            sink.push(c).unwrap();
        }
        sink.finish().unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The loop-start mark: by the detector's count, or the first earlier
    /// warning of the same pattern; beyond the lookback, the oldest call
    /// still held.
    #[test]
    fn loop_start_mark() {
        let mut v: Vec<_> = (0..50).map(|i| cv(i, Level::Ok, "", 0)).collect();
        v.push(cv(50, Level::Critical, "k", 20));
        assert!(timeline(v).contains("loop starts here (call #30)"));

        let mut v: Vec<_> = (0..50).map(|i| cv(i, Level::Ok, "", 0)).collect();
        v[10] = cv(10, Level::Warning, "k", 10);
        v.push(cv(50, Level::Critical, "k", 20));
        assert!(timeline(v).contains("loop starts here (call #10)"));

        let n = LOOKBACK + 500;
        let mut v: Vec<_> = (0..n).map(|i| cv(i, Level::Ok, "", 0)).collect();
        v[3] = cv(3, Level::Warning, "k", 10);
        v.push(cv(n, Level::Critical, "k", 20));
        let text = timeline(v);
        let oldest = n - LOOKBACK;
        assert!(
            text.contains(&format!("loop starts here (call #{oldest})")),
            "{text}"
        );
        assert!(text.contains(&format!("result: LOOP - {} calls", n + 1)));
    }

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
