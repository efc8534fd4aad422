//! Output formats (human and JSON) for the `oracle` command family
//! (`deloop ask`). The report itself is `deloop_oracle::AskReport`.

use deloop_oracle::{AskReport, Language};

/// The JSON output: one object.
pub fn json(report: &AskReport) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| {
        serde_json::json!({"error": format!("cannot serialise the report: {e}")}).to_string()
    })
}

/// The human output on stdout: the answer, then its sources.
pub fn human(report: &AskReport) -> String {
    let mut out = String::new();
    out.push_str(report.answer.trim_end());
    out.push('\n');
    if !report.citations.is_empty() {
        out.push_str(match report.language {
            Language::Es => "\nFuentes:\n",
            Language::En => "\nSources:\n",
        });
        for c in &report.citations {
            out.push_str(&format!("  {}:{}-{}\n", c.source, c.start_line, c.end_line));
        }
    }
    out
}

/// The one-line summary on stderr (human mode).
pub fn summary(report: &AskReport) -> String {
    let mut parts = vec![
        format!("mode {}", report.mode),
        format!("language {}", report.language),
    ];
    if report.provider == "extractive" {
        parts.push("extractive (no LLM)".into());
    } else {
        parts.push(format!("{} {}", report.provider, report.model));
    }
    let mut retrieval = format!("retrieval {}", report.retrieval.used);
    if let Some(reason) = &report.retrieval.fallback_reason {
        retrieval.push_str(&format!(" (fallback: {reason})"));
    }
    parts.push(retrieval);
    if let Some(h) = &report.hyde {
        parts.push(match (&h.passage, &h.fallback_reason) {
            (Some(_), _) if h.cached => "HyDE (cached passage)".into(),
            (Some(_), _) => "HyDE".into(),
            (None, Some(r)) => format!("HyDE fell back to the question: {r}"),
            (None, None) => "HyDE off".into(),
        });
    }
    if report.dropped_citations > 0 {
        parts.push(format!(
            "{} citation(s) dropped (not retrieved)",
            report.dropped_citations
        ));
    }
    if report.loop_cut {
        parts.push(format!(
            "loop cut mid-stream, {} chars discarded",
            report.saved_chars
        ));
    } else if report.clamped {
        parts.push("loop clamped".into());
    }
    if let Some(reason) = &report.degraded_reason {
        parts.push(format!("degraded: {reason}"));
    }
    if let Some(err) = &report.llm_error {
        parts.push(format!("LLM error: {err}"));
    }
    format!("deloop ask: {}", parts.join("; "))
}
