//! One search of an index, the flow behind [`crate::Oracle::search`] (the
//! server's and MCP's `search`) and `deloop search` (one query or a batch
//! of BEIR queries): the query embedder that matches the index's vectors,
//! the query's vectors with HyDE's passage joined as configured, the
//! search, and why it fell back to lexical when it did.
//!
//! [`IndexSearch`] is that flow for a synchronous caller that runs many
//! queries against one index (`deloop search`): HyDE's passage on a
//! runtime of its own ([`BlockingHyde`]), then [`search_index`].

use deloop_config::Config;
use deloop_index::{Embedder, Index, Retrieval, SearchOutcome};
use deloop_llm::LlmClient;

pub use crate::embedders::{query_embedder, QueryEmbedder};
use crate::hyde::{run_hyde, HydeOutcome, HydeParams};
use crate::retrieve::{search_request, HydeJoin, IndexCache};

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

/// HyDE for a synchronous caller: the LLM, the HyDE settings, a runtime
/// for the calls, and how the passage joins retrieval.
pub struct BlockingHyde {
    runtime: tokio::runtime::Runtime,
    client: LlmClient,
    params: HydeParams,
    join: HydeJoin,
}

impl BlockingHyde {
    /// HyDE through `client`, with the `[oracle]` HyDE settings of
    /// `config`, its calls run on `runtime` (which nothing else may block
    /// on from inside async code); the error says which setting is wrong.
    pub fn new(
        runtime: tokio::runtime::Runtime,
        client: LlmClient,
        config: &Config,
    ) -> Result<Self, String> {
        Ok(BlockingHyde {
            join: HydeJoin::from_config(config).map_err(|e| e.to_string())?,
            params: HydeParams::from_config(config).map_err(|e| e.to_string())?,
            runtime,
            client,
        })
    }

    /// The HyDE passage for `question` (cached in `index`), or the reason
    /// HyDE falls back to the plain query.
    pub fn passage(&self, index: &Index, question: &str) -> HydeOutcome {
        let lang = crate::detect_language(question);
        run_hyde(
            &self.runtime,
            &self.client,
            &IndexCache(index),
            question,
            lang,
            &self.params,
        )
    }
}

/// Searches of one index, query after query, all with the same settings:
/// the flow of `deloop search` (one query or a batch of BEIR queries).
pub struct IndexSearch<'a> {
    /// The index searched.
    pub index: &'a Index,
    /// The query embedder ([`query_embedder`]; the default for lexical).
    pub embedder: QueryEmbedder,
    /// HyDE, when the queries are expanded by a passage.
    pub hyde: Option<BlockingHyde>,
    /// Hybrid, lexical or vector.
    pub mode: Retrieval,
    /// Hits per query.
    pub k: usize,
    /// The reciprocal-rank-fusion constant of hybrid search.
    pub rrf_k: f32,
}

/// What one query of an [`IndexSearch`] found.
#[derive(Debug)]
pub struct Searched {
    /// The hits, the retrieval used and why it fell back, if it did.
    pub outcome: SearchOutcome,
    /// HyDE's passage, or why it fell back to the plain query (`None`
    /// without HyDE).
    pub hyde: Option<HydeOutcome>,
}

impl IndexSearch<'_> {
    /// Searches for `text`: HyDE's passage first when HyDE is on (its
    /// failure falls back to the plain query), then [`search_index`].
    pub fn search(&self, text: &str) -> Result<Searched, deloop_index::Error> {
        let hyde = self.hyde.as_ref().map(|h| h.passage(self.index, text));
        let q = SearchQuery {
            text,
            passage: hyde.as_ref().and_then(|h| h.passage.as_deref()),
            join: self.hyde.as_ref().map(|h| h.join).unwrap_or_default(),
            mode: self.mode,
            k: self.k,
            rrf_k: self.rrf_k,
        };
        let outcome = search_index(self.index, &self.embedder, &q)?;
        Ok(Searched { outcome, hyde })
    }
}
