//! The two ranked lists of a search, read from PostgreSQL.
//!
//! - **Lexical:** BM25 as FTS5 ranks it ([`crate::bm25`]), computed by
//!   the server over the postings of the query's terms and the corpus
//!   totals in one statement (one snapshot); only the `k` best rows come
//!   back.
//! - **Vector:** the HNSW walk over `deloop_vectors` (a narrow table:
//!   chunk id and vector only), with `hnsw.ef_search` set to the rows
//!   fetched, so the index returns as many as asked.
//! - **Both:** a hybrid search sends both statements at once in one
//!   read-only transaction (tokio-postgres pipelines them on one
//!   connection): one snapshot, and the round trips of one query.

use pgvector::Vector;
use tokio_postgres::{GenericClient, Transaction};

use super::connection::CallResult;
use crate::bm25;

/// The lexical query, once the words are FTS5 phrases.
pub(super) struct LexicalQuery {
    /// The query's phrases, repeated as the query repeats them.
    pub phrases: Vec<String>,
    /// How many to return.
    pub k: usize,
}

impl LexicalQuery {
    /// `None` when there is nothing to look up.
    pub fn new(phrases: Vec<String>, k: usize) -> Option<Self> {
        if phrases.is_empty() || k == 0 {
            return None;
        }
        Some(LexicalQuery { phrases, k })
    }
}

/// [`crate::bm25`]'s ranking computed by the server, so that only the `k`
/// best rows travel: each phrase's `idf` from the postings' counts, each
/// posting's term, summed per chunk in phrase order (`sum(… ORDER BY
/// ord)`) in `float8`, with the same operations in the same order as
/// [`bm25::rank`], so the scores are the same to the last bit. The
/// constants are parameters, so they are written once (`$2` k1, `$3` b,
/// `$4` and `$5` the column weights).
const LEXICAL: &str = "
WITH s AS (
    SELECT chunks::float8 AS n, tokens::float8 / chunks::float8 AS avgdl
    FROM deloop_stats WHERE chunks > 0
), q AS (
    SELECT term, ord FROM unnest($1::text[]) WITH ORDINALITY AS u(term, ord)
), p AS (
    SELECT chunk_id, term,
           GREATEST(heading_tf, 0)::float8 * $4 + GREATEST(body_tf, 0)::float8 * $5 AS f,
           GREATEST(length, 0)::float8 AS d
    FROM deloop_terms WHERE term = ANY($1::text[])
), w AS (
    SELECT term, ln((s.n - count(*)::float8 + 0.5::float8) / (count(*)::float8 + 0.5::float8)) AS idf
    FROM p CROSS JOIN s GROUP BY term, s.n
)
SELECT p.chunk_id,
       sum(CASE WHEN w.idf <= 0 THEN 1e-6::float8 ELSE w.idf END
           * ((p.f * ($2 + 1.0::float8)) / (p.f + $2 * (1.0::float8 - $3 + $3 * p.d / s.avgdl)))
           ORDER BY q.ord) AS score
FROM q JOIN p ON p.term = q.term JOIN w ON w.term = q.term CROSS JOIN s
GROUP BY p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT $6";

/// The BM25 ranking of `q`, best first (ties by smaller id), at most `k`.
pub(super) async fn lexical<C: GenericClient>(
    client: &C,
    q: &LexicalQuery,
) -> CallResult<Vec<(i64, f32)>> {
    let limit = i64::try_from(q.k).unwrap_or(i64::MAX);
    let rows = client
        .query(
            LEXICAL,
            &[
                &q.phrases,
                &bm25::K1,
                &bm25::B,
                &bm25::HEADING_WEIGHT,
                &bm25::BODY_WEIGHT,
                &limit,
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, i64>(0), r.get::<_, f64>(1) as f32))
        .collect())
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
