//! Retrieval for the oracle over a deloop index: the search request for a
//! question and its HyDE passage ([`search_request`]: the query vector,
//! plain or HyDE `concat`/`average`, the lexical expansion, or the
//! passage's own ranking for HyDE `fused`), the HyDE passage cache in the
//! index, and the conversion of chunk matches into [`Passage`]s.

use std::path::Path;

use deloop_index::{ChunkMatch, Embedder, Index, PassageRanking, Retrieval, SearchRequest};

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
/// `mode` says, and in `fused` mode the passage's own vector (the query
/// vector is then the question's alone).
pub fn query_vectors(
    embedder: &dyn Embedder,
    question: &str,
    passage: Option<&str>,
    mode: QueryVectorMode,
) -> Result<(Vec<f32>, Option<Vec<f32>>), deloop_index::EmbedError> {
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
        (None, _) => Ok((first(&[question])?.remove(0), None)),
        (Some(p), QueryVectorMode::Concat) => {
            Ok((first(&[concat_text(question, p).as_str()])?.remove(0), None))
        }
        (Some(p), QueryVectorMode::Average) => {
            let v = first(&[question, p])?;
            let avg = average_vectors(&v[0], &v[1]).ok_or_else(|| {
                deloop_index::EmbedError::Failed("vectors of different lengths".into())
            })?;
            Ok((avg, None))
        }
        (Some(p), QueryVectorMode::Fused) => {
            let mut v = first(&[question, p])?;
            let passage = v.pop();
            Ok((v.remove(0), passage))
        }
    }
}

/// How a HyDE passage joins retrieval: the mode, and the weight of the
/// passage's ranking in `fused` mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HydeJoin {
    /// `fused`, `average` or `concat`.
    pub mode: QueryVectorMode,
    /// The passage ranking's weight in `fused` mode (the question's lists
    /// weigh 1).
    pub fused_weight: f32,
}

impl HydeJoin {
    /// `[oracle] hyde_query_vector` and `hyde_fused_weight` (0 to
    /// [`crate::hyde::MAX_FUSED_WEIGHT`]); an invalid value is an error
    /// that names its key.
    pub fn from_config(
        config: &deloop_config::Config,
    ) -> Result<HydeJoin, deloop_config::ConfigError> {
        use deloop_config::ConfigError;
        let o = &config.oracle;
        let mode = QueryVectorMode::parse(&o.hyde_query_vector).ok_or_else(|| {
            ConfigError::invalid(
                "hyde_query_vector",
                &o.hyde_query_vector,
                "one of fused, average, concat",
            )
        })?;
        let max = crate::hyde::MAX_FUSED_WEIGHT;
        let w = o.hyde_fused_weight;
        if !(w.is_finite() && (0.0..=max).contains(&w)) {
            return Err(ConfigError::invalid(
                "hyde_fused_weight",
                w.to_string(),
                format!("a weight from 0 to {max}"),
            ));
        }
        Ok(HydeJoin {
            mode,
            fused_weight: w,
        })
    }
}

impl Default for HydeJoin {
    fn default() -> Self {
        HydeJoin {
            mode: QueryVectorMode::default(),
            fused_weight: crate::hyde::DEFAULT_FUSED_WEIGHT,
        }
    }
}

/// The search request for `question` and its HyDE `passage` (if any),
/// joined as `hyde` says: with `average` or `concat` the passage changes the
/// query vector and expands the lexical query; with `fused` the question's
/// query is left as it is and the passage is ranked on its own
/// ([`PassageRanking`]). The vectors come from `embedder` unless `mode` is
/// lexical; when it fails, the request has no vector (the search then falls
/// back to lexical) and the error is returned beside it.
pub fn search_request(
    embedder: Option<&dyn Embedder>,
    question: &str,
    passage: Option<&str>,
    hyde: HydeJoin,
    mode: Retrieval,
    k: usize,
) -> (SearchRequest, Option<deloop_index::EmbedError>) {
    let passage = passage.filter(|p| !p.trim().is_empty());
    let mut problem = None;
    let (vector, passage_vector) = match (mode, embedder) {
        (Retrieval::Lexical, _) | (_, None) => (None, None),
        (_, Some(e)) => match query_vectors(e, question, passage, hyde.mode) {
            Ok((q, p)) => (Some(q), p),
            Err(err) => {
                problem = Some(err);
                (None, None)
            }
        },
    };
    let fused = hyde.mode == QueryVectorMode::Fused;
    let req = SearchRequest {
        text: question.to_owned(),
        vector,
        expansion: passage.filter(|_| !fused).map(str::to_owned),
        passage: passage.filter(|_| fused).map(|p| PassageRanking {
            text: p.to_owned(),
            vector: passage_vector,
            weight: hyde.fused_weight,
        }),
        k,
        mode,
        ..Default::default()
    };
    (req, problem)
}

/// What to retrieve.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrieveOptions {
    /// Hybrid, lexical or vector.
    pub mode: Retrieval,
    /// Passages wanted.
    pub k: usize,
    /// How a HyDE passage joins retrieval.
    pub hyde: HydeJoin,
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
    let (req, problem) = search_request(embedder, question, passage, opts.hyde, opts.mode, opts.k);
    let reason = problem.map(|err| {
        tracing::warn!(error = %err, "query embedding failed; lexical search instead");
        format!("the embedder failed: {err}")
    });
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
        let question = Letters.embed(&["aaaa"]).unwrap().remove(0);
        for mode in [
            QueryVectorMode::Average,
            QueryVectorMode::Concat,
            QueryVectorMode::Fused,
        ] {
            let plain = query_vectors(&Letters, "aaaa", None, mode).unwrap();
            assert_eq!(plain, (question.clone(), None), "{mode:?}");
            let blank = query_vectors(&Letters, "aaaa", Some("  "), mode).unwrap();
            assert_eq!(blank, (question.clone(), None), "{mode:?}");
        }
        let passage = Some("bbbbbbbbbbbb");
        let (avg, none) =
            query_vectors(&Letters, "aaaa", passage, QueryVectorMode::Average).unwrap();
        assert!(none.is_none());
        let (cat, none) =
            query_vectors(&Letters, "aaaa", passage, QueryVectorMode::Concat).unwrap();
        assert!(none.is_none());
        // Average: question and passage weigh the same; concat: by length.
        assert!((avg[0] - avg[1]).abs() < 1e-6);
        assert!(cat[1] > 2.9 * cat[0]);
        // Fused: the question's vector as it is, and the passage's own.
        let (q, p) = query_vectors(&Letters, "aaaa", passage, QueryVectorMode::Fused).unwrap();
        assert_eq!(q, question);
        assert_eq!(p.unwrap(), Letters.embed(&["bbbbbbbbbbbb"]).unwrap()[0]);
    }

    #[test]
    fn fused_keeps_the_question_query_and_ranks_the_passage_on_its_own() {
        let join = HydeJoin {
            mode: QueryVectorMode::Fused,
            fused_weight: 0.5,
        };
        let (req, problem) = search_request(
            Some(&Letters),
            "watcher",
            Some("zzz"),
            join,
            Retrieval::Hybrid,
            4,
        );
        assert!(problem.is_none());
        assert_eq!(req.expansion, None);
        assert_eq!(
            req.vector,
            Some(Letters.embed(&["watcher"]).unwrap()[0].clone())
        );
        let p = req.passage.unwrap();
        assert_eq!((p.text.as_str(), p.weight), ("zzz", 0.5));
        assert_eq!(p.vector, Some(Letters.embed(&["zzz"]).unwrap()[0].clone()));
        // Lexical: no vectors; the passage is still ranked (lexically).
        let (req, _) = search_request(
            Some(&Letters),
            "watcher",
            Some("zzz"),
            join,
            Retrieval::Lexical,
            4,
        );
        assert!(req.vector.is_none() && req.expansion.is_none());
        assert_eq!(req.passage.unwrap().vector, None);
        // Average: the passage moves the query vector and expands the text.
        let average = HydeJoin {
            mode: QueryVectorMode::Average,
            ..join
        };
        let (req, _) = search_request(
            Some(&Letters),
            "watcher",
            Some("zzz"),
            average,
            Retrieval::Hybrid,
            4,
        );
        assert!(req.passage.is_none());
        assert_eq!(req.expansion.as_deref(), Some("zzz"));
        assert_ne!(
            req.vector,
            Some(Letters.embed(&["watcher"]).unwrap()[0].clone())
        );
        // A failing embedder: no vectors, and the error.
        let (req, problem) = search_request(
            Some(&Broken),
            "watcher",
            Some("zzz"),
            join,
            Retrieval::Hybrid,
            4,
        );
        assert!(req.vector.is_none());
        assert!(problem.unwrap().to_string().contains("offline"));
    }

    /// A passage about the wrong topic: `average` lets it take the first
    /// place from the section the question finds; `fused` cannot.
    #[test]
    fn a_bad_passage_moves_the_average_but_not_the_fused_ranking() {
        let (_dir, index) = index();
        let bad = "zzz json rescue zzz json rescue zzzz";
        let top = |mode, passage: Option<&str>| {
            let opts = RetrieveOptions {
                mode: Retrieval::Hybrid,
                k: 2,
                hyde: HydeJoin {
                    mode,
                    fused_weight: crate::hyde::DEFAULT_FUSED_WEIGHT,
                },
            };
            let got = retrieve(
                &index,
                Some(&Letters),
                "watcher stream",
                passage,
                &opts,
                None,
            );
            let got = got.unwrap();
            assert_eq!(got.used, Retrieval::Hybrid);
            got.passages[0].source.clone()
        };
        assert!(top(QueryVectorMode::Fused, None).ends_with("a.md"));
        assert!(top(QueryVectorMode::Average, Some(bad)).ends_with("b.md"));
        assert!(top(QueryVectorMode::Concat, Some(bad)).ends_with("b.md"));
        assert!(top(QueryVectorMode::Fused, Some(bad)).ends_with("a.md"));
    }

    #[test]
    fn hybrid_with_vectors_expansion_and_embedder_failure() {
        let (dir, index) = index();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let opts = RetrieveOptions {
            mode: Retrieval::Hybrid,
            k: 2,
            hyde: HydeJoin {
                mode: QueryVectorMode::Average,
                ..HydeJoin::default()
            },
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
