//! The storage seam: one [`Backend`] trait and a module per engine
//! ([`sqlite`]: one file, FTS5; [`postgres`]: PostgreSQL with pgvector).
//!
//! Everything above it (chunking, hashing, embedding, fusion, the HyDE
//! rules) is shared: [`crate::Index`] asks a backend only to store and
//! fetch documents, chunks and vectors, and for its two ranked lists (BM25
//! and cosine). Both backends are checked against the same inputs by one
//! conformance suite (`tests/backends.rs`).

use std::path::Path;
use std::time::Duration;

use crate::search::ChunkMatch;
use crate::Result;

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod sqlite;

/// The URL schemes that name a PostgreSQL database instead of a file.
const POSTGRES_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

/// True when `db` names a PostgreSQL database (`postgres://…` or
/// `postgresql://…`) rather than an SQLite file.
///
/// ```
/// use std::path::Path;
/// assert!(deloop_index::is_database_url(Path::new("postgres://deloop@db:5432/deloop")));
/// assert!(!deloop_index::is_database_url(Path::new(".deloop/index.db")));
/// ```
pub fn is_database_url(db: &Path) -> bool {
    db.to_str()
        .is_some_and(|s| POSTGRES_SCHEMES.iter().any(|p| s.starts_with(p)))
}

/// The error for a `db` that looks like a URL (`scheme://…`) of a scheme
/// deloop does not store indexes in: without this check `mysql://…` would
/// silently become a file name. `None` for file paths and PostgreSQL URLs.
///
/// ```
/// use std::path::Path;
/// let e = deloop_index::unsupported_location(Path::new("mysql://me:pw@db/x")).unwrap();
/// assert!(e.contains("`mysql://`") && !e.contains("pw"), "{e}");
/// assert!(deloop_index::unsupported_location(Path::new("postgres://db/x")).is_none());
/// assert!(deloop_index::unsupported_location(Path::new("dir/index.db")).is_none());
/// assert!(deloop_index::unsupported_location(Path::new("C:/index.db")).is_none());
/// ```
pub fn unsupported_location(db: &Path) -> Option<String> {
    let s = db.to_str()?;
    if is_database_url(db) {
        return None;
    }
    let (scheme, _) = s.split_once("://")?;
    let valid = scheme.len() > 1
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then(|| {
        format!(
            "`{scheme}://` is not a supported index location: --db (DELOOP_DB, [index] db) \
             takes an SQLite file path or a `postgres://USER@HOST:PORT/DB` URL"
        )
    })
}

/// `db` as it may be printed: a database URL without its password (and
/// without any other `user:password@` secret), a file path as it is.
///
/// ```
/// use std::path::Path;
/// assert_eq!(
///     deloop_index::display_location(Path::new("postgres://me:s3cret@db:5432/x")),
///     "postgres://me@db:5432/x"
/// );
/// ```
pub fn display_location(db: &Path) -> String {
    if is_database_url(db) {
        redact(&db.to_string_lossy())
    } else {
        db.display().to_string()
    }
}

/// A ranked list: `(chunk id, score)`, best first.
pub(crate) type Ranked = Vec<(i64, f32)>;

/// Counts of what a backend holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Counts {
    pub documents: u64,
    pub chunks: u64,
    pub vectors: u64,
}

/// One chunk to write.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewChunk {
    pub heading: String,
    pub body: String,
    pub trail: Vec<String>,
    pub start_line: usize,
    pub end_line: usize,
    /// Unit length (normalised by the ingestion), or none.
    pub vector: Option<Vec<f32>>,
}

/// One document to write, replacing any document of the same key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewDocument {
    /// `file` or `beir`.
    pub kind: &'static str,
    /// The file path, or `beir:<id>`.
    pub key: String,
    /// The BEIR document id.
    pub doc_id: Option<String>,
    /// What a match shows as its source.
    pub source: String,
    /// The content hash (unchanged documents are skipped).
    pub hash: String,
    pub chunks: Vec<NewChunk>,
}

/// What an index engine must do. Ranked lists are `(chunk id, score)`,
/// best first, ties by smaller id.
pub(crate) trait Backend: Send + std::fmt::Debug {
    /// Where the index lives, as it may be printed (no password).
    fn location(&self) -> String;
    /// A value of the index's key/value metadata.
    fn meta(&self, key: &str) -> Result<Option<String>>;
    /// Sets a metadata value.
    fn set_meta(&self, key: &str, value: &str) -> Result<()>;
    /// Documents, chunks and vectors held.
    fn counts(&self) -> Result<Counts>;
    /// Removes every document, chunk and vector and forgets the embedder
    /// (the HyDE cache is kept).
    fn reset(&mut self) -> Result<()>;
    /// Called once an embedder of `dim` dimensions is recorded for an index
    /// without chunks (PostgreSQL types its vector column and builds the
    /// HNSW index; `dim` 0: no vectors).
    fn prepare_vectors(&mut self, dim: usize) -> Result<()>;
    /// The id and content hash of the document with `key`.
    fn document(&self, key: &str) -> Result<Option<(i64, String)>>;
    /// The ids and keys of every document of `kind`.
    fn documents(&self, kind: &str) -> Result<Vec<(i64, String)>>;
    /// Writes `docs` in one transaction, each replacing the document of
    /// its key: a reader sees all of a document or none of it.
    fn write_documents(&mut self, docs: &[NewDocument]) -> Result<()>;
    /// Deletes a document and its chunks.
    fn delete_document(&mut self, id: i64) -> Result<()>;
    /// BM25 over the chunks holding any of the query `words` (the heading
    /// weighs [`crate::bm25::HEADING_WEIGHT`]); at most `k`.
    fn lexical(&self, words: &[String], k: usize) -> Result<Vec<(i64, f32)>>;
    /// The length of the stored vectors; `None` when there are none.
    fn vector_dim(&self) -> Result<Option<usize>>;
    /// The `k` chunks nearest to `query` by cosine similarity (the score).
    fn vector(&self, query: &[f32], k: usize) -> Result<Vec<(i64, f32)>>;
    /// [`Backend::lexical`] and [`Backend::vector`] of one hybrid search
    /// (PostgreSQL reads both in one snapshot and one round trip).
    fn lexical_and_vector(
        &self,
        words: &[String],
        query: &[f32],
        k: usize,
    ) -> Result<(Ranked, Ranked)> {
        Ok((self.lexical(words, k)?, self.vector(query, k)?))
    }
    /// The chunks of `ranked`, in its order, with its scores.
    fn load_matches(&self, ranked: &[(i64, f32)]) -> Result<Vec<ChunkMatch>>;
    /// The cached HyDE passage for `question` and `model`.
    fn hyde_get(&self, model: &str, question: &str) -> Result<Option<String>>;
    /// Stores (or replaces) a HyDE passage.
    fn hyde_put(&self, model: &str, question: &str, passage: &str) -> Result<()>;
}

/// The default of [`crate::DbTimeout`]: connecting, waiting for a pooled
/// connection, and each statement.
pub const DEFAULT_DB_TIMEOUT: Duration = Duration::from_secs(30);

/// `url` without its password: the `user:password@` secret and any
/// `password=` parameter are removed.
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{user}@{host}")
        }
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|p| !p.to_ascii_lowercase().starts_with("password="))
                .collect();
            if kept.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        None => tail.to_string(),
    };
    if scheme.is_empty() {
        format!("{authority}{tail}")
    } else {
        format!("{scheme}://{authority}{tail}")
    }
}
