//! [`Oracle::search`]: the index searched as the MCP `search` tool does,
//! and what it found.

use super::{Oracle, OracleError};
use crate::hyde::HydeOutcome;
use crate::index_search::{search_index, SearchQuery};
use crate::language::detect_language;
use crate::report::HydeInfo;
use crate::retrieve::passage_from_match;
use crate::settings::check_k;
use deloop_index::Retrieval;
use serde::{Deserialize, Serialize};

impl Oracle {
    /// Searches the index, as the MCP `search` tool does: `k` passages
    /// (1 to [`crate::MAX_K`]) by `retrieval` (default `[oracle]
    /// retrieval`), the query expanded by a HyDE passage when `hyde` is set
    /// and an LLM is configured (else `hyde.fallback_reason` says why).
    /// Sources of the embedded docs are relative, as in ask citations.
    pub async fn search(
        &self,
        query: &str,
        k: usize,
        retrieval: Option<Retrieval>,
        hyde: bool,
    ) -> Result<SearchReport, OracleError> {
        let query = query.trim().to_owned();
        if query.is_empty() {
            return Err(OracleError::BadRequest("the query is empty".into()));
        }
        let k = check_k(k).map_err(OracleError::BadRequest)?;
        let mode = retrieval.unwrap_or(self.inner.settings.retrieval);
        let hyde_join = self.inner.settings.hyde_join;
        let qv_mode = hyde_join.mode;
        let hyde = match (hyde, &self.inner.client) {
            (false, _) => None,
            (true, Some(client)) => {
                let lang = detect_language(&query);
                Some(self.hyde(client, &query, lang).await)
            }
            (true, None) => Some(HydeOutcome::fallback("no LLM configured")),
        };
        let passage = hyde.as_ref().and_then(|h| h.passage.clone());
        let text = query.clone();
        let rrf_k = deloop_index::DEFAULT_RRF_K;
        let outcome = self
            .blocking(move |inner, index| {
                let q = SearchQuery {
                    text: &text,
                    passage: passage.as_deref(),
                    join: hyde_join,
                    mode,
                    k,
                    rrf_k,
                };
                search_index(index, inner.query_embedder(index), &q)
            })
            .await??;
        let hits = outcome
            .matches
            .iter()
            .map(|m| {
                let p = passage_from_match(m, self.inner.root.as_deref());
                SearchHit {
                    id: m.doc_id.clone().unwrap_or_else(|| m.chunk_id.to_string()),
                    chunk_id: m.chunk_id,
                    doc_id: m.doc_id.clone(),
                    score: m.score,
                    source: p.source,
                    start_line: p.start_line,
                    end_line: p.end_line,
                    heading_trail: p.heading_trail,
                    text: p.text,
                }
            })
            .collect();
        Ok(SearchReport {
            query,
            retrieval_requested: mode.name().into(),
            retrieval_used: outcome.retrieval_used.name().into(),
            fallback_reason: outcome.fallback_reason,
            hits,
            hyde: hyde.map(|h| HydeInfo {
                passage: h.passage,
                cached: h.cached,
                fallback_reason: h.fallback_reason,
                query_vector: qv_mode.as_str().into(),
            }),
        })
    }
}

/// One search hit (the fields of `deloop search --json`'s hits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The BEIR doc id, else the chunk id.
    pub id: String,
    /// The chunk id in the index.
    pub chunk_id: i64,
    /// The BEIR doc id, for BEIR corpora.
    pub doc_id: Option<String>,
    /// The retrieval score (higher is better; the scale depends on the retrieval).
    pub score: f32,
    /// The source path (relative to the embedded docs' directory for them).
    pub source: String,
    /// First line (1-based).
    pub start_line: u32,
    /// Last line (1-based, inclusive).
    pub end_line: u32,
    /// The headings above the chunk, outermost first.
    pub heading_trail: Vec<String>,
    /// The chunk text.
    pub text: String,
}

/// What [`Oracle::search`] found: the object `deloop search --json` prints
/// for one query, plus `hyde` when HyDE was requested.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchReport {
    /// The query (trimmed).
    pub query: String,
    /// `hybrid`, `lexical` or `vector`, as requested.
    pub retrieval_requested: String,
    /// The retrieval that ran.
    pub retrieval_used: String,
    /// Why it fell back to lexical, when it did.
    pub fallback_reason: Option<String>,
    /// Best first.
    pub hits: Vec<SearchHit>,
    /// HyDE, when requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyde: Option<HydeInfo>,
}
