//! The values of one ask: the request, the events streamed while it runs,
//! and its outcome.

use serde::{Deserialize, Serialize};

use crate::language::Language;
use crate::report::AskReport;
use crate::types::{Mode, Passage};

pub use deloop_index::Retrieval;
pub use deloop_llm::{Role, Turn};

/// One question to the oracle. Fields left `None` take the oracle's
/// configured defaults (`[oracle]` in `deloop.toml`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AskRequest {
    /// The question (trimmed; must not be empty).
    pub question: String,
    /// `oracle`, `help` or `tutor` (default `[oracle] mode`).
    pub mode: Option<Mode>,
    /// The answer language (default `[oracle] language`; `None` there too
    /// means: detect it from the question).
    pub lang: Option<Language>,
    /// Passages to retrieve, 1 to [`crate::MAX_K`] (default `[oracle] k`).
    pub k: Option<usize>,
    /// Retrieve with a HyDE passage (default `[oracle] hyde`).
    pub hyde: Option<bool>,
    /// Hybrid, lexical or vector retrieval (default `[oracle] retrieval`).
    pub retrieval: Option<Retrieval>,
    /// Earlier turns of the dialogue, oldest first. They reach the model as
    /// earlier turns (bounded by [`crate::prompts::history_turns`]);
    /// retrieval uses the question alone.
    pub history: Vec<Turn>,
    /// Answer extractively even when an LLM is configured.
    pub no_llm: bool,
    /// Stream the answer under the loop watcher (default `[oracle] stream`).
    pub stream: Option<bool>,
}

impl AskRequest {
    /// A request for `question` with every setting from the configuration.
    pub fn new(question: impl Into<String>) -> Self {
        AskRequest {
            question: question.into(),
            ..AskRequest::default()
        }
    }
}

/// How an ask ended, for exit codes and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskStatus {
    /// An answer was given: the model's, an extractive one without LLM, or
    /// an honest refusal (CLI exit 0).
    Answered,
    /// A loop guard fired: the stream was cut mid-way or the answer was
    /// clamped (CLI exit 3).
    LoopCut,
    /// Nothing could be rescued from the model's reply; the mode's fallback
    /// was shown (CLI exit 1).
    NothingRescued,
    /// The LLM call failed (HTTP error after the retries, timeout, dropped
    /// connection, malformed stream); the answer is extractive and
    /// `llm_error` says why (CLI exit 1).
    LlmFailed,
}

/// The result of an ask: the report and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskOutcome {
    /// Everything the ask reports (`deloop ask --json`).
    pub report: AskReport,
    /// How it ended.
    pub status: AskStatus,
}

/// `meta`: the settings an ask runs with, sent first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MetaEvent {
    /// The mode.
    pub mode: Mode,
    /// The answer language.
    pub lang: Language,
    /// The retrieval requested (`hybrid`, `lexical`, `vector`); the one
    /// that ran is in the `done` report.
    pub retrieval: String,
    /// `gemini`, `openai` or `extractive`.
    pub provider: String,
    /// The model, or `extractive`.
    pub model: String,
}

/// `sources`: the retrieved passages, sent before any answer text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SourcesEvent {
    /// Best first: `source`, `start_line`, `end_line`, `heading_trail`,
    /// `text`, `score`.
    pub sources: Vec<Passage>,
}

/// `delta`: answer text as it is generated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeltaEvent {
    /// The next piece of the answer.
    pub text: String,
}

/// `cut`: the streaming loop watcher fired and the LLM request was dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CutEvent {
    /// The detector that fired: `word_period`, `long_period` or `substring`.
    pub detector: String,
    /// Byte offset, in the streamed reply, where the loop starts.
    pub start: usize,
    /// Characters received after the cut and discarded.
    pub saved_chars: usize,
}

/// `error`: the ask failed before it could answer (no `done` follows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorEvent {
    /// [`crate::OracleError::kind`]: `bad_request`, `config`, `no_index`,
    /// `index`, `embedder` or `internal`.
    pub kind: String,
    /// What went wrong.
    pub message: String,
}

/// One event of [`crate::Oracle::ask_with_events`], in this order:
/// `meta`, `sources`, `delta`*, `cut`?, `done` — or `error` instead of the
/// rest when the ask fails. Serialised, an event is its payload alone; its
/// name ([`AskEvent::name`]) goes beside it (the SSE `event:` field).
///
/// `delta` texts are the answer as the model writes it, before the final
/// guards: the `done` report's `answer` is the one to keep (it differs when
/// a guard clamped the answer, the reply was degraded or the LLM failed).
/// Without streaming (extractive, `stream: false`) one `delta` carries the
/// whole answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AskEvent {
    /// The settings the ask runs with.
    Meta(MetaEvent),
    /// The retrieved passages.
    Sources(SourcesEvent),
    /// Answer text.
    Delta(DeltaEvent),
    /// The loop watcher cut the stream.
    Cut(CutEvent),
    /// The final report, exactly what `deloop ask --json` prints.
    Done(Box<AskReport>),
    /// The ask failed.
    Error(ErrorEvent),
}

impl AskEvent {
    /// The event's name: `meta`, `sources`, `delta`, `cut`, `done` or `error`.
    pub fn name(&self) -> &'static str {
        match self {
            AskEvent::Meta(_) => "meta",
            AskEvent::Sources(_) => "sources",
            AskEvent::Delta(_) => "delta",
            AskEvent::Cut(_) => "cut",
            AskEvent::Done(_) => "done",
            AskEvent::Error(_) => "error",
        }
    }

    /// The payload as one JSON object (the SSE `data:`).
    pub fn payload(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_else(|e| {
            serde_json::json!({"kind": "internal", "message": format!("cannot serialise the event: {e}")})
        })
    }
}
