//! The index: options, embedder bookkeeping and the HyDE cache over a
//! storage [`Backend`] (SQLite or PostgreSQL).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::sqlite::SqliteBackend;
use crate::backend::{is_database_url, Backend, DEFAULT_DB_TIMEOUT};
use crate::chunk::ChunkConfig;
use crate::{Error, Result};

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// The FTS5 tokenizer chosen when an index is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stemmer {
    /// `porter unicode61 remove_diacritics 2`: English Porter stemming on top
    /// of accent-insensitive Unicode tokens (the default; better on SciFact).
    #[default]
    Porter,
    /// `unicode61 remove_diacritics 2`: accent-insensitive, no stemming.
    None,
}

impl Stemmer {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stemmer::Porter => "porter",
            Stemmer::None => "none",
        }
    }

    pub(crate) fn from_name(s: &str) -> Option<Self> {
        match s {
            "porter" => Some(Stemmer::Porter),
            "none" => Some(Stemmer::None),
            _ => None,
        }
    }
}

/// Options fixed when an index file is created (ignored when it exists: the
/// recorded ones apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexOptions {
    /// The lexical tokenizer.
    pub stemmer: Stemmer,
    /// Chunk sizes.
    pub chunking: ChunkConfig,
}

/// The embedder whose vectors an index holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EmbedderInfo {
    /// Its id (`none` when the index holds no vectors by choice).
    pub id: String,
    /// Its vector length (0 for `none`).
    pub dim: usize,
}

impl EmbedderInfo {
    /// The id recorded for an index built without vectors.
    pub const NONE: &'static str = "none";

    /// True for an index built without vectors.
    pub fn is_none(&self) -> bool {
        self.id == Self::NONE
    }
}

/// What an index holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IndexSummary {
    /// Documents (files or BEIR docs).
    pub documents: u64,
    /// Chunks.
    pub chunks: u64,
    /// Chunks that have a vector.
    pub vectors: u64,
    /// The embedder recorded, if any content was indexed yet.
    pub embedder: Option<EmbedderInfo>,
    /// The lexical tokenizer (`porter` or `none`).
    pub stemmer: String,
}

/// A deloop index: an SQLite file (or an in-memory database), or a
/// PostgreSQL database with pgvector (`postgres://…`, see
/// [`crate::is_database_url`]).
///
/// `Send` but not `Sync`: move it between threads, or open one per
/// concurrent reader (deloop-oracle keeps a small pool; PostgreSQL indexes
/// of one URL share one connection pool).
#[derive(Debug)]
pub struct Index {
    pub(crate) backend: Box<dyn Backend>,
    pub(crate) options: IndexOptions,
    path: Option<PathBuf>,
}

impl Index {
    /// Opens the index at `path` (a file, or a `postgres://` URL), creating
    /// it with default options when it does not exist.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, IndexOptions::default())
    }

    /// Opens an existing index; [`Error::NoIndex`] when there is no file
    /// (or no deloop schema in the database).
    pub fn open_existing(path: &Path) -> Result<Self> {
        Self::open_existing_within(path, DEFAULT_DB_TIMEOUT)
    }

    /// [`Index::open_existing`] where a PostgreSQL database is given
    /// `db_timeout` to connect, to lend a pooled connection and to run
    /// each statement (`[index] db_timeout_ms`); an SQLite file ignores it.
    pub fn open_existing_within(path: &Path, db_timeout: Duration) -> Result<Self> {
        if let Some(problem) = crate::unsupported_location(path) {
            return Err(Error::BadInput(problem));
        }
        if is_database_url(path) {
            let (backend, options) = open_database(path, None, db_timeout)?;
            return Ok(Self::with_backend(backend, options, path));
        }
        if !path.is_file() {
            return Err(Error::NoIndex {
                path: path.display().to_string(),
            });
        }
        Self::open(path)
    }

    /// Opens or creates the index at `path`; `options` apply when it is created.
    pub fn open_with(path: &Path, options: IndexOptions) -> Result<Self> {
        Self::open_with_within(path, options, DEFAULT_DB_TIMEOUT)
    }

    /// [`Index::open_with`] with a PostgreSQL deadline, as
    /// [`Index::open_existing_within`].
    pub fn open_with_within(
        path: &Path,
        options: IndexOptions,
        db_timeout: Duration,
    ) -> Result<Self> {
        if let Some(problem) = crate::unsupported_location(path) {
            return Err(Error::BadInput(problem));
        }
        if is_database_url(path) {
            let (backend, options) = open_database(path, Some(options), db_timeout)?;
            return Ok(Self::with_backend(backend, options, path));
        }
        let (backend, options) = SqliteBackend::open(Some(path), options)?;
        Ok(Self::with_backend(Box::new(backend), options, path))
    }

    /// An index in memory (for tests and one-off runs).
    pub fn open_in_memory() -> Result<Self> {
        Self::open_in_memory_with(IndexOptions::default())
    }

    /// An index in memory with the given options.
    pub fn open_in_memory_with(options: IndexOptions) -> Result<Self> {
        let (backend, options) = SqliteBackend::open(None, options)?;
        Ok(Self {
            backend: Box::new(backend),
            options,
            path: None,
        })
    }

    /// Deletes the index at `path`: the SQLite file (with its `-wal` and
    /// `-shm` files), or deloop's tables in a PostgreSQL database (its
    /// other tables and the `vector` extension are left alone). Nothing to
    /// delete is not an error. Used by `deloop index --reindex`.
    pub fn remove(path: &Path) -> Result<()> {
        Self::remove_within(path, DEFAULT_DB_TIMEOUT)
    }

    /// [`Index::remove`] with a PostgreSQL deadline, as
    /// [`Index::open_existing_within`].
    pub fn remove_within(path: &Path, db_timeout: Duration) -> Result<()> {
        if is_database_url(path) {
            return remove_database(path, db_timeout);
        }
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(Error::Io {
                        path: path.display().to_string(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    fn with_backend(backend: Box<dyn Backend>, options: IndexOptions, path: &Path) -> Self {
        Self {
            backend,
            options,
            path: Some(path.to_path_buf()),
        }
    }

    /// The file path or database URL as given (`None` in memory); print
    /// [`Index::location`] instead, which hides a password.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Where the index lives, as it may be printed: the file path, or the
    /// database URL without its password.
    pub fn location(&self) -> String {
        self.backend.location()
    }

    /// The options this index was created with.
    pub fn options(&self) -> IndexOptions {
        self.options
    }

    /// The embedder recorded for this index (`None` before anything was
    /// indexed or after [`Index::reset`]).
    pub fn embedder_info(&self) -> Result<Option<EmbedderInfo>> {
        let id: Option<String> = self.meta("embedder_id")?;
        let dim: Option<String> = self.meta("embedder_dim")?;
        Ok(id.map(|id| EmbedderInfo {
            id,
            dim: dim.and_then(|d| d.parse().ok()).unwrap_or(0),
        }))
    }

    /// Counts of what the index holds.
    pub fn summary(&self) -> Result<IndexSummary> {
        let counts = self.backend.counts()?;
        Ok(IndexSummary {
            documents: counts.documents,
            chunks: counts.chunks,
            vectors: counts.vectors,
            embedder: self.embedder_info()?,
            stemmer: self.options.stemmer.name().to_string(),
        })
    }

    /// Removes every document, chunk and vector and forgets the embedder
    /// (the HyDE cache is kept).
    pub fn reset(&mut self) -> Result<()> {
        self.backend.reset()
    }

    /// Records `wanted` as this index's embedder, or refuses when the index
    /// already holds chunks made with another one.
    pub(crate) fn claim_embedder(&mut self, wanted: &EmbedderInfo) -> Result<()> {
        match self.embedder_info()? {
            Some(have) if have == *wanted => Ok(()),
            Some(have) if self.backend.counts()?.chunks > 0 => Err(Error::EmbedderMismatch {
                index: have.id,
                requested: wanted.id.clone(),
            }),
            _ => {
                self.backend.prepare_vectors(wanted.dim)?;
                self.set_meta("embedder_id", &wanted.id)?;
                self.set_meta("embedder_dim", &wanted.dim.to_string())?;
                Ok(())
            }
        }
    }

    pub(crate) fn meta(&self, key: &str) -> Result<Option<String>> {
        self.backend.meta(key)
    }

    pub(crate) fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.backend.set_meta(key, value)
    }

    /// The cached HyDE passage for `question` generated by `model`.
    pub fn hyde_cache_get(&self, model: &str, question: &str) -> Result<Option<String>> {
        self.backend.hyde_get(model, question)
    }

    /// Stores (or replaces) the HyDE passage for `question` and `model`.
    pub fn hyde_cache_put(&self, model: &str, question: &str, passage: &str) -> Result<()> {
        self.backend.hyde_put(model, question, passage)
    }
}

/// The options recorded in an index's metadata (`get` reads a key).
pub(crate) fn recorded_options(
    get: &dyn Fn(&str) -> Result<Option<String>>,
) -> Result<IndexOptions> {
    let num = |k: &str, d: usize| -> Result<usize> {
        Ok(get(k)?.and_then(|v| v.parse().ok()).unwrap_or(d))
    };
    let dflt = ChunkConfig::default();
    Ok(IndexOptions {
        stemmer: get("stemmer")?
            .as_deref()
            .and_then(Stemmer::from_name)
            .unwrap_or_default(),
        chunking: ChunkConfig {
            max_bytes: num("chunk_max_bytes", dflt.max_bytes)?,
            overlap_bytes: num("chunk_overlap_bytes", dflt.overlap_bytes)?,
        },
    })
}

/// The PostgreSQL backend at `url` (`options` when its tables are made).
#[cfg(feature = "postgres")]
fn open_database(
    url: &Path,
    options: Option<IndexOptions>,
    db_timeout: Duration,
) -> Result<(Box<dyn Backend>, IndexOptions)> {
    use crate::backend::postgres::PostgresBackend;
    let (backend, options) = PostgresBackend::open(&url.to_string_lossy(), options, db_timeout)?;
    Ok((Box::new(backend), options))
}

/// Deletes deloop's tables in the database at `url`.
#[cfg(feature = "postgres")]
fn remove_database(url: &Path, db_timeout: Duration) -> Result<()> {
    crate::backend::postgres::PostgresBackend::remove(&url.to_string_lossy(), db_timeout)
}

/// A build without PostgreSQL support refuses database URLs, naming the
/// feature (and the URL without its password).
#[cfg(not(feature = "postgres"))]
fn no_postgres(url: &Path) -> Error {
    Error::BadInput(format!(
        "{}: this deloop was built without PostgreSQL support (the cargo feature \
         `postgres`, on by default): rebuild it with default features, or give an SQLite \
         file path",
        crate::display_location(url)
    ))
}

#[cfg(not(feature = "postgres"))]
fn open_database(
    url: &Path,
    _options: Option<IndexOptions>,
    _db_timeout: Duration,
) -> Result<(Box<dyn Backend>, IndexOptions)> {
    Err(no_postgres(url))
}

#[cfg(not(feature = "postgres"))]
fn remove_database(url: &Path, _db_timeout: Duration) -> Result<()> {
    Err(no_postgres(url))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server moves connections between threads (deloop-oracle's pool).
    #[test]
    fn an_index_can_move_between_threads() {
        fn assert_send<T: Send>() {}
        assert_send::<Index>();
    }

    #[test]
    fn schema_is_versioned_and_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sub/dir/index.db");
        {
            let idx = Index::open_with(
                &db,
                IndexOptions {
                    stemmer: Stemmer::None,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(idx.options().stemmer, Stemmer::None);
        }
        // Reopening keeps the recorded options, whatever is passed.
        let idx = Index::open(&db).unwrap();
        assert_eq!(idx.options().stemmer, Stemmer::None);
        idx.set_meta("schema_version", "999").unwrap();
        drop(idx);
        let err = Index::open(&db).unwrap_err().to_string();
        assert!(
            err.contains("schema version 999") && err.contains("--reindex"),
            "{err}"
        );
    }

    #[test]
    fn missing_indexes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = Index::open_existing(&dir.path().join("nope.db"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("run `deloop index"), "{err}");
    }

    #[test]
    fn hyde_cache_roundtrip() {
        let idx = Index::open_in_memory().unwrap();
        assert_eq!(idx.hyde_cache_get("m", "q").unwrap(), None);
        idx.hyde_cache_put("m", "q", "p1").unwrap();
        idx.hyde_cache_put("m", "q", "p2").unwrap();
        assert_eq!(idx.hyde_cache_get("m", "q").unwrap().as_deref(), Some("p2"));
        assert_eq!(idx.hyde_cache_get("other", "q").unwrap(), None);
    }

    #[test]
    fn embedder_claims() {
        let mut idx = Index::open_in_memory().unwrap();
        let a = EmbedderInfo {
            id: "a".into(),
            dim: 3,
        };
        let b = EmbedderInfo {
            id: "b".into(),
            dim: 3,
        };
        idx.claim_embedder(&a).unwrap();
        // Empty index: switching is allowed.
        idx.claim_embedder(&b).unwrap();
        assert_eq!(idx.embedder_info().unwrap(), Some(b));
    }
}
