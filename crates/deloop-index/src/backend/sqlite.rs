//! The SQLite backend: one file (or an in-memory database), FTS5 for BM25,
//! vectors as little-endian `f32` blobs searched exactly in memory.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

use super::{Backend, Counts, NewDocument};
use crate::bm25::{BODY_WEIGHT, HEADING_WEIGHT};
use crate::chunk::ChunkConfig;
use crate::embed::normalize;
use crate::search::ChunkMatch;
use crate::store::{IndexOptions, Stemmer, SCHEMA_VERSION};
use crate::{Error, Result};

/// All stored vectors, loaded once and kept until the next write.
#[derive(Debug, Default)]
struct VectorCache {
    ids: Vec<i64>,
    dim: usize,
    data: Vec<f32>,
}

/// An SQLite index.
#[derive(Debug)]
pub(crate) struct SqliteBackend {
    conn: Connection,
    vectors: RefCell<Option<Arc<VectorCache>>>,
    path: Option<PathBuf>,
}

/// The FTS5 tokenizer of a stemmer (also what [`crate::lexer`] runs for
/// the PostgreSQL backend).
pub(crate) fn tokenize(stemmer: Stemmer) -> &'static str {
    match stemmer {
        Stemmer::Porter => "porter unicode61 remove_diacritics 2",
        Stemmer::None => "unicode61 remove_diacritics 2",
    }
}

impl SqliteBackend {
    /// Opens (creating when new) the file at `path`, or memory when `None`.
    /// Returns the backend and the options in force (the recorded ones for
    /// an existing index).
    pub fn open(path: Option<&Path>, options: IndexOptions) -> Result<(Self, IndexOptions)> {
        let conn = match path {
            Some(path) => {
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
                conn
            }
            None => Connection::open_in_memory()?,
        };
        let where_ = path.map_or("the in-memory index".to_string(), |p| {
            p.display().to_string()
        });
        let options = init(&conn, options, &where_)?;
        Ok((
            Self {
                conn,
                vectors: RefCell::new(None),
                path: path.map(Path::to_path_buf),
            },
            options,
        ))
    }

    /// Drops the in-memory vector cache after a write.
    fn invalidate(&self) {
        self.vectors.borrow_mut().take();
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
}

/// Reads the recorded options of an index, or creates the schema.
fn init(conn: &Connection, options: IndexOptions, where_: &str) -> Result<IndexOptions> {
    let has_meta: bool = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if has_meta {
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
        return crate::store::recorded_options(&|k| get(k));
    }
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
    create_schema(conn, &options)?;
    Ok(options)
}

fn create_schema(conn: &Connection, options: &IndexOptions) -> Result<()> {
    let ChunkConfig {
        max_bytes,
        overlap_bytes,
    } = options.chunking;
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
        INSERT INTO meta VALUES('chunk_max_bytes', '{max_bytes}');
        INSERT INTO meta VALUES('chunk_overlap_bytes', '{overlap_bytes}');
        COMMIT;",
        tok = tokenize(options.stemmer),
        stem = options.stemmer.name(),
    );
    conn.execute_batch(&sql)?;
    Ok(())
}

impl Backend for SqliteBackend {
    fn location(&self) -> String {
        self.path
            .as_ref()
            .map_or("the in-memory index".to_string(), |p| {
                p.display().to_string()
            })
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key=?1", [key], |r| r.get(0))
            .optional()?)
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO meta(key,value) VALUES(?1,?2)
             ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    fn counts(&self) -> Result<Counts> {
        let count = |sql: &str| -> Result<u64> {
            Ok(self.conn.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64)
        };
        Ok(Counts {
            documents: count("SELECT count(*) FROM documents")?,
            chunks: count("SELECT count(*) FROM chunks")?,
            vectors: count("SELECT count(*) FROM chunks WHERE vector IS NOT NULL")?,
        })
    }

    fn reset(&mut self) -> Result<()> {
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

    fn prepare_vectors(&mut self, _dim: usize) -> Result<()> {
        Ok(())
    }

    fn document(&self, key: &str) -> Result<Option<(i64, String)>> {
        Ok(self
            .conn
            .query_row("SELECT id, hash FROM documents WHERE key=?1", [key], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?)
    }

    fn documents(&self, kind: &str) -> Result<Vec<(i64, String)>> {
        let mut st = self
            .conn
            .prepare("SELECT id, key FROM documents WHERE kind=?1 ORDER BY id")?;
        let rows = st.query_map([kind], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn write_documents(&mut self, docs: &[NewDocument]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        for d in docs {
            tx.execute(
                "DELETE FROM chunks WHERE document_id IN (SELECT id FROM documents WHERE key=?1)",
                [&d.key],
            )?;
            tx.execute("DELETE FROM documents WHERE key=?1", [&d.key])?;
            tx.execute(
                "INSERT INTO documents(key, kind, doc_id, source, hash) VALUES(?1,?2,?3,?4,?5)",
                params![d.key, d.kind, d.doc_id, d.source, d.hash],
            )?;
            let doc = tx.last_insert_rowid();
            let mut st = tx.prepare_cached(
                "INSERT INTO chunks(document_id, heading, body, trail, start_line, end_line, vector)
                 VALUES(?1,?2,?3,?4,?5,?6,?7)",
            )?;
            for c in &d.chunks {
                let trail = serde_json::to_string(&c.trail).unwrap_or_else(|_| "[]".into());
                let blob: Option<Vec<u8>> = c
                    .vector
                    .as_ref()
                    .map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect());
                st.execute(params![
                    doc,
                    c.heading,
                    c.body,
                    trail,
                    c.start_line as i64,
                    c.end_line as i64,
                    blob
                ])?;
            }
        }
        tx.commit()?;
        self.invalidate();
        Ok(())
    }

    fn delete_document(&mut self, id: i64) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute("DELETE FROM chunks WHERE document_id=?1", [id])?;
        tx.execute("DELETE FROM documents WHERE id=?1", [id])?;
        tx.commit()?;
        self.invalidate();
        Ok(())
    }

    /// FTS5's own `bm25()`, with the column weights.
    fn lexical(&self, words: &[String], k: usize) -> Result<Vec<(i64, f32)>> {
        if words.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let q = words
            .iter()
            .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" OR ");
        let mut st = self.conn.prepare_cached(
            "SELECT rowid, bm25(chunks_fts, ?3, ?4) AS s FROM chunks_fts
             WHERE chunks_fts MATCH ?1 ORDER BY s, rowid LIMIT ?2",
        )?;
        let rows = st.query_map(params![q, k as i64, HEADING_WEIGHT, BODY_WEIGHT], |r| {
            Ok((r.get::<_, i64>(0)?, -(r.get::<_, f64>(1)? as f32)))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn vector_dim(&self) -> Result<Option<usize>> {
        let cache = self.vector_cache()?;
        Ok((!cache.ids.is_empty()).then_some(cache.dim))
    }

    /// Exact cosine over all stored (unit-length) vectors.
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

    fn hyde_get(&self, model: &str, question: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT passage FROM hyde_cache WHERE model=?1 AND question=?2",
                params![model, question],
                |r| r.get(0),
            )
            .optional()?)
    }

    fn hyde_put(&self, model: &str, question: &str, passage: &str) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts5_is_available_in_the_bundled_sqlite() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')",
        )
        .unwrap();
    }

    #[test]
    fn foreign_sqlite_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("other.db");
        Connection::open(&db)
            .unwrap()
            .execute_batch("CREATE TABLE x(y)")
            .unwrap();
        let err = SqliteBackend::open(Some(&db), IndexOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a deloop index"), "{err}");
    }
}
