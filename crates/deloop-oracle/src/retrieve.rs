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
            // One text per call: the question must get the very vector of a
            // plain search, and an embedder's numbers may depend on the batch
            // (`minilm-onnx` quantizes activations per batch: embedded beside
            // the passage, the question's vector moved enough to change 142
            // of 299 SciFact top-10 lists at weight 0).
            let question = first(&[question])?.remove(0);
            let passage = first(&[p])?.remove(0);
            Ok((question, Some(passage)))
        }
    }
}

/// How a HyDE passage joins retrieval: the mode, and the weight of the
/// passage's ranking in `fused` mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HydeJoin {
    /// `fused`, `average` or `concat`.
    pub mode: QueryVectorMode,
    /// The passage ranking's largest weight in `fused` mode (the question's
    /// lists weigh 1).
    pub fused_weight: f32,
    /// The exponent of the question's agreement with the passage in `fused`
    /// mode (0: the weight is fixed).
    pub agreement_power: f32,
}

impl HydeJoin {
    /// `[oracle] hyde_query_vector`, `hyde_fused_weight` (0 to
    /// [`crate::hyde::MAX_FUSED_WEIGHT`]) and `hyde_agreement_power` (0 to
    /// [`crate::hyde::MAX_AGREEMENT_POWER`]); an invalid value is an error
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
        let power = o.hyde_agreement_power;
        let max_power = crate::hyde::MAX_AGREEMENT_POWER;
        if !(power.is_finite() && (0.0..=max_power).contains(&power)) {
            return Err(ConfigError::invalid(
                "hyde_agreement_power",
                power.to_string(),
                format!("an exponent from 0 to {max_power}"),
            ));
        }
        Ok(HydeJoin {
            mode,
            fused_weight: w,
            agreement_power: power,
        })
    }
}

impl Default for HydeJoin {
    fn default() -> Self {
        HydeJoin {
            mode: QueryVectorMode::default(),
            fused_weight: crate::hyde::DEFAULT_FUSED_WEIGHT,
            agreement_power: crate::hyde::DEFAULT_AGREEMENT_POWER,
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
    let english = crate::glossary::translate_question(question);
    let rendering = english.as_ref().map(|t| t.rendering.as_str());
    let mut problem = None;
    let (vector, passage_vector) = match (mode, embedder) {
        (Retrieval::Lexical, _) | (_, None) => (None, None),
        (_, Some(e)) => match question_vectors(e, question, rendering, passage, hyde.mode) {
            Ok((q, p)) => (Some(q), p),
            Err(err) => {
                problem = Some(err);
                (None, None)
            }
        },
    };
    let fused = hyde.mode == QueryVectorMode::Fused;
    let hyde_terms = passage.filter(|_| !fused);
    let expansion = match (&english, hyde_terms) {
        (None, p) => p.map(str::to_owned),
        (Some(t), None) => Some(t.terms.join(" ")),
        (Some(t), Some(p)) => Some(format!("{}\n{p}", t.terms.join(" "))),
    };
    let req = SearchRequest {
        text: question.to_owned(),
        vector,
        expansion,
        passage: passage.filter(|_| fused).map(|p| PassageRanking {
            text: p.to_owned(),
            vector: passage_vector,
            weight: hyde.fused_weight,
            agreement_power: hyde.agreement_power,
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

/// Longest passage made by merging overlapping chunks of one section, in
/// bytes: two chunks of the default size (1,200 bytes).
pub const MAX_MERGED_BYTES: usize = 2_400;

/// Retrieves passages for `question` (plus the HyDE `passage`, if any).
/// Without an embedder, or when it fails, hybrid and vector retrieval fall
/// back to lexical and say why.
///
/// * A Spanish question is also rendered in English
///   ([`crate::glossary::translate_question`]): the English terms join the
///   lexical query (after the question's words, before the HyDE passage's),
///   and the question's vector is the mean of the question's and the
///   rendering's embeddings.
/// * Chunks of the same section whose lines overlap or touch are merged into
///   one passage (at most [`MAX_MERGED_BYTES`]), in the place of the better
///   one, so the `k` passages cover `k` distinct pieces of the documents
///   rather than the same lines twice.
pub fn retrieve(
    index: &Index,
    embedder: Option<&dyn Embedder>,
    question: &str,
    passage: Option<&str>,
    opts: &RetrieveOptions,
    root: Option<&Path>,
) -> deloop_index::Result<Retrieved> {
    // Room for merges: each merge frees a place.
    let wanted = opts.k;
    let k = wanted.saturating_mul(2).max(wanted);
    let (req, problem) = search_request(embedder, question, passage, opts.hyde, opts.mode, k);
    let reason = problem.map(|err| {
        tracing::warn!(error = %err, "query embedding failed; lexical search instead");
        format!("the embedder failed: {err}")
    });
    let outcome = index.search(&req)?;
    let (passages, chunk_ids) = merge_sections(
        outcome
            .matches
            .iter()
            .map(|m| (passage_from_match(m, root), m.chunk_id)),
        wanted,
    );
    Ok(Retrieved {
        chunk_ids,
        passages,
        used: outcome.retrieval_used,
        fallback_reason: reason.or(outcome.fallback_reason),
    })
}

/// The query vectors of [`query_vectors`], with the question's own
/// embedding replaced by the mean of it and its English `rendering`'s when
/// there is one (then combined with the HyDE passage as `mode` says).
fn question_vectors(
    embedder: &dyn Embedder,
    question: &str,
    rendering: Option<&str>,
    passage: Option<&str>,
    mode: QueryVectorMode,
) -> Result<(Vec<f32>, Option<Vec<f32>>), deloop_index::EmbedError> {
    let Some(rendering) = rendering.filter(|r| !r.trim().is_empty()) else {
        return query_vectors(embedder, question, passage, mode);
    };
    let mean = |a: &[f32], b: &[f32]| {
        average_vectors(a, b)
            .ok_or_else(|| deloop_index::EmbedError::Failed("vectors of different lengths".into()))
    };
    // `query_vectors` in `Average` mode is exactly the mean of two texts.
    let (q, _) = query_vectors(
        embedder,
        question,
        Some(rendering),
        QueryVectorMode::Average,
    )?;
    match (passage.filter(|p| !p.trim().is_empty()), mode) {
        (None, _) => Ok((q, None)),
        (Some(p), QueryVectorMode::Average) => {
            let (pv, _) = query_vectors(embedder, p, None, mode)?;
            Ok((mean(&q, &pv)?, None))
        }
        (Some(p), QueryVectorMode::Concat) => {
            let (c, _) = query_vectors(embedder, question, Some(p), QueryVectorMode::Concat)?;
            let (r, _) = query_vectors(embedder, rendering, None, mode)?;
            Ok((mean(&c, &r)?, None))
        }
        (Some(p), QueryVectorMode::Fused) => {
            let (pv, _) = query_vectors(embedder, p, None, mode)?;
            Ok((q, Some(pv)))
        }
    }
}

/// Best-first passages with their chunk ids, the overlapping or touching
/// chunks of one section (same source, same heading trail) merged, cut to
/// `k`. A merged passage keeps the better chunk's place, score and id.
fn merge_sections(
    ranked: impl Iterator<Item = (Passage, i64)>,
    k: usize,
) -> (Vec<Passage>, Vec<i64>) {
    let mut out: Vec<(Passage, i64)> = Vec::new();
    for (p, id) in ranked {
        let merged = out.iter_mut().any(|(q, _)| {
            q.source == p.source && q.heading_trail == p.heading_trail && merge_into(q, &p)
        });
        if !merged {
            if out.len() == k {
                break;
            }
            out.push((p, id));
        }
    }
    out.into_iter().unzip()
}

/// Merges `b` into `a` when their line ranges overlap or touch, the lines
/// they share are the same text, and the result fits in
/// [`MAX_MERGED_BYTES`]. Returns whether it did; `a` keeps its score.
fn merge_into(a: &mut Passage, b: &Passage) -> bool {
    let Some((start_line, end_line, text)) = merged_text(a, b) else {
        return false;
    };
    a.start_line = start_line;
    a.end_line = end_line;
    a.text = text;
    true
}

/// The lines and text of two chunks merged, or `None` when they do not
/// overlap or touch, disagree on their shared lines (pieces of one long
/// line), or would be too long together.
fn merged_text(a: &Passage, b: &Passage) -> Option<(u32, u32, String)> {
    let (first, second) = if b.start_line < a.start_line {
        (b, a)
    } else {
        (a, b)
    };
    if second.start_line > first.end_line.saturating_add(1) {
        return None;
    }
    if second.end_line <= first.end_line {
        // `second` lies within `first`'s lines: nothing to add.
        return first
            .text
            .contains(second.text.as_str())
            .then(|| (first.start_line, first.end_line, first.text.clone()));
    }
    let shared = (first.end_line + 1 - second.start_line) as usize;
    let first_lines: Vec<&str> = first.text.split('\n').collect();
    let second_lines: Vec<&str> = second.text.split('\n').collect();
    if shared > first_lines.len() || shared >= second_lines.len() {
        return None;
    }
    let same = first_lines[first_lines.len() - shared..]
        .iter()
        .zip(&second_lines[..shared])
        .all(|(x, y)| x.trim_end_matches('\r') == y.trim_end_matches('\r'));
    if !same {
        return None;
    }
    let crlf = first.text.contains("\r\n") || second.text.contains("\r\n");
    let newline = if crlf { "\r\n" } else { "\n" };
    let text = format!(
        "{}{newline}{}",
        first.text,
        second_lines[shared..].join("\n")
    );
    (text.len() <= MAX_MERGED_BYTES).then_some((first.start_line, second.end_line, text))
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

    /// Letters, plus the batch size in the last component: an embedder
    /// whose vectors depend on their batch, as `minilm-onnx`'s do.
    struct BatchSensitive;

    impl Embedder for BatchSensitive {
        fn id(&self) -> &str {
            "test:batch"
        }
        fn dim(&self) -> usize {
            27
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            let mut v = Letters.embed(texts)?;
            for x in &mut v {
                x.push(texts.len() as f32);
            }
            Ok(v)
        }
    }

    #[test]
    fn fused_gives_the_question_the_vector_of_a_plain_search() {
        let (plain, _) = search_request(
            Some(&BatchSensitive),
            "watcher",
            None,
            HydeJoin::default(),
            Retrieval::Hybrid,
            4,
        );
        let (fused, _) = search_request(
            Some(&BatchSensitive),
            "watcher",
            Some("zzz"),
            HydeJoin::default(),
            Retrieval::Hybrid,
            4,
        );
        assert_eq!(fused.vector, plain.vector);
        assert_eq!(
            fused.passage.unwrap().vector,
            BatchSensitive.embed(&["zzz"]).unwrap().pop()
        );
    }

    #[test]
    fn fused_keeps_the_question_query_and_ranks_the_passage_on_its_own() {
        let join = HydeJoin {
            mode: QueryVectorMode::Fused,
            fused_weight: 0.5,
            agreement_power: 2.0,
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
        assert_eq!(
            (p.text.as_str(), p.weight, p.agreement_power),
            ("zzz", 0.5, 2.0)
        );
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
                    agreement_power: crate::hyde::DEFAULT_AGREEMENT_POWER,
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

    fn passage(trail: &str, lines: (u32, u32), text: &str, score: f64) -> Passage {
        Passage {
            source: "a.md".into(),
            start_line: lines.0,
            end_line: lines.1,
            heading_trail: vec![trail.into()],
            text: text.into(),
            score,
        }
    }

    #[test]
    fn overlapping_chunks_of_a_section_merge_in_the_better_ones_place() {
        let ranked = vec![
            (passage("S", (3, 5), "c\nd\ne", 3.0), 2),
            (passage("T", (1, 2), "x\ny", 2.0), 9),
            (passage("S", (1, 3), "a\nb\nc", 1.5), 1),
            (passage("S", (6, 7), "f\ng", 1.0), 3),
            (passage("S", (4, 4), "d", 0.9), 4),
            (passage("U", (1, 1), "u", 0.5), 5),
        ];
        let (got, ids) = merge_sections(ranked.clone().into_iter(), 2);
        assert_eq!(ids, [2, 9]);
        assert_eq!((got[0].start_line, got[0].end_line), (1, 7));
        assert_eq!(got[0].text, "a\nb\nc\nd\ne\nf\ng");
        assert_eq!(got[0].score, 3.0);
        assert_eq!(got[1].text, "x\ny");
        // k = 3: the third distinct passage comes in.
        let (got, ids) = merge_sections(ranked.into_iter(), 3);
        assert_eq!(ids, [2, 9, 5]);
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn chunks_that_disagree_or_grow_too_long_stay_apart() {
        // Pieces of one long line share a line number, not a text.
        let a = passage("S", (5, 5), "first piece", 2.0);
        let b = passage("S", (5, 6), "second piece\nnext", 1.0);
        let (got, _) = merge_sections(vec![(a, 1), (b, 2)].into_iter(), 5);
        assert_eq!(got.len(), 2);
        // A gap between the chunks: apart.
        let a = passage("S", (1, 2), "a\nb", 2.0);
        let b = passage("S", (4, 5), "d\ne", 1.0);
        assert_eq!(
            merge_sections(vec![(a, 1), (b, 2)].into_iter(), 5).0.len(),
            2
        );
        // Too long together: apart.
        let long = "x".repeat(MAX_MERGED_BYTES);
        let a = passage("S", (1, 1), &long, 2.0);
        let b = passage("S", (2, 2), "y", 1.0);
        assert_eq!(
            merge_sections(vec![(a, 1), (b, 2)].into_iter(), 5).0.len(),
            2
        );
        // CRLF text keeps its line ends.
        let a = passage("S", (1, 2), "a\r\nb", 2.0);
        let b = passage("S", (2, 3), "b\r\nc", 1.0);
        let (got, _) = merge_sections(vec![(a, 1), (b, 2)].into_iter(), 5);
        assert_eq!(got[0].text, "a\r\nb\r\nc");
    }

    #[test]
    fn a_spanish_question_also_searches_its_english_rendering() {
        let (_dir, index) = index();
        let opts = RetrieveOptions {
            mode: Retrieval::Lexical,
            k: 2,
            hyde: HydeJoin::default(),
        };
        let got = retrieve(&index, None, "¿Cómo corto el flujo?", None, &opts, None).unwrap();
        assert_eq!(got.passages.len(), 1);
        assert!(got.passages[0].source.ends_with("a.md"));
        let hybrid = RetrieveOptions {
            mode: Retrieval::Hybrid,
            ..opts
        };
        let got = retrieve(
            &index,
            Some(&Letters),
            "¿Cómo corto el flujo?",
            None,
            &hybrid,
            None,
        )
        .unwrap();
        assert_eq!(got.used, Retrieval::Hybrid);
        assert!(got.passages[0].source.ends_with("a.md"));
        // The vector is the mean of the question's and the rendering's.
        let (v, none) = question_vectors(
            &Letters,
            "¿corto?",
            Some("cut"),
            None,
            QueryVectorMode::Average,
        )
        .unwrap();
        assert!(none.is_none());
        let want = average_vectors(
            &Letters.embed(&["¿corto?"]).unwrap()[0],
            &Letters.embed(&["cut"]).unwrap()[0],
        )
        .unwrap();
        assert_eq!(v, want);
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
