//! Retrieval: FTS5/BM25 lexical search, exact cosine vector search, and
//! reciprocal rank fusion of both, with a lexical fallback.

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::params;

use crate::embed::normalize;
use crate::store::{Index, VectorCache};
use crate::{Error, Result};

/// The usual RRF constant (Cormack et al. 2009).
pub const DEFAULT_RRF_K: f32 = 60.0;

/// Distinct terms kept from a query (question first, then expansion).
const MAX_QUERY_TERMS: usize = 64;
/// Candidates taken from each list before fusion: at least this many.
const MIN_FUSION_DEPTH: usize = 100;

/// Which retrieval to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retrieval {
    /// Lexical and vector results fused by reciprocal rank fusion.
    #[default]
    Hybrid,
    /// FTS5 BM25 only.
    Lexical,
    /// Exact cosine similarity only.
    Vector,
}

impl Retrieval {
    /// The lowercase name (`hybrid`, `lexical`, `vector`).
    pub fn name(self) -> &'static str {
        match self {
            Retrieval::Hybrid => "hybrid",
            Retrieval::Lexical => "lexical",
            Retrieval::Vector => "vector",
        }
    }

    /// Parses `hybrid`, `lexical` or `vector` (any case, surrounding
    /// spaces ignored).
    ///
    /// ```
    /// use deloop_index::Retrieval;
    /// assert_eq!(Retrieval::parse(" Lexical "), Some(Retrieval::Lexical));
    /// assert_eq!(Retrieval::parse("bm25"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Retrieval> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hybrid" => Some(Retrieval::Hybrid),
            "lexical" => Some(Retrieval::Lexical),
            "vector" => Some(Retrieval::Vector),
            _ => None,
        }
    }
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// The query text (free text: it is never parsed as FTS syntax).
    pub text: String,
    /// The query vector, from the index's embedder; `None` makes hybrid and
    /// vector searches fall back to lexical.
    pub vector: Option<Vec<f32>>,
    /// Extra text for the lexical query (a HyDE passage): its terms are
    /// OR-ed with the question's.
    pub expansion: Option<String>,
    /// How many matches to return.
    pub k: usize,
    /// Which retrieval to run.
    pub mode: Retrieval,
    /// The RRF constant for hybrid search.
    pub rrf_k: f32,
}

impl Default for SearchRequest {
    fn default() -> Self {
        Self {
            text: String::new(),
            vector: None,
            expansion: None,
            k: 10,
            mode: Retrieval::Hybrid,
            rrf_k: DEFAULT_RRF_K,
        }
    }
}

/// One retrieved chunk.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChunkMatch {
    /// The chunk's id in the index.
    pub chunk_id: i64,
    /// The BEIR document id, for BEIR corpora.
    pub doc_id: Option<String>,
    /// The chunk text.
    pub text: String,
    /// The source file path (or BEIR doc id).
    pub source: String,
    /// The score: `-bm25` for lexical, cosine for vector, the RRF sum for
    /// hybrid. Higher is better.
    pub score: f32,
    /// First line in the source (1-based).
    pub start_line: usize,
    /// Last line in the source (1-based, inclusive).
    pub end_line: usize,
    /// Headings in force, outermost first (the title for BEIR).
    pub heading_trail: Vec<String>,
}

/// The result of a search.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SearchOutcome {
    /// Best first.
    pub matches: Vec<ChunkMatch>,
    /// The retrieval that actually ran.
    pub retrieval_used: Retrieval,
    /// Why the requested retrieval fell back to lexical, if it did.
    pub fallback_reason: Option<String>,
}

impl Index {
    /// Runs a search. Hybrid and vector searches fall back to lexical (and
    /// say why in [`SearchOutcome::fallback_reason`]) when there is no query
    /// vector or the index holds no vectors. A query vector whose length is
    /// not the index's is an error.
    pub fn search(&self, req: &SearchRequest) -> Result<SearchOutcome> {
        let k = req.k;
        let mut fallback = None;
        let mut mode = req.mode;
        if mode != Retrieval::Lexical {
            let have = self.vector_cache()?;
            if have.ids.is_empty() {
                fallback = Some(match self.embedder_info()? {
                    Some(e) if e.is_none() => {
                        "the index holds no vectors (built with --embedder none)".to_string()
                    }
                    _ => "the index holds no vectors".to_string(),
                });
            } else if let Some(v) = &req.vector {
                if v.len() != have.dim {
                    return Err(Error::BadInput(format!(
                        "query vector has {} dimensions, the index's vectors have {}",
                        v.len(),
                        have.dim
                    )));
                }
            } else {
                fallback = Some("no query vector (no embedder available)".to_string());
            }
            if fallback.is_some() {
                mode = Retrieval::Lexical;
            }
        }
        let ranked: Vec<(i64, f32)> = match mode {
            Retrieval::Lexical => self.lexical(&req.text, req.expansion.as_deref(), k)?,
            Retrieval::Vector => self.vector(req.vector.as_deref().unwrap_or(&[]), k)?,
            Retrieval::Hybrid => {
                let depth = k.max(MIN_FUSION_DEPTH);
                let lex = self.lexical(&req.text, req.expansion.as_deref(), depth)?;
                let vec = self.vector(req.vector.as_deref().unwrap_or(&[]), depth)?;
                let mut fused = reciprocal_rank_fusion(&[&lex, &vec], req.rrf_k);
                fused.truncate(k);
                fused
            }
        };
        Ok(SearchOutcome {
            matches: self.load_matches(&ranked)?,
            retrieval_used: mode,
            fallback_reason: fallback,
        })
    }

    /// BM25 over the FTS5 table: `(chunk id, -bm25)`, best first.
    fn lexical(&self, text: &str, expansion: Option<&str>, k: usize) -> Result<Vec<(i64, f32)>> {
        let Some(q) = fts_query(text, expansion) else {
            return Ok(Vec::new());
        };
        if k == 0 {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare_cached(
            "SELECT rowid, bm25(chunks_fts) AS s FROM chunks_fts
             WHERE chunks_fts MATCH ?1 ORDER BY s LIMIT ?2",
        )?;
        let rows = st.query_map(params![q, k as i64], |r| {
            Ok((r.get::<_, i64>(0)?, -(r.get::<_, f64>(1)? as f32)))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Exact cosine over all stored (unit-length) vectors, best first.
    fn vector(&self, query: &[f32], k: usize) -> Result<Vec<(i64, f32)>> {
        let cache = self.vector_cache()?;
        if cache.ids.is_empty() || query.len() != cache.dim || k == 0 {
            return Ok(Vec::new());
        }
        let mut q = query.to_vec();
        normalize(&mut q);
        let mut scored: Vec<(i64, f32)> = cache
            .data
            .chunks_exact(cache.dim)
            .zip(&cache.ids)
            .map(|(v, &id)| (id, v.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>()))
            .collect();
        let better = |a: &(i64, f32), b: &(i64, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if scored.len() > k {
            scored.select_nth_unstable_by(k - 1, better);
            scored.truncate(k);
        }
        scored.sort_by(better);
        Ok(scored)
    }

    /// All vectors, loaded once and kept until the next write.
    fn vector_cache(&self) -> Result<Arc<VectorCache>> {
        if let Some(c) = self.vectors.borrow().as_ref() {
            return Ok(Arc::clone(c));
        }
        let mut cache = VectorCache::default();
        let mut st = self
            .conn
            .prepare("SELECT id, vector FROM chunks WHERE vector IS NOT NULL ORDER BY id")?;
        let mut rows = st.query([])?;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let blob: Vec<u8> = row.get(1)?;
            let dim = blob.len() / 4;
            if dim == 0 || !blob.len().is_multiple_of(4) || (cache.dim != 0 && dim != cache.dim) {
                return Err(Error::Schema(format!(
                    "chunk {id} has a malformed vector ({} bytes): rebuild with --reindex",
                    blob.len()
                )));
            }
            cache.dim = dim;
            cache.ids.push(id);
            cache.data.extend(
                blob.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
        }
        let cache = Arc::new(cache);
        *self.vectors.borrow_mut() = Some(Arc::clone(&cache));
        Ok(cache)
    }

    fn load_matches(&self, ranked: &[(i64, f32)]) -> Result<Vec<ChunkMatch>> {
        let mut st = self.conn.prepare_cached(
            "SELECT c.body, c.trail, c.start_line, c.end_line, d.source, d.doc_id
             FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id=?1",
        )?;
        let mut out = Vec::with_capacity(ranked.len());
        for &(id, score) in ranked {
            let m = st.query_row([id], |r| {
                let trail: String = r.get(1)?;
                Ok(ChunkMatch {
                    chunk_id: id,
                    text: r.get(0)?,
                    heading_trail: serde_json::from_str(&trail).unwrap_or_default(),
                    start_line: r.get::<_, i64>(2)? as usize,
                    end_line: r.get::<_, i64>(3)? as usize,
                    source: r.get(4)?,
                    doc_id: r.get(5)?,
                    score,
                })
            })?;
            out.push(m);
        }
        Ok(out)
    }
}

/// Builds a safe FTS5 query from free text: every run of letters and digits
/// becomes a quoted term, and the distinct terms (question first, then
/// `expansion`, at most 64) are OR-ed. Returns `None` when there is no term.
/// No user text can inject FTS5 syntax: quotes, operators, column filters
/// and parentheses are separators.
///
/// ```
/// assert_eq!(
///     deloop_index::fts_query("NEAR(\"x\" AND y*)", None).as_deref(),
///     Some("\"near\" OR \"x\" OR \"and\" OR \"y\"")
/// );
/// assert_eq!(deloop_index::fts_query("  ?!  ", None), None);
/// ```
pub fn fts_query(text: &str, expansion: Option<&str>) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    let mut terms = Vec::new();
    for source in std::iter::once(text).chain(expansion) {
        for word in source.split(|c: char| !c.is_alphanumeric()) {
            if word.is_empty() || terms.len() >= MAX_QUERY_TERMS {
                continue;
            }
            let w = word.to_lowercase();
            if seen.insert(w.clone()) {
                terms.push(format!("\"{w}\""));
            }
        }
    }
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// Reciprocal rank fusion: each list contributes `1 / (rrf_k + rank)` (rank
/// from 1) to the ids it holds. Returns ids by fused score, best first (ties
/// by smaller id).
///
/// ```
/// let a = [(1, 9.0), (2, 8.0)];
/// let b = [(2, 0.9), (3, 0.8)];
/// let fused = deloop_index::reciprocal_rank_fusion(&[&a, &b], 60.0);
/// assert_eq!(fused[0].0, 2);
/// ```
pub fn reciprocal_rank_fusion(lists: &[&[(i64, f32)]], rrf_k: f32) -> Vec<(i64, f32)> {
    let mut scores: HashMap<i64, f32> = HashMap::new();
    for list in lists {
        for (rank, &(id, _)) in list.iter().enumerate() {
            *scores.entry(id).or_insert(0.0) += 1.0 / (rrf_k + rank as f32 + 1.0);
        }
    }
    let mut fused: Vec<(i64, f32)> = scores.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_orders_by_fused_rank() {
        let lex = [(10, 5.0), (20, 4.0), (30, 3.0)];
        let vec = [(20, 0.9), (40, 0.8), (30, 0.7)];
        let f = reciprocal_rank_fusion(&[&lex, &vec], 60.0);
        let ids: Vec<i64> = f.iter().map(|x| x.0).collect();
        // 20: 1/62+1/61, 30: 2/63, 10: 1/61, 40: 1/62.
        assert_eq!(ids, vec![20, 30, 10, 40]);
        assert!((f[0].1 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
        assert!((f[1].1 - 2.0 / 63.0).abs() < 1e-6);
        assert!(reciprocal_rank_fusion(&[], 60.0).is_empty());
    }

    #[test]
    fn fts_query_quotes_and_caps_terms() {
        assert_eq!(
            fts_query("Contraseña: \"olvidé\" -x", Some("reset OR contraseña")).as_deref(),
            Some("\"contraseña\" OR \"olvidé\" OR \"x\" OR \"reset\" OR \"or\"")
        );
        let many: String = (0..500).map(|i| format!("w{i} ")).collect();
        assert_eq!(fts_query(&many, None).unwrap().matches(" OR ").count(), 63);
    }
}
