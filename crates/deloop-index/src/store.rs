//! The SQLite file: schema, options, embedder bookkeeping, HyDE cache.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

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
    fn tokenize(self) -> &'static str {
        match self {
            Stemmer::Porter => "porter unicode61 remove_diacritics 2",
            Stemmer::None => "unicode61 remove_diacritics 2",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Stemmer::Porter => "porter",
            Stemmer::None => "none",
        }
    }

    fn from_name(s: &str) -> Option<Self> {
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

/// All stored vectors, loaded once and kept until the next write.
#[derive(Debug, Default)]
pub(crate) struct VectorCache {
    pub ids: Vec<i64>,
    pub dim: usize,
    pub data: Vec<f32>,
}

/// A deloop index: one SQLite file (or an in-memory database).
///
/// `Send` but not `Sync` (an SQLite connection): move it between threads,
/// or open one per concurrent reader (deloop-oracle keeps a small pool).
#[derive(Debug)]
pub struct Index {
    pub(crate) conn: Connection,
    pub(crate) options: IndexOptions,
    pub(crate) vectors: RefCell<Option<Arc<VectorCache>>>,
    path: Option<PathBuf>,
}

impl Index {
    /// Opens the index at `path`, creating the file (and its parent
    /// directories) with default options when it does not exist.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, IndexOptions::default())
    }

    /// Opens an existing index; [`Error::NoIndex`] when there is no file.
    pub fn open_existing(path: &Path) -> Result<Self> {
        if !path.is_file() {
            return Err(Error::NoIndex {
                path: path.display().to_string(),
            });
        }
        Self::open(path)
    }

    /// Opens or creates the index at `path`; `options` apply when it is created.
    pub fn open_with(path: &Path, options: IndexOptions) -> Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                path: parent.display().to_string(),
                source,
            })?;
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        Self::init(conn, options, Some(path.to_path_buf()))
    }

    /// An index in memory (for tests and one-off runs).
    pub fn open_in_memory() -> Result<Self> {
        Self::open_in_memory_with(IndexOptions::default())
    }

    /// An index in memory with the given options.
    pub fn open_in_memory_with(options: IndexOptions) -> Result<Self> {
        Self::init(Connection::open_in_memory()?, options, None)
    }

    /// The file path (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn init(conn: Connection, options: IndexOptions, path: Option<PathBuf>) -> Result<Self> {
        let where_ = path
            .as_ref()
            .map_or("the in-memory index".to_string(), |p| {
                p.display().to_string()
            });
        let has_meta: bool = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'",
            [],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        let options = if has_meta {
            let get = |k: &str| -> Result<Option<String>> {
                Ok(conn
                    .query_row("SELECT value FROM meta WHERE key=?1", [k], |r| r.get(0))
                    .optional()?)
            };
            let version = get("schema_version")?;
            if version.as_deref() != Some(&SCHEMA_VERSION.to_string()) {
                return Err(Error::Schema(format!(
                    "{where_} has index schema version {}, this deloop reads version \
                     {SCHEMA_VERSION}: rebuild it with `deloop index --reindex`",
                    version.unwrap_or_else(|| "(none)".into())
                )));
            }
            let num = |k: &str, d: usize| -> Result<usize> {
                Ok(get(k)?.and_then(|v| v.parse().ok()).unwrap_or(d))
            };
            let dflt = ChunkConfig::default();
            IndexOptions {
                stemmer: get("stemmer")?
                    .as_deref()
                    .and_then(Stemmer::from_name)
                    .unwrap_or_default(),
                chunking: ChunkConfig {
                    max_bytes: num("chunk_max_bytes", dflt.max_bytes)?,
                    overlap_bytes: num("chunk_overlap_bytes", dflt.overlap_bytes)?,
                },
            }
        } else {
            let tables: i64 = conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type='table'",
                [],
                |r| r.get(0),
            )?;
            if tables > 0 {
                return Err(Error::Schema(format!(
                    "{where_} is an SQLite database but not a deloop index; \
                     pick another --db path"
                )));
            }
            create_schema(&conn, &options)?;
            options
        };
        Ok(Self {
            conn,
            options,
            vectors: RefCell::new(None),
            path,
        })
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
        let count = |sql: &str| -> Result<u64> {
            Ok(self.conn.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64)
        };
        Ok(IndexSummary {
            documents: count("SELECT count(*) FROM documents")?,
            chunks: count("SELECT count(*) FROM chunks")?,
            vectors: count("SELECT count(*) FROM chunks WHERE vector IS NOT NULL")?,
            embedder: self.embedder_info()?,
            stemmer: self.options.stemmer.name().to_string(),
        })
    }

    /// Removes every document, chunk and vector and forgets the embedder
    /// (the HyDE cache is kept). Used by `deloop index --reindex`.
    pub fn reset(&mut self) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute_batch(
            "DELETE FROM chunks; DELETE FROM documents;
             INSERT INTO chunks_fts(chunks_fts) VALUES('delete-all');
             DELETE FROM meta WHERE key IN ('embedder_id','embedder_dim');",
        )?;
        tx.commit()?;
        self.invalidate();
        Ok(())
    }

    /// Records `wanted` as this index's embedder, or refuses when the index
    /// already holds chunks made with another one.
    pub(crate) fn claim_embedder(&self, wanted: &EmbedderInfo) -> Result<()> {
        match self.embedder_info()? {
            Some(have) if have == *wanted => Ok(()),
            Some(have) if self.summary()?.chunks > 0 => Err(Error::EmbedderMismatch {
                index: have.id,
                requested: wanted.id.clone(),
            }),
            _ => {
                self.set_meta("embedder_id", &wanted.id)?;
                self.set_meta("embedder_dim", &wanted.dim.to_string())?;
                Ok(())
            }
        }
    }

    pub(crate) fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key=?1", [key], |r| r.get(0))
            .optional()?)
    }

    pub(crate) fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO meta(key,value) VALUES(?1,?2)
             ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    /// Drops the in-memory vector cache after a write.
    pub(crate) fn invalidate(&self) {
        self.vectors.borrow_mut().take();
    }

    /// The cached HyDE passage for `question` generated by `model`.
    pub fn hyde_cache_get(&self, model: &str, question: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT passage FROM hyde_cache WHERE model=?1 AND question=?2",
                params![model, question],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Stores (or replaces) the HyDE passage for `question` and `model`.
    pub fn hyde_cache_put(&self, model: &str, question: &str, passage: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO hyde_cache(model,question,passage,created_at)
             VALUES(?1,?2,?3,strftime('%s','now'))
             ON CONFLICT(model,question) DO UPDATE
             SET passage=excluded.passage, created_at=excluded.created_at",
            params![model, question, passage],
        )?;
        Ok(())
    }
}

fn create_schema(conn: &Connection, options: &IndexOptions) -> Result<()> {
    let sql = format!(
        "BEGIN;
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE documents(
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            doc_id TEXT,
            source TEXT NOT NULL,
            hash TEXT NOT NULL
        );
        CREATE TABLE chunks(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            document_id INTEGER NOT NULL,
            heading TEXT NOT NULL,
            body TEXT NOT NULL,
            trail TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            vector BLOB
        );
        CREATE INDEX chunks_document ON chunks(document_id);
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            heading, body, content='chunks', content_rowid='id', tokenize='{tok}'
        );
        CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, heading, body) VALUES (new.id, new.heading, new.body);
        END;
        CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, heading, body)
            VALUES ('delete', old.id, old.heading, old.body);
        END;
        CREATE TABLE hyde_cache(
            model TEXT NOT NULL,
            question TEXT NOT NULL,
            passage TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY(model, question)
        );
        INSERT INTO meta VALUES('schema_version', '{SCHEMA_VERSION}');
        INSERT INTO meta VALUES('stemmer', '{stem}');
        INSERT INTO meta VALUES('chunk_max_bytes', '{max}');
        INSERT INTO meta VALUES('chunk_overlap_bytes', '{ov}');
        COMMIT;",
        tok = options.stemmer.tokenize(),
        stem = options.stemmer.name(),
        max = options.chunking.max_bytes,
        ov = options.chunking.overlap_bytes,
    );
    conn.execute_batch(&sql)?;
    Ok(())
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
    fn fts5_is_available_in_the_bundled_sqlite() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')",
        )
        .unwrap();
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
    fn foreign_sqlite_files_and_missing_indexes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("other.db");
        Connection::open(&db)
            .unwrap()
            .execute_batch("CREATE TABLE x(y)")
            .unwrap();
        let err = Index::open(&db).unwrap_err().to_string();
        assert!(err.contains("not a deloop index"), "{err}");
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
        let idx = Index::open_in_memory().unwrap();
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
