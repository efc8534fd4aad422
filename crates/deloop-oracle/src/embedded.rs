//! deloop's own documentation, embedded in the binary: the corpus of the
//! default index, so `deloop ask` answers on a fresh machine with no index,
//! no model files and no API key.

/// The embedded documents: `(source path, markdown text)`, in the order
/// they are indexed. The paths are relative to the repository root.
pub const EMBEDDED_DOCS: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../README.md")),
    (
        "docs/repetition.md",
        include_str!("../../../docs/repetition.md"),
    ),
    ("docs/rescue.md", include_str!("../../../docs/rescue.md")),
    ("docs/loops.md", include_str!("../../../docs/loops.md")),
    ("docs/llm.md", include_str!("../../../docs/llm.md")),
    (
        "docs/retrieval.md",
        include_str!("../../../docs/retrieval.md"),
    ),
    ("docs/oracle.md", include_str!("../../../docs/oracle.md")),
    ("docs/server.md", include_str!("../../../docs/server.md")),
    ("docs/proxy.md", include_str!("../../../docs/proxy.md")),
];

/// Where the embedded documents are written for an index at `db`: the
/// `embedded-docs` directory beside it.
pub fn embedded_root(db: &std::path::Path) -> std::path::PathBuf {
    db.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| std::path::Path::new("."))
        .join("embedded-docs")
}

/// What building the default index did.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultIndex {
    /// The directory holding the written documents (sources are shown
    /// relative to it).
    pub root: std::path::PathBuf,
    /// Documents indexed.
    pub documents: usize,
    /// Chunks written.
    pub chunks: u64,
    /// The embedder id recorded in the index (`none` for lexical only).
    pub embedder: String,
}

fn write_docs(root: &std::path::Path) -> deloop_index::Result<()> {
    for (name, text) in EMBEDDED_DOCS {
        let path = root.join(name);
        if std::fs::read_to_string(&path).is_ok_and(|t| t == *text) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| deloop_index::Error::Io {
                path: parent.display().to_string(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| deloop_index::Error::Io {
            path: path.display().to_string(),
            source,
        })?;
    }
    Ok(())
}

/// True when the documents under `root` differ from [`EMBEDDED_DOCS`] (a
/// default index built by an older binary).
pub fn is_stale(root: &std::path::Path) -> bool {
    EMBEDDED_DOCS
        .iter()
        .any(|(name, text)| !std::fs::read_to_string(root.join(name)).is_ok_and(|t| t == *text))
}

/// Brings a default index built by an older binary up to date: rewrites the
/// changed documents under `root` and re-indexes them incrementally (only
/// changed files are re-chunked and re-embedded). `embedder` must be the
/// index's own. Returns the number of documents updated.
pub fn refresh_default_index(
    index: &mut deloop_index::Index,
    root: &std::path::Path,
    embedder: Option<&dyn deloop_index::Embedder>,
) -> deloop_index::Result<u64> {
    write_docs(root)?;
    let stats = index.index_paths(&[root.to_path_buf()], embedder, &mut |_| {})?;
    Ok(stats.updated + stats.removed)
}

/// Builds the default index at `db` from [`EMBEDDED_DOCS`]: writes them
/// under [`embedded_root`] (so citations point at real files) and indexes
/// them with `embedder` (none: lexical only).
pub fn build_default_index(
    db: &std::path::Path,
    embedder: Option<&dyn deloop_index::Embedder>,
) -> deloop_index::Result<(deloop_index::Index, DefaultIndex)> {
    let root = embedded_root(db);
    write_docs(&root)?;
    let root = std::fs::canonicalize(&root).map_err(|source| deloop_index::Error::Io {
        path: root.display().to_string(),
        source,
    })?;
    // Built under a name of its own and renamed into place when complete:
    // a build that fails or is cancelled (the MCP session ended) leaves no
    // half-built index at `db` for the next run to trust.
    let building = building_path(db);
    let built = (|| {
        let mut index = deloop_index::Index::open(&building)?;
        index.index_paths(std::slice::from_ref(&root), embedder, &mut |_| {})
    })();
    let stats = match built {
        Ok(stats) => stats,
        Err(e) => {
            remove_sqlite_files(&building);
            return Err(e);
        }
    };
    std::fs::rename(&building, db).map_err(|source| {
        remove_sqlite_files(&building);
        deloop_index::Error::Io {
            path: db.display().to_string(),
            source,
        }
    })?;
    let index = deloop_index::Index::open_existing(db)?;
    Ok((
        index,
        DefaultIndex {
            root,
            documents: EMBEDDED_DOCS.len(),
            chunks: stats.chunks_total,
            embedder: stats.embedder,
        },
    ))
}

/// Where the default index at `db` is built before it is renamed into
/// place: beside it, named for this process.
fn building_path(db: &std::path::Path) -> std::path::PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".building-{}", std::process::id()));
    db.with_file_name(name)
}

/// Removes an SQLite file and its `-wal` and `-shm` companions, if any.
fn remove_sqlite_files(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_is_present_and_named_once() {
        let mut names = std::collections::HashSet::new();
        for (name, text) in EMBEDDED_DOCS {
            assert!(names.insert(*name));
            assert!(!text.trim().is_empty(), "{name} is empty");
        }
        assert!(EMBEDDED_DOCS[0].1.contains("deloop"));
    }

    /// The top 5 passages for the README's question.
    fn ask(
        index: &deloop_index::Index,
        mode: deloop_index::Retrieval,
        root: &std::path::Path,
    ) -> crate::retrieve::Retrieved {
        crate::retrieve::retrieve(
            index,
            None,
            "How do I stop a looping stream?",
            None,
            &crate::retrieve::RetrieveOptions {
                mode,
                k: 5,
                hyde: crate::retrieve::HydeJoin::default(),
            },
            Some(root),
        )
        .unwrap()
    }

    #[test]
    fn builds_a_lexical_default_index_with_relative_sources() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(".deloop/index.db");
        let (index, built) = build_default_index(&db, None).unwrap();
        assert!(db.is_file());
        assert_eq!(built.documents, EMBEDDED_DOCS.len());
        assert!(built.chunks >= EMBEDDED_DOCS.len() as u64);
        let got = ask(&index, deloop_index::Retrieval::Hybrid, &built.root);
        assert_eq!(got.used, deloop_index::Retrieval::Lexical);
        assert!(got.fallback_reason.is_some());
        assert!(!got.passages.is_empty());
        assert!(!is_stale(&built.root));
        std::fs::write(built.root.join("docs/llm.md"), "# Old\n\nstale text\n").unwrap();
        assert!(is_stale(&built.root));
        drop(got);
        let mut index = index;
        // The index now holds the stale text, as if an older binary built it.
        index
            .index_paths(std::slice::from_ref(&built.root), None, &mut |_| {})
            .unwrap();
        assert_eq!(
            refresh_default_index(&mut index, &built.root, None).unwrap(),
            1
        );
        assert!(!is_stale(&built.root));
        let got = ask(&index, deloop_index::Retrieval::Lexical, &built.root);
        for p in &got.passages {
            assert!(
                EMBEDDED_DOCS.iter().any(|(name, _)| *name == p.source),
                "{}",
                p.source
            );
        }
    }
}
