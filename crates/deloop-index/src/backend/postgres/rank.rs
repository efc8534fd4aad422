//! The two ranked lists of a search, read from PostgreSQL.
//!
//! - **Lexical:** the postings of the query's terms and the corpus totals,
//!   in one statement (one snapshot), ranked by [`crate::bm25`] in Rust as
//!   FTS5 ranks them.
//! - **Vector:** the HNSW walk over `deloop_vectors` (a narrow table:
//!   chunk id and vector only), with `hnsw.ef_search` set to the rows
//!   fetched, so the index returns as many as asked.
//! - **Both:** a hybrid search sends both statements at once in one
//!   read-only transaction (tokio-postgres pipelines them on one
//!   connection): one snapshot, and the round trips of one query.

use std::collections::HashMap;

use pgvector::Vector;
use tokio_postgres::{GenericClient, Transaction};

use super::connection::CallResult;
use crate::bm25::{self, Candidate};

/// The lexical query, once the words are FTS5 phrases.
pub(super) struct LexicalQuery {
    /// The query's phrases, repeated as the query repeats them.
    pub phrases: Vec<String>,
    /// The distinct phrases (what is looked up).
    pub distinct: Vec<String>,
    /// How many to return.
    pub k: usize,
}

/// The corpus totals and the candidates of a lexical query.
pub(super) struct Postings {
    chunks: u64,
    tokens: u64,
    candidates: HashMap<i64, Candidate>,
}

impl LexicalQuery {
    /// `None` when there is nothing to look up.
    pub fn new(phrases: Vec<String>, k: usize) -> Option<Self> {
        if phrases.is_empty() || k == 0 {
            return None;
        }
        let mut distinct = phrases.clone();
        distinct.sort();
        distinct.dedup();
        Some(LexicalQuery {
            phrases,
            distinct,
            k,
        })
    }

    /// The BM25 ranking of `postings`, best first.
    pub fn rank(&self, postings: &Postings) -> Vec<(i64, f32)> {
        bm25::rank(
            &self.phrases,
            &postings.candidates,
            postings.chunks,
            postings.tokens,
            self.k,
        )
    }
}

/// Reads the postings of `distinct` and the totals, in one statement.
pub(super) async fn postings<C: GenericClient>(
    client: &C,
    distinct: &[String],
) -> CallResult<Postings> {
    let rows = client
        .query(
            "SELECT s.chunks, s.tokens, t.chunk_id, t.term, t.heading_tf, t.body_tf, t.length
             FROM deloop_stats s
             LEFT JOIN deloop_terms t ON t.term = ANY($1)",
            &[&distinct],
        )
        .await?;
    let mut candidates: HashMap<i64, Candidate> = HashMap::new();
    let (mut chunks, mut tokens) = (0i64, 0i64);
    for r in &rows {
        chunks = r.get(0);
        tokens = r.get(1);
        let Some(id) = r.get::<_, Option<i64>>(2) else {
            continue;
        };
        let e = candidates.entry(id).or_default();
        e.length = r.get::<_, i32>(6).max(0) as u64;
        e.terms.insert(
            r.get(3),
            (
                r.get::<_, i32>(4).max(0) as u32,
                r.get::<_, i32>(5).max(0) as u32,
            ),
        );
    }
    Ok(Postings {
        chunks: chunks.max(0) as u64,
        tokens: tokens.max(0) as u64,
        candidates,
    })
}

/// The vector query: how many rows to fetch, and how.
pub(super) struct VectorQuery {
    vector: Vector,
    k: usize,
    fetch: usize,
    /// `SET LOCAL` for this query's transaction.
    pub setting: String,
}

/// Past this many rows, an exact scan (HNSW's `ef_search` stops at 1000).
const MAX_HNSW_FETCH: usize = 1000;

impl VectorQuery {
    /// `None` when there is nothing to look up.
    pub fn new(query: &[f32], k: usize) -> Option<Self> {
        if k == 0 || query.is_empty() {
            return None;
        }
        // A few more rows than asked, so chunks tied at the k-th score are
        // ordered by id as in SQLite (the index orders by distance only).
        let fetch = k + k / 2 + 8;
        // HNSW returns at most ef_search rows (default 40): asking for as
        // many as fetched keeps the walk no wider than needed.
        let setting = if fetch > MAX_HNSW_FETCH {
            "SET LOCAL enable_indexscan = off".to_string()
        } else {
            format!("SET LOCAL hnsw.ef_search = {}", fetch.max(40))
        };
        Some(VectorQuery {
            vector: Vector::from(query.to_vec()),
            k,
            fetch,
            setting,
        })
    }

    /// The ranking of `rows`, best first, ties by smaller id.
    pub fn rank(&self, mut rows: Vec<(i64, f32)>) -> Vec<(i64, f32)> {
        rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        rows.truncate(self.k);
        rows
    }
}

/// The nearest vectors by cosine, in a transaction where
/// [`VectorQuery::setting`] was applied.
pub(super) async fn nearest(tx: &Transaction<'_>, q: &VectorQuery) -> CallResult<Vec<(i64, f32)>> {
    // The limit is written out: as a parameter, the planner cannot see
    // that it is small and may scan and sort every vector instead of
    // walking the HNSW index.
    let rows = tx
        .query(
            &format!(
                "SELECT chunk_id, 1 - (embedding <=> $1) FROM deloop_vectors
                 ORDER BY embedding <=> $1 LIMIT {}",
                q.fetch
            ),
            &[&q.vector],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, i64>(0), r.get::<_, f64>(1) as f32))
        .collect())
}
