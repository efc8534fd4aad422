//! The oracle's index: opened (or built from the embedded docs) once, then
//! shared by concurrent asks through a small pool of connections (SQLite
//! connections; for PostgreSQL, handles on one shared connection pool), and
//! the embedders that fill it and embed queries.
//!
//! A rusqlite connection may move between threads but not be shared, so
//! each retrieval borrows a connection of its own from the pool for the
//! few milliseconds of its SQLite work (never across an LLM call); a new
//! one is opened when all are busy, and at most [`MAX_IDLE`] are kept.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use deloop_config::Config;
use deloop_index::{Embedder, Index};

use crate::embedders::{for_new_index, query_embedder, QueryEmbedder};
use crate::settings::Settings;
use crate::OracleError;

/// Idle connections kept for reuse (more may be open while busy).
pub(crate) const MAX_IDLE: usize = 8;

/// The pool of connections to one index file.
pub(crate) struct IndexPool {
    path: PathBuf,
    idle: Mutex<Vec<Index>>,
    /// `[index] db_timeout_ms` (PostgreSQL only).
    db_timeout: std::time::Duration,
}

impl std::fmt::Debug for IndexPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexPool")
            .field("path", &deloop_index::display_location(&self.path))
            .finish_non_exhaustive()
    }
}

impl IndexPool {
    /// A pool over `path`, starting with the connection `first`; its
    /// further connections to a PostgreSQL index get `db_timeout`
    /// (`[index] db_timeout_ms`).
    pub fn new(path: PathBuf, first: Index, db_timeout: std::time::Duration) -> Self {
        IndexPool {
            path,
            idle: Mutex::new(vec![first]),
            db_timeout,
        }
    }

    /// Runs `f` with a connection of its own (blocking: call it from a
    /// blocking thread in async code).
    pub fn with<T>(&self, f: impl FnOnce(&Index) -> T) -> Result<T, deloop_index::Error> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let index = match idle {
            Some(index) => index,
            None => Index::open_existing_within(&self.path, self.db_timeout)?,
        };
        let out = f(&index);
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(index);
        }
        Ok(out)
    }
}

/// An opened index, the root its embedded sources are shown relative to,
/// the notes to report, and the query embedder when opening needed it.
pub(crate) struct OpenedIndex {
    pub path: PathBuf,
    pub index: Index,
    pub root: Option<PathBuf>,
    pub notes: Vec<String>,
    pub embedder: Option<QueryEmbedder>,
    /// `[index] db_timeout_ms`, for the pool's further connections.
    pub db_timeout: std::time::Duration,
}

/// How [`open_index`] finds and builds the default index.
pub(crate) struct OpenIndexOptions<'a> {
    /// The default index's location (else `.deloop/index.db`).
    pub default_db: Option<&'a Path>,
    /// Stops building the default index when set.
    pub cancel: Option<&'a std::sync::atomic::AtomicBool>,
    /// Hears each step as it happens.
    pub on_note: &'a dyn Fn(&str),
}

/// An embedder that refuses to embed once `cancel` is set, so that a build
/// nobody waits for any more stops at its next batch.
struct Cancellable<'a> {
    inner: &'a (dyn Embedder + Send + Sync),
    cancel: Option<&'a std::sync::atomic::AtomicBool>,
}

impl Embedder for Cancellable<'_> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, deloop_index::EmbedError> {
        if self
            .cancel
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
        {
            return Err(deloop_index::EmbedError::Unavailable(
                "building the default index was cancelled: its caller has gone".into(),
            ));
        }
        self.inner.embed(texts)
    }
}

/// Opens the index: an explicit path must exist; the default one is built
/// from the embedded docs when missing, and refreshed when this binary
/// ships newer docs. `on_note` hears each step as it happens.
pub(crate) fn open_index(
    config: &Config,
    settings: &Settings,
    flag: Option<&Path>,
    options: OpenIndexOptions<'_>,
) -> Result<OpenedIndex, OracleError> {
    let OpenIndexOptions {
        default_db,
        cancel,
        on_note,
    } = options;
    let deloop_config::DbPath {
        path: mut db,
        explicit,
    } = config.db_path(flag);
    if let Some(d) = default_db.filter(|_| !explicit) {
        db = d.to_path_buf();
    }
    if let Some(problem) = deloop_index::unsupported_location(&db) {
        return Err(OracleError::BadRequest(problem));
    }
    let root = crate::embedded::embedded_root(&db);
    let root = std::fs::canonicalize(&root).ok();
    let db_timeout = config
        .index
        .db_timeout()
        .map_err(|e| OracleError::BadRequest(e.to_string()))?;
    // A PostgreSQL URL is always named, never built from the embedded docs.
    if deloop_index::is_database_url(&db) || db.is_file() {
        let mut index = Index::open_existing_within(&db, db_timeout).map_err(|e| match e {
            // Named by the index, without a password.
            deloop_index::Error::NoIndex { path } => OracleError::NoIndex { path: path.into() },
            e => e.into(),
        })?;
        let mut notes = Vec::new();
        let mut embedder = None;
        // A default index built by an older binary: refresh its documents.
        if let Some(r) = root
            .as_deref()
            .filter(|r| !explicit && crate::embedded::is_stale(r))
        {
            let query = query_embedder(config, &index, None);
            let lexical = matches!(index.embedder_info(), Ok(Some(ref i)) if i.is_none());
            if query.embedder.is_some() || lexical {
                match crate::embedded::refresh_default_index(
                    &mut index,
                    r,
                    query.embedder.as_deref().map(|e| e as &dyn Embedder),
                ) {
                    Ok(n) => notes.push(format!(
                        "refreshed {n} embedded document(s) in {} (this binary ships newer docs)",
                        db.display()
                    )),
                    Err(e) => tracing::warn!(error = %e, "cannot refresh the embedded docs"),
                }
            } else if let Some(p) = &query.problem {
                tracing::warn!(problem = %p, "embedded docs are stale but cannot be re-embedded");
            }
            for n in &notes {
                on_note(n);
            }
            embedder = Some(query);
        }
        return Ok(OpenedIndex {
            path: db,
            index,
            root,
            notes,
            embedder,
            db_timeout,
        });
    }
    if explicit {
        return Err(OracleError::NoIndex { path: db });
    }
    let (embedder, why_none) = match for_new_index(
        config,
        &settings.embedder,
        settings.minilm_dir.as_deref(),
        None,
    )? {
        Ok(e) => (Some(e), None),
        Err(why) => (None, Some(why)),
    };
    if let Some(e) = &embedder {
        on_note(&format!(
            "no index at {}: building it from deloop's embedded documentation \
             with {} (first run only; embedding takes a little while)...",
            db.display(),
            e.id()
        ));
    }
    let cancellable = embedder
        .as_deref()
        .map(|inner| Cancellable { inner, cancel });
    let (index, built) =
        crate::embedded::build_default_index(&db, cancellable.as_ref().map(|e| e as &dyn Embedder))
            .map_err(|e| match e {
                deloop_index::Error::Embed(e) => OracleError::Embedder(e.to_string()),
                e => e.into(),
            })?;
    let how = if built.embedder == "none" {
        match why_none {
            Some(why) => format!("lexical search only: {why}"),
            None => "lexical search only".to_string(),
        }
    } else {
        format!("vectors from {}", built.embedder)
    };
    let note = format!(
        "no index at {}: built it from deloop's embedded documentation ({} documents, {} chunks, {how})",
        db.display(),
        built.documents,
        built.chunks
    );
    on_note(&note);
    // The embedder that filled the index also embeds the queries.
    let embedder = match embedder {
        Some(e) if e.id() == built.embedder => Some(QueryEmbedder {
            embedder: Some(e),
            problem: None,
        }),
        _ => None,
    };
    Ok(OpenedIndex {
        path: db,
        index,
        root: Some(built.root),
        notes: vec![note],
        embedder,
        db_timeout,
    })
}
