//! The human timeline of `deloop check` ([`HumanTimeline`]).

use std::collections::VecDeque;
use std::io::{self, Write};

use deloop_check::{CheckSink, Summary};
use deloop_core::loops::replay::CallVerdict;
use deloop_core::loops::transcript::TranscriptFormat;
use deloop_core::loops::{Level, Profile};

/// Calls the human timeline holds back before the first critical verdict.
pub const LOOKBACK: usize = 1024;

/// Distinct warning keys remembered beyond [`LOOKBACK`] (memory bound).
const RELEASED_KEYS: usize = 4096;

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
/// The human timeline of `deloop check`, written to `W` as verdicts come:
/// a header, runs of ok calls collapsed, every warning and critical (the
/// start of the first blocked loop marked), then the result line.
pub struct HumanTimeline<W: Write> {
    out: W,
    header: Option<(Profile, TranscriptFormat)>,
    timeline: Timeline,
    started: bool,
}

impl<W: Write> HumanTimeline<W> {
    /// A timeline written to `out`.
    pub fn new(out: W) -> Self {
        HumanTimeline {
            out,
            header: None,
            timeline: Timeline::new(),
            started: false,
        }
    }

    /// The first line, once: `deloop check: <format> format, profile <profile>`.
    fn start(&mut self) -> io::Result<()> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        let (profile, format) = self
            .header
            .unwrap_or((Profile::default(), TranscriptFormat::Events));
        writeln!(
            self.out,
            "deloop check: {format} format, profile {}",
            profile.name()
        )
    }
}

impl<W: Write> CheckSink for HumanTimeline<W> {
    fn begin(&mut self, profile: Profile, format: TranscriptFormat) -> io::Result<()> {
        self.header = Some((profile, format));
        Ok(())
    }

    fn call(&mut self, c: CallVerdict) -> io::Result<()> {
        self.start()?;
        self.timeline.push(&mut self.out, c)
    }

    fn summary(&mut self, s: &Summary) -> io::Result<()> {
        self.start()?;
        self.timeline.finish(&mut self.out)?;
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
        self.out.flush()
    }

    /// Writes out the calls held back, closing the timeline off.
    fn stopped(&mut self) -> io::Result<()> {
        self.timeline.finish(&mut self.out)?;
        self.out.flush()
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
        let mut sink = HumanTimeline::new(Vec::new());
        sink.begin(Profile::Default, TranscriptFormat::Events)
            .unwrap();
        let mut summary = Summary::empty(Profile::Default, TranscriptFormat::Events);
        for c in verdicts {
            summary.add(&c);
            sink.call(c).unwrap();
        }
        sink.summary(&summary).unwrap();
        String::from_utf8(sink.out).unwrap()
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
}
