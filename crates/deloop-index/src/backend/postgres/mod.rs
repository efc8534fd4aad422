//! The PostgreSQL backend: deloop's tables in a database with pgvector.
//!
//! - **Lexical:** every chunk's terms, computed by the same FTS5 tokenizer
//!   as the SQLite backend ([`crate::lexer`]), are stored in `deloop_terms`
//!   (an inverted index in a B-tree, with each term's occurrences per
//!   column and the chunk's length) and the corpus totals in
//!   `deloop_stats`. A query reads the candidates of its terms with one
//!   statement (one snapshot) and [`crate::bm25`] ranks them in Rust, as
//!   FTS5 does: the same scores and order as SQLite.
//! - **Vectors:** `deloop_vectors`, a narrow table of chunk ids and
//!   pgvector vectors (typed to the embedder's dimension when the embedder
//!   is recorded) with an HNSW index (cosine), so the index walk reads
//!   only vectors ([`rank`]).
//! - **Hybrid:** both ranked lists are read in one read-only transaction
//!   whose statements are pipelined: one snapshot, one round trip.
//! - **Writes:** each batch of documents is one transaction (documents,
//!   chunks, vectors, terms and totals), so a reader never sees half a
//!   document ([`write`]).
//! - **Async inside a sync API:** [`crate::Index`] is synchronous (the CLI
//!   and the oracle's blocking threads call it), and tokio-postgres is
//!   async. Each database URL gets one small tokio runtime and one
//!   deadpool connection pool, shared by every `Index` opened on it in the
//!   process ([`connection`]).
//! - **Deadlines:** connecting, waiting for a pooled connection and each
//!   statement (`statement_timeout`) are bounded by `[index]
//!   db_timeout_ms` (default 30 s); a call that the server does not answer
//!   (a paused or unreachable host) ends a second later. Past a deadline
//!   the error is [`crate::Error::Unavailable`], which the server answers
//!   with 503.
//!
//! The password comes from the URL, else `DELOOP_DB_PASSWORD`, else
//! `PGPASSWORD`; messages show the URL without it ([`redact`]).

mod connection;
mod migrate;
mod rank;
mod schema;
mod write;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;

use super::{Backend, Counts, NewDocument, Ranked};
use crate::lexer::Lexer;
use crate::search::ChunkMatch;
use crate::store::{recorded_options, IndexOptions};
use crate::{Error, Result};
use connection::{CallResult, Failure, Shared};

/// A deloop index in a PostgreSQL database.
#[derive(Debug)]
pub(crate) struct PostgresBackend {
    shared: Arc<Shared>,
    lexer: Lexer,
}

impl PostgresBackend {
    /// Opens the index in the database at `url`. With `create`, the schema
    /// is created (or migrated) and `create`'s options recorded when new;
    /// without, a database without deloop's tables is [`Error::NoIndex`].
    /// Returns the options in force.
    pub fn open(
        url: &str,
        create: Option<IndexOptions>,
        timeout: Duration,
    ) -> Result<(Self, IndexOptions)> {
        let shared = Shared::for_url(url, timeout)?;
        let location = shared.location.clone();
        let options = shared.call(move |pool| async move {
            let mut client = pool.get().await?;
            migrate::check_server(&client)
                .await
                .map_err(Failure::Index)?;
            let present: bool = client
                .query_one("SELECT to_regclass('deloop_migrations') IS NOT NULL", &[])
                .await?
                .get(0);
            if !present && create.is_none() {
                return Err(Failure::Index(Error::NoIndex { path: location }));
            }
            if create.is_some() || present {
                migrate::migrate(&mut client, create, &location).await?;
            }
            let rows = client
                .query("SELECT key, value FROM deloop_meta", &[])
                .await?;
            let meta: HashMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            recorded_options(&|k| Ok(meta.get(k).cloned())).map_err(Failure::Index)
        })?;
        let lexer = Lexer::new(options.stemmer)?;
        Ok((Self { shared, lexer }, options))
    }

    /// Drops deloop's tables from the database at `url` (nothing else).
    pub fn remove(url: &str, timeout: Duration) -> Result<()> {
        let shared = Shared::for_url(url, timeout)?;
        shared.call(|pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&schema::LOCK])
                .await?;
            tx.batch_execute(schema::DROP).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn call<T, F, Fut>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut,
        Fut: Future<Output = CallResult<T>> + Send + 'static,
    {
        self.shared.call(f)
    }

    /// The lexical query of `words`, `None` when nothing is to be looked up.
    fn lexical_query(&self, words: &[String], k: usize) -> Result<Option<rank::LexicalQuery>> {
        if words.is_empty() {
            return Ok(None);
        }
        Ok(rank::LexicalQuery::new(self.lexer.phrases(words)?, k))
    }

    /// BM25 over the postings of `q`, read in one statement.
    fn read_lexical(&self, q: rank::LexicalQuery) -> Result<Vec<(i64, f32)>> {
        let distinct = q.distinct.clone();
        let postings = self.call(|pool| async move {
            let c = pool.get().await?;
            rank::postings(&**c, &distinct).await
        })?;
        Ok(q.rank(&postings))
    }

    /// The HNSW walk of `q`, in a read-only transaction with its setting.
    fn read_vector(&self, q: rank::VectorQuery) -> Result<Vec<(i64, f32)>> {
        let q = Arc::new(q);
        let query = q.clone();
        let rows = self.call(move |pool| async move {
            let mut c = pool.get().await?;
            let tx = c.build_transaction().read_only(true).start().await?;
            tx.batch_execute(&query.setting).await?;
            let rows = rank::nearest(&tx, &query).await?;
            tx.commit().await?;
            Ok(rows)
        })?;
        Ok(q.rank(rows))
    }

    /// Both lists in one read-only transaction: one snapshot, the
    /// statements pipelined.
    fn read_both(
        &self,
        lexical: rank::LexicalQuery,
        vector: rank::VectorQuery,
    ) -> Result<(Ranked, Ranked)> {
        let vector = Arc::new(vector);
        let distinct = lexical.distinct.clone();
        let vq = vector.clone();
        let (postings, rows) = self.call(move |pool| async move {
            let mut c = pool.get().await?;
            let tx = c.build_transaction().read_only(true).start().await?;
            // Sent together: tokio-postgres pipelines them in this order.
            // All are awaited, and the first failure in that order is the
            // one reported (the later ones only say the transaction
            // aborted).
            let (set, postings, rows) = tokio::join!(
                tx.batch_execute(&vq.setting),
                rank::postings(&*tx, &distinct),
                rank::nearest(&tx, &vq),
            );
            set?;
            let (postings, rows) = (postings?, rows?);
            tx.commit().await?;
            Ok((postings, rows))
        })?;
        Ok((lexical.rank(&postings), vector.rank(rows)))
    }
}

impl Backend for PostgresBackend {
    fn location(&self) -> String {
        self.shared.location.clone()
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        let key = key.to_string();
        self.call(|pool| async move {
            let c = pool.get().await?;
            Ok(
                c.query_opt("SELECT value FROM deloop_meta WHERE key = $1", &[&key])
                    .await?
                    .map(|r| r.get(0)),
            )
        })
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        let (key, value) = (key.to_string(), value.to_string());
        self.call(|pool| async move {
            let c = pool.get().await?;
            c.execute(
                "INSERT INTO deloop_meta(key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&key, &value],
            )
            .await?;
            Ok(())
        })
    }

    fn counts(&self) -> Result<Counts> {
        self.call(|pool| async move {
            let c = pool.get().await?;
            let r = c
                .query_one(
                    "SELECT (SELECT count(*) FROM deloop_documents),
                            (SELECT chunks FROM deloop_stats),
                            (SELECT count(*) FROM deloop_vectors)",
                    &[],
                )
                .await?;
            Ok(Counts {
                documents: r.get::<_, i64>(0) as u64,
                chunks: r.get::<_, i64>(1) as u64,
                vectors: r.get::<_, i64>(2) as u64,
            })
        })
    }

    fn reset(&mut self) -> Result<()> {
        self.call(|pool| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            tx.batch_execute(
                "LOCK TABLE deloop_stats IN EXCLUSIVE MODE;
                 DELETE FROM deloop_documents;
                 UPDATE deloop_stats SET chunks = 0, tokens = 0;
                 DELETE FROM deloop_meta WHERE key IN ('embedder_id', 'embedder_dim');",
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn prepare_vectors(&mut self, dim: usize) -> Result<()> {
        self.call(move |pool| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&schema::LOCK])
                .await?;
            let typed = if dim == 0 {
                "vector".to_string()
            } else {
                format!("vector({dim})")
            };
            tx.batch_execute(&format!(
                "DROP INDEX IF EXISTS deloop_vectors_embedding;
                 ALTER TABLE deloop_vectors ALTER COLUMN embedding TYPE {typed};"
            ))
            .await?;
            if dim > 0 && dim <= schema::HNSW_MAX_DIM {
                tx.batch_execute(
                    "CREATE INDEX deloop_vectors_embedding ON deloop_vectors
                     USING hnsw (embedding vector_cosine_ops)",
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn document(&self, key: &str) -> Result<Option<(i64, String)>> {
        let key = key.to_string();
        self.call(|pool| async move {
            let c = pool.get().await?;
            Ok(c.query_opt(
                "SELECT id, hash FROM deloop_documents WHERE key = $1",
                &[&key],
            )
            .await?
            .map(|r| (r.get(0), r.get(1))))
        })
    }

    fn documents(&self, kind: &str) -> Result<Vec<(i64, String)>> {
        let kind = kind.to_string();
        self.call(|pool| async move {
            let c = pool.get().await?;
            let rows = c
                .query(
                    "SELECT id, key FROM deloop_documents WHERE kind = $1 ORDER BY id",
                    &[&kind],
                )
                .await?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    fn write_documents(&mut self, docs: &[NewDocument]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        // Tokenize here (the lexer is this thread's), send in one transaction.
        let prepared = write::prepare(&self.lexer, docs)?;
        self.shared
            .call_write(|pool| async move { write::transaction(pool, prepared).await })
    }

    fn delete_document(&mut self, id: i64) -> Result<()> {
        self.call(move |pool| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            tx.execute(
                "WITH gone AS (
                     SELECT count(*) AS n, coalesce(sum(length), 0) AS t
                     FROM deloop_chunks WHERE document_id = $1)
                 UPDATE deloop_stats SET chunks = chunks - gone.n, tokens = tokens - gone.t
                 FROM gone",
                &[&id],
            )
            .await?;
            tx.execute("DELETE FROM deloop_documents WHERE id = $1", &[&id])
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn lexical(&self, words: &[String], k: usize) -> Result<Vec<(i64, f32)>> {
        match self.lexical_query(words, k)? {
            Some(q) => self.read_lexical(q),
            None => Ok(Vec::new()),
        }
    }

    fn vector_dim(&self) -> Result<Option<usize>> {
        self.call(|pool| async move {
            let c = pool.get().await?;
            let dim: Option<i32> = c
                .query_opt(
                    "SELECT vector_dims(embedding) FROM deloop_vectors LIMIT 1",
                    &[],
                )
                .await?
                .map(|r| r.get(0));
            Ok(dim.map(|d| d.max(0) as usize))
        })
    }

    fn vector(&self, query: &[f32], k: usize) -> Result<Vec<(i64, f32)>> {
        match rank::VectorQuery::new(query, k) {
            Some(q) => self.read_vector(q),
            None => Ok(Vec::new()),
        }
    }

    fn lexical_and_vector(
        &self,
        words: &[String],
        query: &[f32],
        k: usize,
    ) -> Result<(Ranked, Ranked)> {
        match (
            self.lexical_query(words, k)?,
            rank::VectorQuery::new(query, k),
        ) {
            (Some(lexical), Some(vector)) => self.read_both(lexical, vector),
            (lexical, vector) => Ok((
                lexical.map_or(Ok(Vec::new()), |q| self.read_lexical(q))?,
                vector.map_or(Ok(Vec::new()), |q| self.read_vector(q))?,
            )),
        }
    }

    fn load_matches(&self, ranked: &[(i64, f32)]) -> Result<Vec<ChunkMatch>> {
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = ranked.iter().map(|r| r.0).collect();
        let mut found = self.call(|pool| async move {
            let c = pool.get().await?;
            let rows = c
                .query(
                    "SELECT c.id, c.body, c.trail, c.start_line, c.end_line, d.source, d.doc_id
                     FROM deloop_chunks c JOIN deloop_documents d ON d.id = c.document_id
                     WHERE c.id = ANY($1)",
                    &[&ids],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| {
                    let trail: String = r.get(2);
                    let id: i64 = r.get(0);
                    (
                        id,
                        ChunkMatch {
                            chunk_id: id,
                            text: r.get(1),
                            heading_trail: serde_json::from_str(&trail).unwrap_or_default(),
                            start_line: r.get::<_, i32>(3).max(0) as usize,
                            end_line: r.get::<_, i32>(4).max(0) as usize,
                            source: r.get(5),
                            doc_id: r.get(6),
                            score: 0.0,
                        },
                    )
                })
                .collect::<HashMap<i64, ChunkMatch>>())
        })?;
        // A chunk deleted by a writer since it was ranked is left out.
        Ok(ranked
            .iter()
            .filter_map(|&(id, score)| {
                found.remove(&id).map(|mut m| {
                    m.score = score;
                    m
                })
            })
            .collect())
    }

    fn hyde_get(&self, model: &str, question: &str) -> Result<Option<String>> {
        let (model, question) = (model.to_string(), question.to_string());
        self.call(|pool| async move {
            let c = pool.get().await?;
            Ok(c.query_opt(
                "SELECT passage FROM deloop_hyde_cache WHERE model = $1 AND question = $2",
                &[&model, &question],
            )
            .await?
            .map(|r| r.get(0)))
        })
    }

    fn hyde_put(&self, model: &str, question: &str, passage: &str) -> Result<()> {
        let (model, question, passage) =
            (model.to_string(), question.to_string(), passage.to_string());
        self.call(|pool| async move {
            let c = pool.get().await?;
            c.execute(
                "INSERT INTO deloop_hyde_cache(model, question, passage, created_at)
                 VALUES ($1, $2, $3, extract(epoch FROM now())::bigint)
                 ON CONFLICT (model, question) DO UPDATE
                 SET passage = excluded.passage, created_at = excluded.created_at",
                &[&model, &question, &passage],
            )
            .await?;
            Ok(())
        })
    }
}
