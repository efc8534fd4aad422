//! One search of an index, the flow behind [`crate::Oracle::search`] (the
//! server's and MCP's `search`) and `deloop search` (one query or a batch
//! of BEIR queries): the query embedder that matches the index's vectors,
//! the query's vectors with HyDE's passage joined as configured, the
//! search, and why it fell back to lexical when it did.

use std::path::Path;

use deloop_config::Config;
use deloop_index::{Embedder, Index, Retrieval, SearchOutcome};

pub use crate::index_pool::QueryEmbedder;
use crate::retrieve::{search_request, HydeJoin};

/// What to search for, and how.
#[derive(Debug, Clone, Copy)]
pub struct SearchQuery<'a> {
    /// The query text.
    pub text: &'a str,
    /// HyDE's passage, when one was written.
    pub passage: Option<&'a str>,
    /// How the passage joins retrieval.
    pub join: HydeJoin,
    /// Hybrid, lexical or vector.
    pub mode: Retrieval,
    /// Hits to return.
    pub k: usize,
    /// The reciprocal-rank-fusion constant of hybrid search.
    pub rrf_k: f32,
}

/// The query embedder for `index`'s vectors: a local model found under
/// `[index] minilm_dir` / `onnx_dir` (else their defaults), or the
/// configured remote embedder; otherwise why there is none.
pub fn query_embedder(config: &Config, index: &Index, onnx_dir: Option<&Path>) -> QueryEmbedder {
    crate::index_pool::query_embedder(config, index, onnx_dir)
}

/// Searches `index`. Without a usable query vector the index falls back to
/// lexical; the reason given is then the embedder's problem when it had one
/// (more useful than "no query vector").
pub fn search_index(
    index: &Index,
    embedder: &QueryEmbedder,
    q: &SearchQuery<'_>,
) -> Result<SearchOutcome, deloop_index::Error> {
    let (embedder, mut problem) = if q.mode == Retrieval::Lexical {
        (None, None)
    } else {
        (embedder.embedder.as_deref(), embedder.problem.clone())
    };
    let (mut req, failed) = search_request(
        embedder.map(|e| e as &dyn Embedder),
        q.text,
        q.passage,
        q.join,
        q.mode,
        q.k,
    );
    req.rrf_k = q.rrf_k;
    if let Some(err) = failed {
        problem = Some(format!("the embedder failed: {err}"));
    }
    let mut outcome = index.search(&req)?;
    if outcome.fallback_reason.is_some() {
        if let Some(problem) = problem {
            outcome.fallback_reason = Some(problem);
        }
    }
    Ok(outcome)
}
