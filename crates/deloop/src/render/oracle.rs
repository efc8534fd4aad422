//! Output formats (human and JSON) for the `oracle` command family
//! (`deloop ask`).

use serde::Serialize;

use deloop_oracle::{Citation, Language, Mode};

/// Retrieval as it happened.
#[derive(Debug, Clone, Serialize)]
pub struct RetrievalInfo {
    /// What was asked for: `hybrid`, `lexical` or `vector`.
    pub requested: String,
    /// What ran.
    pub used: String,
    /// Why it differs from the request, when it does.
    pub fallback_reason: Option<String>,
    /// Passages requested.
    pub k: usize,
}

/// HyDE as it happened.
#[derive(Debug, Clone, Serialize)]
pub struct HydeInfo {
    /// The passage used, or none (plain question).
    pub passage: Option<String>,
    /// True when the passage came from the cache.
    pub cached: bool,
    /// Why the plain question was used, when it was.
    pub fallback_reason: Option<String>,
    /// `average` or `concat`.
    pub query_vector: String,
}

/// One retrieved passage, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct PassageInfo {
    /// Source path.
    pub source: String,
    /// First line.
    pub start_line: u32,
    /// Last line.
    pub end_line: u32,
    /// Retrieval score.
    pub score: f64,
}

/// Everything `deloop ask` reports.
#[derive(Debug, Clone, Serialize)]
pub struct AskReport {
    /// The question.
    pub question: String,
    /// The answer shown.
    pub answer: String,
    /// The mode.
    pub mode: Mode,
    /// The answer language.
    pub language: Language,
    /// True when a fallback, refusal or extractive-after-failure message replaced the model's answer.
    pub degraded: bool,
    /// Why it is degraded (`nothing_rescued`, `loop_too_short`, `refused`, `llm_failed`).
    pub degraded_reason: Option<String>,
    /// The refusal reason code, when the model refused.
    pub refusal: Option<String>,
    /// True when a loop guard cut the answer.
    pub clamped: bool,
    /// True when the reply was cut (token limit or loop) and rescued anyway.
    pub truncated: bool,
    /// Citations of retrieved passages.
    pub citations: Vec<Citation>,
    /// Cited items dropped (not retrieved or malformed).
    pub dropped_citations: usize,
    /// `gemini`, `openai` or `extractive`.
    pub provider: String,
    /// The model, or `extractive`.
    pub model: String,
    /// True when the reply was streamed.
    pub streamed: bool,
    /// True when the streaming loop guard cut the reply and cancelled the request.
    pub loop_cut: bool,
    /// Characters received after the cut and discarded.
    pub saved_chars: usize,
    /// The LLM error, when the call failed and the answer is extractive.
    pub llm_error: Option<String>,
    /// The JSON repairs applied to the reply.
    pub repairs: Vec<String>,
    /// Retrieval.
    pub retrieval: RetrievalInfo,
    /// HyDE, when requested.
    pub hyde: Option<HydeInfo>,
    /// The passages retrieved, best first.
    pub passages: Vec<PassageInfo>,
    /// What the command did before answering (e.g. built the default index).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

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
