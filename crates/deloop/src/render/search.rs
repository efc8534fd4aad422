//! Output formats (human and JSON) for the `search` command family:
//! `deloop index` (progress bar, stats) and `deloop search` (hits).

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use deloop_index::{ChunkMatch, IndexStats, Progress, Retrieval, SearchOutcome};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

/// The `deloop index` progress on stderr: a bar when stderr is a terminal,
/// else one log line every `log_interval` (the interval is checked as items
/// complete, so a line needs at least one finished item). Nothing with
/// `--quiet`. Warnings are printed on stderr either way (unless quiet).
pub struct IndexProgress {
    bar: ProgressBar,
    quiet: bool,
    log: Option<ProgressLog>,
}

/// Interval logging for a non-terminal stderr.
struct ProgressLog {
    interval: Duration,
    started: Instant,
    last: std::cell::Cell<Instant>,
    total: std::cell::Cell<Option<u64>>,
}

impl IndexProgress {
    /// A bar that draws only when `stderr` is a terminal and not `quiet`;
    /// when stderr is not a terminal (a pipe, a log file), a line every
    /// `log_interval` instead.
    pub fn new(quiet: bool, log_interval: Duration) -> Self {
        let terminal = std::io::stderr().is_terminal();
        Self::with_terminal(quiet, log_interval, terminal)
    }

    fn with_terminal(quiet: bool, log_interval: Duration, terminal: bool) -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        if !quiet && terminal {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {per_sec} {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let now = Instant::now();
        let log = (!quiet && !terminal).then(|| ProgressLog {
            interval: log_interval,
            started: now,
            last: std::cell::Cell::new(now),
            total: std::cell::Cell::new(None),
        });
        Self { bar, quiet, log }
    }

    /// Reports one ingestion event.
    pub fn update(&self, p: Progress) {
        match p {
            Progress::Start { total } => {
                self.bar.set_length(total);
                if let Some(log) = &self.log {
                    log.total.set(Some(total));
                }
            }
            Progress::Item { done, name } => {
                self.bar.set_position(done);
                if let Some(log) = &self.log {
                    let now = Instant::now();
                    if now.duration_since(log.last.get()) >= log.interval {
                        log.last.set(now);
                        eprintln!(
                            "{}",
                            progress_line(done, log.total.get(), now - log.started)
                        );
                    }
                } else {
                    self.bar.set_message(short_name(&name));
                }
            }
            Progress::Warning { message } => {
                if !self.quiet {
                    self.bar.suspend(|| eprintln!("deloop: warning: {message}"));
                }
            }
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// One progress log line: `deloop: indexing: 120/5183 items (2.3%), 14.0 s, 8.6 items/s`.
pub fn progress_line(done: u64, total: Option<u64>, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
    match total {
        Some(t) if t > 0 => format!(
            "deloop: indexing: {done}/{t} items ({:.1}%), {secs:.1} s, {rate:.1} items/s",
            done as f64 * 100.0 / t as f64
        ),
        _ => format!("deloop: indexing: {done} items, {secs:.1} s, {rate:.1} items/s"),
    }
}

fn short_name(name: &str) -> String {
    let cwd = std::env::current_dir().ok();
    let p = Path::new(name);
    cwd.and_then(|c| p.strip_prefix(c).ok().map(|r| r.display().to_string()))
        .unwrap_or_else(|| name.to_string())
}

/// `deloop index` result: one JSON object, or a human summary.
pub fn index_stats(stats: &IndexStats, db: &str, json: bool) -> String {
    if json {
        let mut v = serde_json::to_value(stats).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("db".into(), json!(db));
            let rate = if stats.seconds > 0.0 {
                stats.chunks_written as f64 / stats.seconds
            } else {
                0.0
            };
            o.insert("chunks_per_second".into(), json!(rate));
        }
        return v.to_string();
    }
    let mut out = format!(
        "indexed {} into {}: {} updated, {} unchanged, {} removed, {} skipped; \
         {} chunks written, {} in the index; embedder {}; {:.1}s",
        plural(stats.seen, "document"),
        db,
        stats.updated,
        stats.unchanged,
        stats.removed,
        stats.failed,
        stats.chunks_written,
        stats.chunks_total,
        stats.embedder,
        stats.seconds
    );
    if stats.embedder == "none" {
        out.push_str("\n(no vectors: search is lexical only)");
    }
    out
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The id reported for a hit: the BEIR doc id, else the chunk id.
pub fn hit_id(m: &ChunkMatch) -> String {
    m.doc_id.clone().unwrap_or_else(|| m.chunk_id.to_string())
}

/// `deloop search QUERY --json`: one JSON object.
pub fn outcome_json(query: &str, requested: Retrieval, outcome: &SearchOutcome) -> String {
    let hits: Vec<_> = outcome
        .matches
        .iter()
        .map(|m| {
            json!({
                "id": hit_id(m),
                "chunk_id": m.chunk_id,
                "doc_id": m.doc_id,
                "score": m.score,
                "source": m.source,
                "start_line": m.start_line,
                "end_line": m.end_line,
                "heading_trail": m.heading_trail,
                "text": m.text,
            })
        })
        .collect();
    json!({
        "query": query,
        "retrieval_requested": requested.name(),
        "retrieval_used": outcome.retrieval_used.name(),
        "fallback_reason": outcome.fallback_reason,
        "hits": hits,
    })
    .to_string()
}

/// `deloop search --queries FILE --json`: one line per query.
pub fn batch_line(query_id: &str, outcome: &SearchOutcome, took_ms: f64) -> String {
    let hits: Vec<_> = outcome
        .matches
        .iter()
        .map(|m| json!({"id": hit_id(m), "score": m.score}))
        .collect();
    json!({"query_id": query_id, "hits": hits, "took_ms": took_ms}).to_string()
}

/// `deloop search --queries FILE` without `--json`: a short human line.
pub fn batch_human(query_id: &str, outcome: &SearchOutcome) -> String {
    let ids: Vec<String> = outcome.matches.iter().take(5).map(hit_id).collect();
    format!("{query_id}: {}", ids.join(" "))
}

/// The note printed on stderr when the requested retrieval fell back.
pub fn fallback_note(requested: Retrieval, outcome: &SearchOutcome) -> Option<String> {
    outcome.fallback_reason.as_ref().map(|r| {
        format!(
            "deloop: note: {} search fell back to lexical: {r}",
            requested.name()
        )
    })
}

/// `deloop search QUERY`: the hits for a person.
pub fn outcome_human(outcome: &SearchOutcome) -> String {
    if outcome.matches.is_empty() {
        return "no matches".to_string();
    }
    let mut out = String::new();
    for (i, m) in outcome.matches.iter().enumerate() {
        let place = match &m.doc_id {
            Some(id) => format!("[{id}]"),
            None => format!("{}:{}-{}", short_name(&m.source), m.start_line, m.end_line),
        };
        out.push_str(&format!("{:>2}. {place}  score {:.4}", i + 1, m.score));
        if !m.heading_trail.is_empty() {
            out.push_str(&format!("  ({})", m.heading_trail.join(" > ")));
        }
        out.push('\n');
        out.push_str("    ");
        out.push_str(&snippet(&m.text, 240));
        out.push('\n');
    }
    out.pop();
    out
}

/// The text on one line, cut at `max` characters with an ellipsis.
fn snippet(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_cuts_on_chars() {
        assert_eq!(snippet("a\n b", 10), "a b");
        assert_eq!(snippet(&"ñ".repeat(5), 3), "ñññ…");
    }

    #[test]
    fn progress_line_reports_count_share_and_rate() {
        let l = progress_line(50, Some(200), Duration::from_secs(10));
        assert_eq!(
            l,
            "deloop: indexing: 50/200 items (25.0%), 10.0 s, 5.0 items/s"
        );
        let l = progress_line(3, None, Duration::ZERO);
        assert_eq!(l, "deloop: indexing: 3 items, 0.0 s, 0.0 items/s");
        let l = progress_line(0, Some(0), Duration::from_secs(1));
        assert_eq!(l, "deloop: indexing: 0 items, 1.0 s, 0.0 items/s");
    }
}
