//! Storage and retrieval for deloop's library oracle: SQLite index, FTS5/BM25, embedders, hybrid search.
//!
//! Work in progress: see issue 5.
#![deny(missing_docs)]
