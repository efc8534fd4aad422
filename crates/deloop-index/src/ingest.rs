//! Ingestion: markdown/text files (incremental by content hash) and BEIR
//! `corpus.jsonl` files.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::{params, OptionalExtension};
use sha2::{Digest, Sha256};

use crate::chunk::{chunk_text, Chunk};
use crate::embed::{normalize, Embedder};
use crate::store::{EmbedderInfo, Index};
use crate::{Error, Result};

/// Progress of an ingestion, reported as it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The number of files (or corpus lines) about to be looked at.
    Start {
        /// Total items.
        total: u64,
    },
    /// One more item was handled.
    Item {
        /// Items handled so far.
        done: u64,
        /// The file path or BEIR doc id.
        name: String,
    },
    /// A file was skipped (it is also listed in [`IndexStats::warnings`]).
    Warning {
        /// What happened, naming the file.
        message: String,
    },
}

/// What an ingestion did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct IndexStats {
    /// Files (or BEIR docs) looked at.
    pub seen: u64,
    /// Unchanged since the last run (same content hash): skipped.
    pub unchanged: u64,
    /// New or changed: (re)chunked and written.
    pub updated: u64,
    /// Gone from disk (or from the corpus): removed from the index.
    pub removed: u64,
    /// Skipped with a warning (unreadable, not UTF-8).
    pub failed: u64,
    /// Chunks written by this run.
    pub chunks_written: u64,
    /// Chunks in the index afterwards.
    pub chunks_total: u64,
    /// The embedder whose vectors were written (`none` for none).
    pub embedder: String,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// One line per skipped file.
    pub warnings: Vec<String>,
}

/// File extensions indexed when walking directories.
const EXTENSIONS: [&str; 3] = ["md", "markdown", "txt"];
/// Directory names never walked into (besides hidden ones).
const SKIP_DIRS: [&str; 2] = ["target", "node_modules"];
/// BEIR documents per transaction / embedding batch.
const BEIR_BATCH: usize = 64;

struct Pending {
    heading: String,
    body: String,
    trail: Vec<String>,
    start_line: usize,
    end_line: usize,
    embed_text: String,
}

impl Index {
    /// Indexes markdown and text files. Directories are walked (files ending
    /// in `.md`, `.markdown` or `.txt`; hidden entries, `target` and
    /// `node_modules` skipped); files named explicitly are indexed whatever
    /// their extension. Unchanged files are skipped, changed ones replaced,
    /// and indexed files under the given paths that no longer exist are
    /// removed. A file that is not valid UTF-8 is skipped with a warning.
    ///
    /// With `embedder`, every chunk gets a vector; the index refuses an
    /// embedder other than the one it was built with ([`Error::EmbedderMismatch`]).
    pub fn index_paths(
        &mut self,
        paths: &[PathBuf],
        embedder: Option<&dyn Embedder>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<IndexStats> {
        let started = Instant::now();
        let mut stats = IndexStats {
            embedder: self.claim(embedder)?,
            ..Default::default()
        };

        // Collect the files first so progress has a total.
        let mut roots = Vec::new();
        let mut files: Vec<PathBuf> = Vec::new();
        for p in paths {
            let root = std::fs::canonicalize(p)
                .map_err(|e| Error::BadInput(format!("cannot index {}: {e}", p.display())))?;
            if root.is_dir() {
                let walker = walkdir::WalkDir::new(&root)
                    .sort_by_file_name()
                    .into_iter()
                    .filter_entry(|e| e.depth() == 0 || !skipped_entry(e));
                for entry in walker {
                    match entry {
                        Ok(e) if e.file_type().is_file() && has_doc_extension(e.path()) => {
                            files.push(e.into_path())
                        }
                        Ok(_) => {}
                        Err(e) => warn(&mut stats, progress, format!("skipped: {e}")),
                    }
                }
            } else {
                files.push(root.clone());
            }
            roots.push(root);
        }
        files.sort();
        files.dedup();

        progress(Progress::Start {
            total: files.len() as u64,
        });
        let mut seen_keys = HashSet::new();
        for (i, file) in files.iter().enumerate() {
            stats.seen += 1;
            let Some(key) = file.to_str().map(str::to_string) else {
                let msg = format!("{}: skipped: the path is not valid UTF-8", file.display());
                warn(&mut stats, progress, msg);
                continue;
            };
            seen_keys.insert(key.clone());
            self.index_file(file, &key, embedder, &mut stats, progress)?;
            progress(Progress::Item {
                done: i as u64 + 1,
                name: key,
            });
        }

        // Remove indexed files under these roots that are gone.
        let known: Vec<(i64, String)> = {
            let mut st = self
                .conn
                .prepare("SELECT id, key FROM documents WHERE kind='file'")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for (id, key) in known {
            let under = roots.iter().any(|r| Path::new(&key).starts_with(r));
            if under && !seen_keys.contains(&key) {
                self.delete_document(id)?;
                stats.removed += 1;
            }
        }
        self.finish(&mut stats, started)
    }

    fn index_file(
        &mut self,
        file: &Path,
        key: &str,
        embedder: Option<&dyn Embedder>,
        stats: &mut IndexStats,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let existing: Option<(i64, String)> = self
            .conn
            .query_row("SELECT id, hash FROM documents WHERE key=?1", [key], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        let bytes = match std::fs::read(file) {
            Ok(b) => b,
            Err(e) => {
                warn(stats, progress, format!("{key}: skipped: cannot read: {e}"));
                return Ok(());
            }
        };
        let hash = sha256_hex(&[&bytes]);
        if existing.as_ref().is_some_and(|(_, h)| *h == hash) {
            stats.unchanged += 1;
            return Ok(());
        }
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t.strip_prefix('\u{feff}').unwrap_or(t),
            Err(e) => {
                if let Some((id, _)) = existing {
                    self.delete_document(id)?;
                }
                let msg = format!(
                    "{key}: skipped: not valid UTF-8 (first invalid byte at offset {})",
                    e.valid_up_to()
                );
                warn(stats, progress, msg);
                return Ok(());
            }
        };
        let markdown = !file
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("txt"));
        let chunks = chunk_text(text, markdown, self.options.chunking);
        let pending: Vec<Pending> = chunks.into_iter().map(pending_from_chunk).collect();
        let vectors = embed_all(embedder, &pending)?;

        let tx = self.conn.transaction()?;
        if let Some((id, _)) = existing {
            tx.execute("DELETE FROM chunks WHERE document_id=?1", [id])?;
            tx.execute("DELETE FROM documents WHERE id=?1", [id])?;
        }
        tx.execute(
            "INSERT INTO documents(key, kind, doc_id, source, hash) VALUES(?1,'file',NULL,?1,?2)",
            params![key, hash],
        )?;
        let doc = tx.last_insert_rowid();
        insert_chunks(&tx, doc, &pending, vectors.as_deref())?;
        tx.commit()?;
        self.invalidate();
        stats.updated += 1;
        stats.chunks_written += pending.len() as u64;
        Ok(())
    }

    /// Ingests a BEIR `corpus.jsonl`: one JSON object per line with `_id`,
    /// `title` and `text` (other fields ignored). Each document is one chunk
    /// (title as its heading, text as its body); search hits carry the `_id`
    /// as [`crate::ChunkMatch::doc_id`]. Unchanged documents are skipped,
    /// and BEIR documents of the index that are not in this corpus removed.
    /// A malformed line stops the ingestion with an error naming its number
    /// (documents before it stay indexed).
    pub fn index_beir(
        &mut self,
        corpus: &Path,
        embedder: Option<&dyn Embedder>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<IndexStats> {
        let started = Instant::now();
        let mut stats = IndexStats {
            embedder: self.claim(embedder)?,
            ..Default::default()
        };
        let io = |source| Error::Io {
            path: corpus.display().to_string(),
            source,
        };
        let open = || std::fs::File::open(corpus).map(std::io::BufReader::new);
        let total = open().map_err(io)?.lines().count() as u64;
        progress(Progress::Start { total });

        let mut seen = HashSet::new();
        let mut batch: Vec<(String, String, Pending)> = Vec::new();
        for (n, line) in open().map_err(io)?.lines().enumerate() {
            let line = line.map_err(io)?;
            let done = n as u64 + 1;
            if line.trim().is_empty() {
                continue;
            }
            let (id, title, text) = parse_beir_line(&line).map_err(|e| {
                Error::BadInput(format!("{} line {}: {e}", corpus.display(), n + 1))
            })?;
            stats.seen += 1;
            let key = format!("beir:{id}");
            seen.insert(key.clone());
            let hash = sha256_hex(&[title.as_bytes(), b"\0", text.as_bytes()]);
            let old: Option<String> = self
                .conn
                .query_row("SELECT hash FROM documents WHERE key=?1", [&key], |r| {
                    r.get(0)
                })
                .optional()?;
            if old.as_deref() == Some(hash.as_str()) {
                stats.unchanged += 1;
            } else {
                let embed_text = if title.is_empty() {
                    text.clone()
                } else {
                    format!("{title} {text}")
                };
                let pending = Pending {
                    heading: title.clone(),
                    trail: if title.is_empty() {
                        vec![]
                    } else {
                        vec![title]
                    },
                    body: text,
                    start_line: n + 1,
                    end_line: n + 1,
                    embed_text,
                };
                batch.push((id.clone(), hash, pending));
            }
            if batch.len() >= BEIR_BATCH {
                self.write_beir_batch(&mut batch, embedder, &mut stats)?;
            }
            progress(Progress::Item { done, name: id });
        }
        self.write_beir_batch(&mut batch, embedder, &mut stats)?;

        let known: Vec<(i64, String)> = {
            let mut st = self
                .conn
                .prepare("SELECT id, key FROM documents WHERE kind='beir'")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for (id, key) in known {
            if !seen.contains(&key) {
                self.delete_document(id)?;
                stats.removed += 1;
            }
        }
        self.finish(&mut stats, started)
    }

    fn write_beir_batch(
        &mut self,
        batch: &mut Vec<(String, String, Pending)>,
        embedder: Option<&dyn Embedder>,
        stats: &mut IndexStats,
    ) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let pending: Vec<&Pending> = batch.iter().map(|(_, _, p)| p).collect();
        let vectors = match embedder {
            Some(e) => {
                let texts: Vec<&str> = pending.iter().map(|p| p.embed_text.as_str()).collect();
                Some(checked_embed(e, &texts)?)
            }
            None => None,
        };
        let tx = self.conn.transaction()?;
        for (i, (id, hash, p)) in batch.iter().enumerate() {
            let key = format!("beir:{id}");
            tx.execute(
                "DELETE FROM chunks WHERE document_id IN (SELECT id FROM documents WHERE key=?1)",
                [&key],
            )?;
            tx.execute("DELETE FROM documents WHERE key=?1", [&key])?;
            tx.execute(
                "INSERT INTO documents(key, kind, doc_id, source, hash) VALUES(?1,'beir',?2,?2,?3)",
                params![key, id, hash],
            )?;
            let doc = tx.last_insert_rowid();
            let v = vectors.as_ref().map(|v| &v[i..i + 1]);
            insert_chunks(&tx, doc, std::slice::from_ref(p), v)?;
        }
        tx.commit()?;
        self.invalidate();
        stats.updated += batch.len() as u64;
        stats.chunks_written += batch.len() as u64;
        batch.clear();
        Ok(())
    }

    fn claim(&self, embedder: Option<&dyn Embedder>) -> Result<String> {
        let info = match embedder {
            Some(e) => EmbedderInfo {
                id: e.id().to_string(),
                dim: e.dim(),
            },
            None => EmbedderInfo {
                id: EmbedderInfo::NONE.to_string(),
                dim: 0,
            },
        };
        self.claim_embedder(&info)?;
        Ok(info.id)
    }

    fn delete_document(&mut self, id: i64) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute("DELETE FROM chunks WHERE document_id=?1", [id])?;
        tx.execute("DELETE FROM documents WHERE id=?1", [id])?;
        tx.commit()?;
        self.invalidate();
        Ok(())
    }

    fn finish(&self, stats: &mut IndexStats, started: Instant) -> Result<IndexStats> {
        stats.chunks_total = self.summary()?.chunks;
        stats.seconds = started.elapsed().as_secs_f64();
        Ok(std::mem::take(stats))
    }
}

fn pending_from_chunk(c: Chunk) -> Pending {
    let heading = c.heading_trail.join(" > ");
    let embed_text = if heading.is_empty() {
        c.text.clone()
    } else {
        format!("{heading}\n{}", c.text)
    };
    Pending {
        heading,
        body: c.text,
        trail: c.heading_trail,
        start_line: c.start_line,
        end_line: c.end_line,
        embed_text,
    }
}

fn embed_all(
    embedder: Option<&dyn Embedder>,
    pending: &[Pending],
) -> Result<Option<Vec<Vec<f32>>>> {
    let Some(e) = embedder else {
        return Ok(None);
    };
    let texts: Vec<&str> = pending.iter().map(|p| p.embed_text.as_str()).collect();
    Ok(Some(checked_embed(e, &texts)?))
}

/// Embeds and checks the embedder kept its contract (count and length).
fn checked_embed(e: &dyn Embedder, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let mut vectors = e.embed(texts)?;
    if vectors.len() != texts.len() || vectors.iter().any(|v| v.len() != e.dim()) {
        return Err(crate::EmbedError::Failed(format!(
            "embedder `{}` returned {} vectors for {} texts (expected length {})",
            e.id(),
            vectors.len(),
            texts.len(),
            e.dim()
        ))
        .into());
    }
    for v in &mut vectors {
        normalize(v);
    }
    Ok(vectors)
}

fn insert_chunks<P: std::borrow::Borrow<Pending>>(
    tx: &rusqlite::Transaction<'_>,
    doc: i64,
    pending: &[P],
    vectors: Option<&[Vec<f32>]>,
) -> Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT INTO chunks(document_id, heading, body, trail, start_line, end_line, vector)
         VALUES(?1,?2,?3,?4,?5,?6,?7)",
    )?;
    for (i, p) in pending.iter().enumerate() {
        let p = p.borrow();
        let trail = serde_json::to_string(&p.trail).unwrap_or_else(|_| "[]".into());
        let blob: Option<Vec<u8>> = vectors
            .and_then(|v| v.get(i))
            .map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect());
        st.execute(params![
            doc,
            p.heading,
            p.body,
            trail,
            p.start_line as i64,
            p.end_line as i64,
            blob
        ])?;
    }
    Ok(())
}

fn parse_beir_line(line: &str) -> std::result::Result<(String, String, String), String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    let id = match obj.get("_id") {
        Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => return Err("missing `_id` (a non-empty string)".into()),
    };
    let field = |k: &str| -> std::result::Result<String, String> {
        match obj.get(k) {
            None | Some(serde_json::Value::Null) => Ok(String::new()),
            Some(serde_json::Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(format!("`{k}` is not a string")),
        }
    };
    Ok((id, field("title")?, field("text")?))
}

fn skipped_entry(e: &walkdir::DirEntry) -> bool {
    let name = e.file_name().to_string_lossy();
    name.starts_with('.') || (e.file_type().is_dir() && SKIP_DIRS.contains(&name.as_ref()))
}

fn has_doc_extension(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

fn warn(stats: &mut IndexStats, progress: &mut dyn FnMut(Progress), message: String) {
    stats.failed += 1;
    stats.warnings.push(message.clone());
    progress(Progress::Warning { message });
}

fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
