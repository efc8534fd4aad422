//! Storage and retrieval for deloop's library oracle: chunks of
//! markdown/text documents (or a BEIR corpus), a BM25 lexical index,
//! optional embedding vectors, and a HyDE passage cache, in one SQLite file
//! (FTS5) or in a PostgreSQL database with pgvector (`postgres://…`). Both
//! backends give the same chunks, ids and BM25 rankings.
//!
//! ```
//! use deloop_index::{Index, Retrieval, SearchRequest};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("guide.md"), "# Cuenta\n\nPara cambiar la contraseña abre Ajustes.\n").unwrap();
//! let mut index = Index::open_in_memory().unwrap();
//! let stats = index.index_paths(&[dir.path().to_path_buf()], None, &mut |_| {}).unwrap();
//! assert_eq!(stats.chunks_written, 1);
//!
//! let request = SearchRequest { text: "contrasena".into(), k: 5, mode: Retrieval::Lexical, ..Default::default() };
//! let outcome = index.search(&request).unwrap();
//! assert_eq!(outcome.matches.len(), 1);
//! assert_eq!(outcome.matches[0].start_line, 1);
//! ```
#![deny(missing_docs)]

mod backend;
pub mod bm25;
pub mod chunk;
pub mod embed;
pub mod fetch;
mod ingest;
#[cfg(feature = "postgres")]
mod lexer;
pub mod onnx;
mod search;
mod stopwords;
mod store;

pub use backend::{display_location, is_database_url, unsupported_location, DEFAULT_DB_TIMEOUT};
pub use chunk::{Chunk, ChunkConfig};
pub use embed::{
    auto_local_embedder, cache_dir, cosine, fetch_minilm_dir, find_minilm_dir, load_minilm,
    load_minilm_onnx, local_embedder_for_id, minilm_dir, EmbedError, Embedder, SharedEmbedder,
    MINILM_DIR_ENV, MINILM_FILES, MINILM_ID, MINILM_ONNX_ID_PREFIX,
};
#[cfg(feature = "local-embedders")]
pub use embed::{load_onnx, MiniLm};
pub use fetch::{
    set_fetch_progress, FetchError, FetchProgress, FetchSettings, PinnedFiles, PinnedWheel,
    MODEL_BASE_URL_ENV, MODEL_FETCH_ENV,
};
pub use ingest::{IndexStats, Progress};
#[cfg(feature = "local-embedders")]
pub use onnx::MiniLmOnnx;
pub use onnx::{fetch_onnx_dir, find_onnx_dir, onnx_dir, onnx_files, ONNX_DIR_ENV};
pub use search::{
    fts_query, passage_agreement, reciprocal_rank_fusion, weighted_reciprocal_rank_fusion,
    ChunkMatch, PassageRanking, Retrieval, SearchOutcome, SearchRequest, AGREEMENT_DEPTH,
    DEFAULT_RRF_K,
};
pub use stopwords::{fold_accents, is_stopword};
pub use store::{EmbedderInfo, Index, IndexOptions, IndexSummary, Stemmer, SCHEMA_VERSION};

/// Errors of the index.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No index file exists at the path.
    #[error("no index at {path}: run `deloop index PATH...` first (or pass --db)")]
    NoIndex {
        /// The missing file.
        path: String,
    },
    /// The SQLite file is not a deloop index, or of another schema version.
    #[error("{0}")]
    Schema(String),
    /// The index holds vectors of another embedder (or none) than requested.
    #[error(
        "this index was built with embedder `{index}`, not `{requested}`: use the same \
         embedder (--embedder), or rebuild the index with --reindex"
    )]
    EmbedderMismatch {
        /// The embedder recorded in the index.
        index: String,
        /// The embedder that was asked for.
        requested: String,
    },
    /// Input the user must fix: a missing path, a malformed corpus line.
    #[error("{0}")]
    BadInput(String),
    /// An embedder failed while indexing.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// SQLite failed.
    #[error("index database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed, or its server cannot hold a deloop index (too old,
    /// no `vector` extension). The message names the database (never its
    /// password) and what to do.
    #[error("{0}")]
    Postgres(String),
    /// The PostgreSQL server cannot be reached now (down, restarting, out
    /// of connections, or no answer in time): retrying later may succeed.
    #[error("{0}")]
    Unavailable(String),
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
