//! The report of one ask: the answer after the guards and everything that
//! happened on the way (retrieval, HyDE, the LLM call, citations). It is
//! plain data; the CLI renders it (`render/oracle.rs`) and the server sends
//! it as JSON.

use serde::{Deserialize, Serialize};

use crate::language::Language;
use crate::types::{Citation, Mode};

/// Retrieval as it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetrievalInfo {
    /// What was asked for: `hybrid`, `lexical` or `vector`.
    pub requested: String,
    /// What ran.
    pub used: String,
    /// Why it differs from the request, when it does.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub fallback_reason: Option<String>,
    /// Passages requested.
    pub k: usize,
}

/// HyDE as it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HydeInfo {
    /// The passage used, or none (plain question).
    #[cfg_attr(feature = "openapi", schema(required))]
    pub passage: Option<String>,
    /// True when the passage came from the cache.
    pub cached: bool,
    /// Why the plain question was used, when it was.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub fallback_reason: Option<String>,
    /// `fused`, `average` or `concat`: how the passage joined retrieval.
    pub query_vector: String,
}

/// One retrieved passage, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

/// Everything an ask reports: the object `deloop ask --json` prints and
/// the `done` event of the server's `/api/oracle`, field for field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AskReport {
    /// The question.
    pub question: String,
    /// The answer shown.
    pub answer: String,
    /// The mode.
    pub mode: Mode,
    /// The answer language.
    pub language: Language,
    /// True when the answer is not the model's complete answer: a fallback,
    /// refusal or extractive-after-failure message replaced it, or the
    /// model looped and only the part before the loop is kept.
    pub degraded: bool,
    /// Why it is degraded (`nothing_rescued`, `loop_too_short`, `loop_cut`,
    /// `refused`, `llm_failed`).
    #[cfg_attr(feature = "openapi", schema(required))]
    pub degraded_reason: Option<String>,
    /// The refusal reason code, when the model refused.
    #[cfg_attr(feature = "openapi", schema(required))]
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
    /// The detector that cut the stream (`words`, `substring`, `near`),
    /// when `loop_cut` is set; left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_detector: Option<String>,
    /// What went wrong upstream: the LLM call failed (HTTP error after the
    /// retries, 429 beyond the retries, timeout, dropped connection,
    /// malformed reply) and the answer is extractive (`degraded_reason`
    /// `llm_failed`), or the model looped mid-stream and was cut
    /// (`loop_cut`).
    #[cfg_attr(feature = "openapi", schema(required))]
    pub llm_error: Option<String>,
    /// The JSON repairs applied to the reply.
    pub repairs: Vec<String>,
    /// Retrieval.
    pub retrieval: RetrievalInfo,
    /// HyDE, when requested.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub hyde: Option<HydeInfo>,
    /// The passages retrieved, best first.
    pub passages: Vec<PassageInfo>,
    /// What the command did before answering (e.g. built the default
    /// index); see [`crate::Oracle::notes`]. Left out when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}
