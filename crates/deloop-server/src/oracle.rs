//! The documentation oracle behind the server: requests of `/api/*` and of
//! the MCP `ask` and `search` tools mapped onto [`deloop_oracle::Oracle`].
//!
//! The oracle opens after the server starts listening (opening can build
//! the default index, which takes a while): until then `/readyz` answers
//! 503 and so do the `/api/*` routes, with `Retry-After`.

use deloop_oracle::{AskRequest, Language, Mode, Oracle, OracleError, Retrieval, Turn};
use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::mcp::{AskService, ToolError};
use crate::state::AppState;

/// The answer language a request asks for: a language, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AskLang {
    /// Detect it from the question (the default).
    #[default]
    Auto,
    /// Spanish.
    Es,
    /// English.
    En,
}

impl AskLang {
    /// `auto`, `es` or `en`.
    pub fn as_str(self) -> &'static str {
        match self {
            AskLang::Auto => "auto",
            AskLang::Es => "es",
            AskLang::En => "en",
        }
    }

    /// The language to answer in: `auto` detects it from `question`.
    pub fn resolve(self, question: &str) -> Language {
        match self {
            AskLang::Es => Language::Es,
            AskLang::En => Language::En,
            AskLang::Auto => deloop_oracle::detect_language(question),
        }
    }
}

/// The arguments of the MCP `ask` tool: the body of `POST /api/oracle`
/// with the mode as an argument. Absent options are `None`: the server's
/// `[oracle]` settings apply.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AskArgs {
    /// The question, in Spanish or English.
    #[schema(min_length = 1)]
    pub question: String,
    /// Answer style: oracle (default: rich markdown that cites its
    /// sources), help (short and plain), tutor (teaches step by step and
    /// ends with open questions; pass the earlier turns in `history`).
    pub mode: Option<Mode>,
    /// Answer language; default auto (the question's language).
    pub lang: Option<AskLang>,
    /// Passages to retrieve, 1 to 100; default the server's (6).
    #[schema(minimum = 1, maximum = 100)]
    pub k: Option<usize>,
    /// Retrieve with a hypothetical answer written by the LLM first (HyDE);
    /// helps vague questions, costs one more LLM call. Default false.
    pub hyde: Option<bool>,
    /// How passages are found: hybrid (default: keywords and embeddings
    /// fused), lexical (BM25 keywords), vector (embeddings).
    pub retrieval: Option<Retrieval>,
    /// Earlier turns of the dialogue, oldest first (for tutor mode).
    #[serde(default)]
    pub history: Vec<Turn>,
}

/// The arguments of the MCP `search` tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What to look for, in words (search syntax characters are treated as
    /// separators).
    #[schema(min_length = 1)]
    pub query: String,
    /// Passages to return, 1 to 100; default 10.
    #[schema(minimum = 1, maximum = 100)]
    pub k: Option<usize>,
    /// hybrid (default: keywords and embeddings fused), lexical (BM25
    /// keywords) or vector (embeddings).
    pub retrieval: Option<Retrieval>,
    /// Expand the query with a hypothetical answer written by the LLM
    /// (HyDE). Default false.
    pub hyde: Option<bool>,
}

impl AskArgs {
    /// The oracle request: absent options take the server's configured
    /// defaults; `lang: "auto"` detects the language from the question,
    /// whatever `[oracle] language` says.
    pub fn into_request(self) -> AskRequest {
        AskRequest {
            mode: self.mode,
            lang: self.lang.map(|l| l.resolve(&self.question)),
            k: self.k,
            hyde: self.hyde,
            retrieval: self.retrieval,
            history: self.history,
            question: self.question,
            no_llm: false,
            stream: None,
        }
    }
}

/// Checks what serde cannot: a question or query that is not blank, and
/// `k` within the oracle's bounds. The message names the field.
pub fn check_text_and_k(field: &str, text: &str, k: Option<usize>) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err(format!("`{field}` is empty: write the {field}"));
    }
    match k.map(deloop_oracle::check_k) {
        Some(Err(e)) => Err(format!("`k`: {e}")),
        _ => Ok(()),
    }
}

/// An oracle failure as an HTTP answer: what the caller must fix is a 400,
/// an index database that cannot be reached now a 503 with `Retry-After`,
/// the rest (a failing index) a 500 whose detail names it.
pub fn api_error(e: &OracleError) -> ApiError {
    if e.is_usage() {
        ApiError::bad_request(e.to_string())
    } else if e.is_unavailable() {
        ApiError::unavailable(format!("the index is unavailable: {e}"), 1)
    } else {
        ApiError::internal(format!("the oracle failed ({}): {e}", e.kind()))
    }
}

/// The oracle of `state`, or the answer to give while there is none.
pub fn oracle_of(state: &AppState) -> Result<Oracle, ApiError> {
    match state.oracle_slot() {
        None => Err(ApiError::not_found(
            "this server has no documentation oracle (the /api routes are served by `deloop serve`)",
        )),
        Some(slot) => match slot.get() {
            Some(Ok(oracle)) => Ok(oracle.clone()),
            Some(Err(reason)) => Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                format!("the documentation oracle could not open: {reason}"),
            )),
            None => Err(match state.oracle_waiting() {
                Some(why) => ApiError::unavailable(
                    format!("the index cannot be reached yet (the server retries): {why}"),
                    2,
                ),
                None => ApiError::unavailable(
                    "the index is still opening (the first start builds it from deloop's docs); retry shortly",
                    1,
                ),
            }),
        },
    }
}

/// The MCP `ask` and `search` tools over the oracle of a server's state.
#[derive(Debug, Clone)]
pub struct OracleTools {
    state: AppState,
}

impl OracleTools {
    /// The tools over `state`'s oracle (answered once it has opened).
    pub fn new(state: AppState) -> Self {
        OracleTools { state }
    }
}

fn tool_error(e: ApiError) -> ToolError {
    ToolError::new(e.detail)
}

impl AskService for OracleTools {
    fn ask(&self, args: AskArgs) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move {
            let oracle = oracle_of(&self.state).map_err(tool_error)?;
            let outcome = oracle
                .ask(args.into_request())
                .await
                .map_err(|e| tool_error(api_error(&e)))?;
            record_cut(&self.state, &outcome.report);
            serde_json::to_value(&outcome.report).map_err(|e| {
                ToolError::new(format!("internal error: cannot serialise the report: {e}"))
            })
        })
    }

    fn search(&self, args: SearchArgs) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move {
            let oracle = oracle_of(&self.state).map_err(tool_error)?;
            let report = oracle
                .search(
                    &args.query,
                    args.k.unwrap_or(oracle.default_k()),
                    args.retrieval,
                    args.hyde.unwrap_or(false),
                )
                .await
                .map_err(|e| tool_error(api_error(&e)))?;
            serde_json::to_value(&report).map_err(|e| {
                ToolError::new(format!("internal error: cannot serialise the report: {e}"))
            })
        })
    }
}

/// Counts a loop the oracle's stream watcher cut (`deloop_loops_cut_total`
/// with source `oracle`).
pub fn record_cut(state: &AppState, report: &deloop_oracle::AskReport) {
    if report.loop_cut {
        state.metrics().loop_cut(
            "oracle",
            report.loop_detector.as_deref().unwrap_or("unknown"),
            report.saved_chars as u64,
        );
        publish_cut(
            state,
            report.loop_detector.as_deref().unwrap_or("unknown"),
            report.saved_chars as u64,
            Some(report.model.as_str()),
        );
    }
}

/// Publishes a cut of the oracle's stream watcher on the event bus.
pub fn publish_cut(state: &AppState, detector: &str, saved_chars: u64, model: Option<&str>) {
    let mut ev = deloop_events::GuardEvent::new(deloop_events::EventKind::TextCut, "oracle")
        .with_saved(saved_chars);
    ev.detector = Some(detector.to_string());
    ev.model = model.map(str::to_string);
    state.events().publish(ev);
}
