//! Retrieval for the oracle over a deloop index: the query vector (plain,
//! or HyDE `concat`/`average`), the lexical expansion by the HyDE passage,
//! the HyDE passage cache in the index, and the conversion of chunk
//! matches into [`Passage`]s.

use std::path::Path;

use deloop_index::{ChunkMatch, Embedder, Index, Retrieval, SearchRequest};

use crate::hyde::{average_vectors, concat_text, PassageCache, QueryVectorMode};
use crate::types::Passage;

/// The HyDE passage cache stored in the index's SQLite file.
#[derive(Debug)]
pub struct IndexCache<'a>(pub &'a Index);

impl PassageCache for IndexCache<'_> {
    fn get(&self, model: &str, question: &str) -> Option<String> {
        match self.0.hyde_cache_get(model, question) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the HyDE cache");
                None
            }
        }
    }

    fn put(&self, model: &str, question: &str, passage: &str) {
        if let Err(e) = self.0.hyde_cache_put(model, question, passage) {
            tracing::warn!(error = %e, "cannot write the HyDE cache");
        }
    }
}

/// Converts a chunk match into a passage; sources under `root` are shown
/// relative to it (the embedded default corpus lives under such a root).
pub fn passage_from_match(m: &ChunkMatch, root: Option<&Path>) -> Passage {
    let source = root
        .and_then(|r| Path::new(&m.source).strip_prefix(r).ok())
        .and_then(|p| p.to_str())
        .map(str::to_owned)
        .unwrap_or_else(|| m.source.clone());
    Passage {
        source,
        start_line: u32::try_from(m.start_line).unwrap_or(u32::MAX),
        end_line: u32::try_from(m.end_line).unwrap_or(u32::MAX),
        heading_trail: m.heading_trail.clone(),
        text: m.text.clone(),
        score: f64::from(m.score),
    }
}

/// The query vector for `question`, with the HyDE `passage` combined as
/// `mode` says.
pub fn query_vector(
    embedder: &dyn Embedder,
    question: &str,
    passage: Option<&str>,
    mode: QueryVectorMode,
) -> Result<Vec<f32>, deloop_index::EmbedError> {
    let first = |texts: &[&str]| -> Result<Vec<Vec<f32>>, deloop_index::EmbedError> {
        let v = embedder.embed(texts)?;
        if v.len() != texts.len() {
            return Err(deloop_index::EmbedError::Failed(format!(
                "embedder returned {} vectors for {} texts",
                v.len(),
                texts.len()
            )));
        }
        Ok(v)
    };
    match (passage.filter(|p| !p.trim().is_empty()), mode) {
        (None, _) => Ok(first(&[question])?.remove(0)),
        (Some(p), QueryVectorMode::Concat) => {
            Ok(first(&[concat_text(question, p).as_str()])?.remove(0))
        }
        (Some(p), QueryVectorMode::Average) => {
            let v = first(&[question, p])?;
            average_vectors(&v[0], &v[1]).ok_or_else(|| {
                deloop_index::EmbedError::Failed("vectors of different lengths".into())
            })
        }
    }
}

/// What to retrieve.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrieveOptions {
    /// Hybrid, lexical or vector.
    pub mode: Retrieval,
    /// Passages wanted.
    pub k: usize,
    /// How a HyDE passage joins the query vector.
    pub query_vector: QueryVectorMode,
}

/// Passages retrieved, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrieved {
    /// Best first.
    pub passages: Vec<Passage>,
    /// The chunk ids, parallel to `passages`.
    pub chunk_ids: Vec<i64>,
    /// The retrieval that ran.
    pub used: Retrieval,
    /// Why it fell back to lexical, if it did.
    pub fallback_reason: Option<String>,
}

/// Retrieves passages for `question` (plus the HyDE `passage`, if any).
/// Without an embedder, or when it fails, hybrid and vector retrieval fall
/// back to lexical and say why.
pub fn retrieve(
    index: &Index,
    embedder: Option<&dyn Embedder>,
    question: &str,
    passage: Option<&str>,
    opts: &RetrieveOptions,
    root: Option<&Path>,
) -> deloop_index::Result<Retrieved> {
    let mut reason = None;
    let vector = match (opts.mode, embedder) {
        (Retrieval::Lexical, _) => None,
        (_, None) => None,
        (_, Some(e)) => match query_vector(e, question, passage, opts.query_vector) {
            Ok(v) => Some(v),
            Err(err) => {
                tracing::warn!(error = %err, "query embedding failed; lexical search instead");
                reason = Some(format!("the embedder failed: {err}"));
                None
            }
        },
    };
    let req = SearchRequest {
        text: question.to_owned(),
        vector,
        expansion: passage.filter(|p| !p.trim().is_empty()).map(str::to_owned),
        k: opts.k,
        mode: opts.mode,
        ..Default::default()
    };
    let outcome = index.search(&req)?;
    Ok(Retrieved {
        chunk_ids: outcome.matches.iter().map(|m| m.chunk_id).collect(),
        passages: outcome
            .matches
            .iter()
            .map(|m| passage_from_match(m, root))
            .collect(),
        used: outcome.retrieval_used,
        fallback_reason: reason.or(outcome.fallback_reason),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use deloop_index::EmbedError;

    /// A toy embedder: letter counts (a–z), deterministic and cheap.
    struct Letters;

    impl Embedder for Letters {
        fn id(&self) -> &str {
            "test:letters"
        }
        fn dim(&self) -> usize {
            26
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.0f32; 26];
                    for c in t.chars().filter(char::is_ascii_lowercase) {
                        v[(c as u8 - b'a') as usize] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    struct Broken;

    impl Embedder for Broken {
        fn id(&self) -> &str {
            "test:letters"
        }
        fn dim(&self) -> usize {
            26
        }
        fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Err(EmbedError::Failed("offline".into()))
        }
    }

    fn index() -> (tempfile::TempDir, Index) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.md"),
            "# Loops\n\nthe watcher cuts the stream\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("b.md"), "# Rescue\n\nzzz json rescue\n").unwrap();
        let mut index = Index::open_in_memory().unwrap();
        index
            .index_paths(&[dir.path().to_path_buf()], Some(&Letters), &mut |_| {})
            .unwrap();
        (dir, index)
    }

    #[test]
    fn query_vector_modes_differ_and_fall_back_to_the_question() {
        let q = query_vector(&Letters, "abc", None, QueryVectorMode::Average).unwrap();
        assert_eq!(q, Letters.embed(&["abc"]).unwrap()[0]);
        let avg = query_vector(
            &Letters,
            "aaaa",
            Some("bbbbbbbbbbbb"),
            QueryVectorMode::Average,
        )
        .unwrap();
        let cat = query_vector(
            &Letters,
            "aaaa",
            Some("bbbbbbbbbbbb"),
            QueryVectorMode::Concat,
        )
        .unwrap();
        // Average: question and passage weigh the same; concat: by length.
        assert!((avg[0] - avg[1]).abs() < 1e-6);
        assert!(cat[1] > 2.9 * cat[0]);
    }

    #[test]
    fn hybrid_with_vectors_expansion_and_embedder_failure() {
        let (dir, index) = index();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let opts = RetrieveOptions {
            mode: Retrieval::Hybrid,
            k: 2,
            query_vector: QueryVectorMode::Average,
        };
        let got = retrieve(&index, Some(&Letters), "watcher", None, &opts, Some(&root)).unwrap();
        assert_eq!(got.used, Retrieval::Hybrid);
        assert_eq!(got.passages[0].source, "a.md");
        // The HyDE passage expands the lexical query.
        let lexical = RetrieveOptions {
            mode: Retrieval::Lexical,
            ..opts.clone()
        };
        let got = retrieve(
            &index,
            None,
            "qqq",
            Some("json rescue"),
            &lexical,
            Some(&root),
        )
        .unwrap();
        assert_eq!(got.passages[0].source, "b.md");
        // A failing embedder falls back to lexical and says why.
        let got = retrieve(&index, Some(&Broken), "watcher", None, &opts, None).unwrap();
        assert_eq!(got.used, Retrieval::Lexical);
        assert!(got.fallback_reason.unwrap().contains("offline"));
        assert!(got.passages[0].source.ends_with("a.md"));
    }

    #[test]
    fn the_hyde_cache_round_trips_through_sqlite() {
        let (_dir, index) = index();
        let cache = IndexCache(&index);
        assert_eq!(cache.get("m", "q"), None);
        cache.put("m", "q", "passage");
        assert_eq!(cache.get("m", "q").as_deref(), Some("passage"));
        assert_eq!(cache.get("other-model", "q"), None);
    }
}
