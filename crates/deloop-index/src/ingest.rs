//! Ingestion: markdown/text files (incremental by content hash) and BEIR
//! `corpus.jsonl` files.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::backend::{NewChunk, NewDocument};
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
        for (id, key) in self.backend.documents("file")? {
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
        let existing = self.backend.document(key)?;
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

        let chunks_written = pending.len() as u64;
        self.backend.write_documents(&[NewDocument {
            kind: "file",
            key: key.to_string(),
            doc_id: None,
            source: key.to_string(),
            hash,
            chunks: new_chunks(pending, vectors),
        }])?;
        stats.updated += 1;
        stats.chunks_written += chunks_written;
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
            let old = self.backend.document(&key)?.map(|(_, hash)| hash);
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

        for (id, key) in self.backend.documents("beir")? {
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
        let mut vectors = vectors.map(Vec::into_iter);
        let docs: Vec<NewDocument> = batch
            .drain(..)
            .map(|(id, hash, p)| {
                let vector = vectors.as_mut().and_then(Iterator::next);
                NewDocument {
                    kind: "beir",
                    key: format!("beir:{id}"),
                    source: id.clone(),
                    doc_id: Some(id),
                    hash,
                    chunks: new_chunks(vec![p], vector.map(|v| vec![v])),
                }
            })
            .collect();
        self.backend.write_documents(&docs)?;
        stats.updated += docs.len() as u64;
        stats.chunks_written += docs.len() as u64;
        Ok(())
    }
    fn claim(&mut self, embedder: Option<&dyn Embedder>) -> Result<String> {
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
        self.backend.delete_document(id)
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

/// The chunks to write, each with its vector (when there are vectors).
fn new_chunks(pending: Vec<Pending>, vectors: Option<Vec<Vec<f32>>>) -> Vec<NewChunk> {
    let mut vectors = vectors.map(Vec::into_iter);
    pending
        .into_iter()
        .map(|p| NewChunk {
            heading: p.heading,
            body: p.body,
            trail: p.trail,
            start_line: p.start_line,
            end_line: p.end_line,
            vector: vectors.as_mut().and_then(Iterator::next),
        })
        .collect()
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
