//! Output formats (human and JSON) for the `check` command family.
//!
//! JSON lines (`--json`): one object per call event, in order,
//! `{"index", "tool", "level", "detector", "count", "message", "fingerprint"}`
//! (`detector`, `count` and `fingerprint` are `null` when the call is ok),
//! then one `{"summary": {...}}` line.

use std::collections::BTreeMap;
use std::io::{self, Write};

use deloop_core::loops::replay::CallVerdict;
use deloop_core::loops::{Level, Profile};
use serde::Serialize;

/// Totals over a transcript.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Profile used.
    pub profile: &'static str,
    /// Transcript format read.
    pub format: &'static str,
    /// Number of call events.
    pub calls: usize,
    /// Calls with a warning verdict.
    pub warnings: usize,
    /// Calls with a critical verdict.
    pub criticals: usize,
    /// Index of the first critical call, if any.
    pub first_critical: Option<usize>,
    /// Index of the first call where the guard says to end the run, if any.
    pub terminate_at: Option<usize>,
    /// Non-ok verdicts per detector.
    pub detectors: BTreeMap<&'static str, usize>,
}

impl Summary {
    /// Computes the totals.
    pub fn new(verdicts: &[CallVerdict], profile: Profile, format: &'static str) -> Self {
        let mut s = Summary {
            profile: profile.name(),
            format,
            calls: verdicts.len(),
            warnings: 0,
            criticals: 0,
            first_critical: None,
            terminate_at: None,
            detectors: BTreeMap::new(),
        };
        for c in verdicts {
            let v = &c.verdict;
            match v.level {
                Level::Ok => continue,
                Level::Warning => s.warnings += 1,
                Level::Critical => {
                    s.criticals += 1;
                    s.first_critical.get_or_insert(c.index);
                }
            }
            if v.terminate_run {
                s.terminate_at.get_or_insert(c.index);
            }
            if let Some(d) = v.detector {
                *s.detectors.entry(d.as_str()).or_default() += 1;
            }
        }
        s
    }
}

#[derive(Serialize)]
struct Line<'a> {
    index: usize,
    tool: &'a str,
    level: &'static str,
    detector: Option<&'static str>,
    count: Option<u32>,
    message: &'a str,
    fingerprint: Option<&'a str>,
}

#[derive(Serialize)]
struct SummaryLine<'a> {
    summary: &'a Summary,
}

/// Writes the JSON lines output.
pub fn write_json(
    out: &mut impl Write,
    verdicts: &[CallVerdict],
    summary: &Summary,
) -> io::Result<()> {
    for c in verdicts {
        write_json_call(out, c)?;
    }
    write_json_summary(out, summary)
}

/// Writes one call's JSON line (streaming output).
pub fn write_json_call(out: &mut impl Write, c: &CallVerdict) -> io::Result<()> {
    let v = &c.verdict;
    let line = Line {
        index: c.index,
        tool: &c.tool,
        level: v.level.as_str(),
        detector: v.detector.map(|d| d.as_str()),
        count: v.count,
        message: &v.message,
        fingerprint: v.fingerprint.as_deref(),
    };
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n")
}

/// Writes the final `{"summary": {...}}` line.
pub fn write_json_summary(out: &mut impl Write, summary: &Summary) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &SummaryLine { summary })?;
    out.write_all(b"\n")
}

/// Where the loop that led to the first critical verdict began: the first
/// call the detector counted (an estimate for interleaved patterns).
fn loop_start(verdicts: &[CallVerdict], at: usize) -> usize {
    let v = &verdicts[at].verdict;
    let count = v.count.unwrap_or(0) as usize;
    let back = match v.detector.map(|d| d.as_str()) {
        Some("ping_pong") | Some("compaction_loop_persisted") | Some("anti_loop_protocol") => {
            count.saturating_sub(1)
        }
        _ => count,
    };
    // The first non-ok verdict of the same pattern, if earlier.
    let key = v.key.as_deref();
    let first_same = verdicts[..at]
        .iter()
        .position(|c| c.verdict.level != Level::Ok && c.verdict.key.as_deref() == key);
    let by_count = at.saturating_sub(back);
    first_same.map_or(by_count, |f| f.min(by_count))
}

/// Writes the human timeline: runs of ok calls collapsed, every warning and
/// critical on its own line, the start of the first blocked loop marked.
pub fn write_human(
    out: &mut impl Write,
    verdicts: &[CallVerdict],
    summary: &Summary,
) -> io::Result<()> {
    writeln!(
        out,
        "deloop check: {} calls ({} format, profile {})",
        summary.calls, summary.format, summary.profile
    )?;
    let start = summary.first_critical.map(|at| loop_start(verdicts, at));
    let mut ok_run: Option<(usize, usize)> = None;
    let flush = |out: &mut dyn Write, run: &mut Option<(usize, usize)>| -> io::Result<()> {
        if let Some((a, b)) = run.take() {
            if a == b {
                writeln!(out, "  #{a:<5} ok")?;
            } else {
                writeln!(out, "  #{a}-#{b}  {} calls ok", b - a + 1)?;
            }
        }
        Ok(())
    };
    // Consecutive non-ok calls with the same level and detector are one
    // group: the first is shown in full, the rest on one line.
    let mut group: Option<(Level, &'static str, usize, usize, u32, u32, bool)> = None;
    let end_group = |out: &mut dyn Write,
                     g: &mut Option<(Level, &'static str, usize, usize, u32, u32, bool)>|
     -> io::Result<()> {
        if let Some((level, det, a, b, lo, hi, _)) = g.take() {
            if b > a {
                let what = if level == Level::Critical {
                    "blocked"
                } else {
                    "warned"
                };
                writeln!(
                    out,
                    "  #{}-#{b}  {} more calls {what} by {det} (count {lo}..{hi})",
                    a + 1,
                    b - a
                )?;
            }
        }
        Ok(())
    };
    for c in verdicts {
        if Some(c.index) == start {
            flush(out, &mut ok_run)?;
            end_group(out, &mut group)?;
            writeln!(out, "  ---- the loop starts here (call #{}) ----", c.index)?;
        }
        let v = &c.verdict;
        if v.level == Level::Ok {
            end_group(out, &mut group)?;
            ok_run = match ok_run {
                Some((a, _)) => Some((a, c.index)),
                None => Some((c.index, c.index)),
            };
            continue;
        }
        flush(out, &mut ok_run)?;
        let det = v.detector.map(|d| d.as_str()).unwrap_or("-");
        let count = v.count.unwrap_or(0);
        if let Some(g) = group.as_mut() {
            if g.0 == v.level && g.1 == det && g.3 + 1 == c.index && g.6 == v.terminate_run {
                g.3 = c.index;
                g.4 = g.4.min(count);
                g.5 = g.5.max(count);
                continue;
            }
        }
        end_group(out, &mut group)?;
        group = Some((
            v.level,
            det,
            c.index,
            c.index,
            count,
            count,
            v.terminate_run,
        ));
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
    }
    end_group(out, &mut group)?;
    flush(out, &mut ok_run)?;
    match summary.first_critical {
        Some(at) => writeln!(
            out,
            "result: LOOP - {} critical, {} warning; first blocked call #{at}{}",
            summary.criticals,
            summary.warnings,
            summary
                .terminate_at
                .map(|t| format!(", run should end at #{t}"))
                .unwrap_or_default()
        ),
        None => writeln!(
            out,
            "result: ok - no critical verdict ({} warning)",
            summary.warnings
        ),
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
