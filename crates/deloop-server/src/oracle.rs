//! The documentation oracle behind the server: requests of `/api/*` and of
//! the MCP `ask` and `search` tools mapped onto [`deloop_oracle::Oracle`].
//!
//! The oracle opens after the server starts listening (opening can build
//! the default index, which takes a while): until then `/readyz` answers
//! 503 and so do the `/api/*` routes, with `Retry-After`.

use deloop_oracle::{AskRequest, Language, Oracle, OracleError, Retrieval, Role, Turn as LlmTurn};
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::error::ApiError;
use crate::mcp::{
    AskArgs, AskLang, AskMode, AskRetrieval, AskService, SearchArgs, ToolError, Turn, TurnRole,
};
use crate::state::AppState;

impl AskMode {
    /// The oracle's mode.
    pub fn oracle_mode(self) -> deloop_oracle::Mode {
        match self {
            AskMode::Oracle => deloop_oracle::Mode::Oracle,
            AskMode::Help => deloop_oracle::Mode::Help,
            AskMode::Tutor => deloop_oracle::Mode::Tutor,
        }
    }
}

impl AskRetrieval {
    /// The index's retrieval.
    pub fn retrieval(self) -> Retrieval {
        match self {
            AskRetrieval::Hybrid => Retrieval::Hybrid,
            AskRetrieval::Lexical => Retrieval::Lexical,
            AskRetrieval::Vector => Retrieval::Vector,
        }
    }
}

impl AskArgs {
    /// The oracle request: absent options take the server's configured
    /// defaults; `lang: "auto"` detects the language from the question,
    /// whatever `[oracle] language` says.
    pub fn into_request(self) -> AskRequest {
        let lang = self.lang.map(|l| match l {
            AskLang::Es => Language::Es,
            AskLang::En => Language::En,
            AskLang::Auto => deloop_oracle::detect_language(&self.question),
        });
        AskRequest {
            mode: self.mode.map(AskMode::oracle_mode),
            lang,
            k: self.k,
            hyde: self.hyde,
            retrieval: self.retrieval.map(AskRetrieval::retrieval),
            history: self.history.into_iter().map(llm_turn).collect(),
            question: self.question,
            no_llm: false,
            stream: None,
        }
    }
}

fn llm_turn(t: Turn) -> LlmTurn {
    LlmTurn {
        role: match t.role {
            TurnRole::User => Role::User,
            TurnRole::Assistant => Role::Assistant,
        },
        content: t.content,
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
            None => Err(ApiError::unavailable(
                "the index is still opening (the first start builds it from deloop's docs); retry shortly",
                1,
            )),
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
                    args.retrieval.map(AskRetrieval::retrieval),
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
    }
}
